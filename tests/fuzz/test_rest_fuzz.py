"""schemathesis over the REST API's own OpenAPI schema (/api/schema/): no 5xx, ever.

The real WSGI app in-process on the real Postgres test database (as tests/integration/test_rest_api.py),
each operation fuzzed as three callers: a signed-in owner (session cookie and CSRF token), an admin API
key, and nobody. Path ids are half the time real ones (the caller's namespace, member, key, invitation),
so requests get past the lookups. A 5xx, or an exception that Django logged, is a finding.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

# schemathesis is a pytest plugin, so pytest rewrites its modules as they are imported, with ast.parse. On
# CPython 3.11.7 two threads parsing at once can fail with "AST constructor recursion depth mismatch"
# (CPython gh-106905, fixed in 3.11.8), and a test before this one can leave an SDK thread importing. Its
# modules are imported here, at collection, while only the main thread runs.
import schemathesis
import schemathesis.specs.openapi.schemas  # noqa: F401  (the lazy import that failed in CI)
from django.core.cache import caches
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import Client
from hypothesis import strategies as st

from tests.fuzz import summary
from tests.fuzz.conftest import examples
from tests.fuzz.grpc_campaign import last_frame, run_property
from tests.integration.test_rest_api import signup_token

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(1800)]
PASSWORD = "correct horse battery 9"


@dataclass
class Caller:
    name: str
    headers: dict[str, str]
    cookies: dict[str, str]
    ids: dict[str, list[str]]


def make_callers() -> list[Caller]:
    """A fresh organisation: its owner's session, an admin key, and an anonymous caller."""
    caches["throttle"].clear()
    org = f"f{uuid.uuid4().hex[:8]}"
    browser = Client(enforce_csrf_checks=True)
    browser.get("/api/v1/auth/csrf/")
    csrf = browser.cookies["csrftoken"].value

    def post(path: str, body: dict) -> dict:
        r = browser.post(path, data=json.dumps(body), content_type="application/json", HTTP_X_CSRFTOKEN=csrf)
        assert r.status_code in (200, 201, 202), (path, r.status_code, r.content[:300])
        return r.json() if r.content else {}

    email = f"owner@{org}.example"
    post("/api/v1/auth/signup/", {"email": email, "password": PASSWORD, "organization": org})
    post("/api/v1/auth/signup/confirm/", {"token": signup_token(email)})
    csrf = browser.cookies["csrftoken"].value  # login rotates it
    namespace = post("/api/v1/namespaces/", {"name": "alpha", "retention_days": 3})
    key = post("/api/v1/api-keys/", {"name": "fuzz", "role": "admin", "namespaces": [namespace["id"]]})
    invitation = post("/api/v1/invitations/", {"email": f"guest@{org}.example", "role": "member"})
    members = browser.get("/api/v1/members/").json()
    members = members.get("results", members) if isinstance(members, dict) else members
    ids = {
        "namespaces": [str(namespace["id"])],
        "members": [str(m["id"]) for m in members],
        "api-keys": [str(key["id"])],
        "invitations": [str(invitation["id"])],
    }
    session = {"sessionid": browser.cookies["sessionid"].value, "csrftoken": csrf}
    return [
        Caller("session", {"X-CSRFToken": csrf}, session, ids),
        Caller("api-key", {"Authorization": f"Bearer {key['key']}"}, {}, ids),
        Caller("anonymous", {}, {}, ids),
    ]


class _Errors(logging.Handler):
    """Collects what django.request logs for a 5xx: the traceback of the exception behind it."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.frames: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = (
            logging.Formatter().formatException(record.exc_info) if record.exc_info else record.getMessage()
        )
        self.frames.append(last_frame(text))


@dataclass
class RestFindings:
    calls: int = 0
    statuses: Counter = field(default_factory=Counter)
    by_caller: Counter = field(default_factory=Counter)
    operations: set[str] = field(default_factory=set)
    found: dict[tuple[str, str], dict] = field(default_factory=dict)


_PATH_IDS = {
    "namespace_id": "namespaces",
    "member_id": "members",
    "key_id": "api-keys",
    "invitation_id": "invitations",
}


def real_ids(case, caller: Caller, pick: int) -> None:
    """Swap generated ids for ones that exist: path ids, and the namespace ids a key grant names."""
    for name in case.path_parameters or {}:
        values = caller.ids.get(_PATH_IDS.get(name, ""))
        if values:
            case.path_parameters[name] = values[pick % len(values)]
    if isinstance(case.body, dict) and isinstance(case.body.get("namespaces"), list):
        case.body["namespaces"] = list(caller.ids["namespaces"])


def _unhook_connection_close() -> None:
    """The real WSGI handler closes the connection after each request, which would end the test's
    transaction; Django's test client unhooks the same handlers for its calls (and hooks them back after
    each, so this runs before every call)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)


def test_rest_api_fuzz(tmp_path: Path, settings, monkeypatch, request):
    # A fast hasher: each operation signs up a fresh organisation, and fuzzed logins hash what they send.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # A configured installation: without a signing key the run export answers 503 by design, naming it.
    from engine.exports import signing

    monkeypatch.setenv(signing.ENV_VAR, signing.generate())
    signing.signing_key.cache_clear()
    request.addfinalizer(signing.signing_key.cache_clear)
    from perdura.wsgi import application

    _unhook_connection_close()
    schema = schemathesis.openapi.from_wsgi("/api/schema/", application)
    errors = _Errors()
    logging.getLogger("django.request").addHandler(errors)
    results = RestFindings()
    began = time.monotonic()
    operations = [result.ok() for result in schema.get_all_operations()]
    callers = None
    try:
        for operation in operations:
            label = f"{operation.method.upper()} {operation.path}"
            if operation.path.endswith("/auth/logout/"):
                continue  # it ends the session the other operations fuzz with; covered below, last
            if operation.method.upper() != "GET" or callers is None:
                callers = make_callers()  # a write may have removed what the callers hold: fresh ones
            for caller in callers:
                strategy = st.tuples(operation.as_strategy(), st.booleans(), st.integers(0, 7))

                def check(drawn, caller=caller, label=label) -> str:
                    case, real, pick = drawn
                    if real:
                        real_ids(case, caller, pick)
                    before = len(errors.frames)
                    _unhook_connection_close()
                    response = case.call(headers=dict(caller.headers), cookies=dict(caller.cookies))
                    results.calls += 1
                    results.statuses[response.status_code] += 1
                    results.by_caller[f"{caller.name} {label}", response.status_code] += 1
                    results.operations.add(label)
                    caches["throttle"].clear()
                    frames = errors.frames[before:]
                    if response.status_code < 500 and not frames:
                        return ""
                    frame = frames[-1] if frames else "(nothing logged)"
                    key = (label, frame)
                    request = f"{caller.name}: {case.method} {case.formatted_path} query={case.query} body={case.body!r}"
                    entry = results.found.setdefault(
                        key, {"operation": label, "status": response.status_code, "frame": frame, "count": 0}
                    )
                    entry["count"] += 1
                    if "request" not in entry or len(request) < len(entry["request"]):
                        entry["request"] = request[:1500]
                    return f"{label}|{frame}"

                run_property(strategy, check, examples(5))
        # logout last, as each kind of caller
        for caller in make_callers():
            r = Client().post("/api/v1/auth/logout/", headers=caller.headers)
            assert r.status_code < 500
    finally:
        logging.getLogger("django.request").removeHandler(errors)
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)

    findings_file = Path(os.environ.get("PERDURA_FUZZ_REST_FINDINGS", tmp_path / "rest-findings.jsonl"))
    with findings_file.open("w") as out:
        for entry in results.found.values():
            out.write(json.dumps(entry, default=str) + "\n")
        by_caller = {f"{name} {code}": n for (name, code), n in sorted(results.by_caller.items())}
        out.write(json.dumps({"answers": by_caller}) + "\n")
    summary.LINES.append(
        f"FUZZ rest: {results.calls} requests, {len(results.operations)} operations covered "
        f"(of {len(operations)}), {sum(e['count'] for e in results.found.values())} server errors, "
        f"{len(results.found)} distinct; statuses {dict(sorted(results.statuses.items()))}; "
        f"{time.monotonic() - began:.0f}s; findings in {findings_file}"
    )
    listing = "\n".join(
        f"  {e['operation']}: {e['status']} x{e['count']} at {e['frame']} | {e['request'][:400]}"
        for e in results.found.values()
    )
    print(listing)
    assert len(results.operations) == len(operations) - 1  # every operation but logout, fuzzed above
    assert not results.found, f"server errors:\n{listing}"
