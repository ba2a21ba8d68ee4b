"""Every console URL × every kind of person → the answer they get: sent to sign in (`login`), 403, 404,
405 or the page. The rows are read against the URL resolver: a console URL without a row fails the
test, so a new page cannot ship unchecked. People: nobody signed in, a member without namespace roles,
a member who is reader or operator on the namespace, an organisation admin, the owner, and the owner
of another organisation. Writes are posted with forms that fail validation where they would otherwise
change something, so the rows check who is let through to validation, in the order pages check."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from django.core.cache import caches
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from frontend.views import interactive
from tenants.models import ApiKey, Membership, Namespace
from tests.integration.test_console_schedules_export import _schedule
from tests.integration.test_rest_api import Api, create_key, create_namespace, invite_and_join, signup
from tests.integration.test_run_export_rest import _start, signing_key  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db

PEOPLE = ("anonymous", "member", "reader", "operator", "admin", "owner", "other")
LOGIN = "login"


@dataclass
class World:
    """One organisation with a namespace, a run, a schedule and a key, and the people of the matrix."""

    org: str
    namespace: Namespace
    workflow_id: str
    run_id: str
    schedule_id: str
    key: ApiKey
    other_org: str
    memberships: dict[str, int] = field(default_factory=dict)
    invitation: str = ""
    users: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Row:
    method: str
    path: Callable[[World], str]
    expected: dict[str, object]
    data: Callable[[World], dict] = lambda w: {}


def _all(code: object, **changes: object) -> dict[str, object]:
    return {**dict.fromkeys(PEOPLE, code), **changes}


def _signed_in(code: object, **changes: object) -> dict[str, object]:
    return _all(code, anonymous=LOGIN, **changes)


def _namespace(read: object, write: object = None, admin: object = None) -> dict[str, object]:
    """A namespace page: 404 for those without a role on it; `read` for readers, `write` from operator,
    `admin` for organisation admins and owners."""
    write = read if write is None else write
    admin = write if admin is None else admin
    return {
        "anonymous": LOGIN,
        "member": 404,
        "reader": read,
        "operator": write,
        "admin": admin,
        "owner": admin,
        "other": 404,
    }


def _run(w: World) -> str:
    return f"/namespaces/{w.namespace.name}/workflows/{w.workflow_id}/{w.run_id}"


READER_403 = 403
ROWS: dict[str, Row] = {
    "console-home": Row("GET", lambda w: "/", _signed_in(302)),
    # The operator's (a bearer token or a superuser; tests/e2e/test_metrics.py): no tenant, owner or not.
    "metrics": Row("GET", lambda w: "/metrics", _all(403)),
    "console-login": Row("GET", lambda w: "/login/", _all(200)),
    "console-logout": Row("POST", lambda w: "/logout/", _all(LOGIN)),
    "console-signup": Row("GET", lambda w: "/signup/", _all(200)),
    "console-signup-confirm": Row("GET", lambda w: "/signup/confirm/?token=x", _all(200)),
    "console-password-reset": Row("GET", lambda w: "/password-reset/", _all(200)),
    "console-password-reset-confirm": Row(
        "GET", lambda w: "/password-reset/confirm/?uid=x&token=y", _all(200)
    ),
    "console-invitation-accept": Row("GET", lambda w: "/invitations/accept/?token=x", _all(404)),
    "console-org-switch": Row(
        "POST",
        lambda w: "/organization/switch",
        _signed_in(302, other=404),
        lambda w: {"organization": w.org},
    ),
    "console-namespaces": Row("GET", lambda w: "/namespaces", _signed_in(200)),
    "console-members": Row("GET", lambda w: "/organization/members", _signed_in(200)),
    "console-member-role": Row(
        "POST",
        lambda w: f"/organization/members/{w.memberships['member']}/role",
        _signed_in(403, admin=400, owner=400, other=404),
        lambda w: {"role": "emperor"},
    ),
    # Removing the owner: an admin may not unmake an owner; the owner is the last one.
    "console-member-remove": Row(
        "POST",
        lambda w: f"/organization/members/{w.memberships['owner']}/remove",
        _signed_in(403, owner=400, other=404),
    ),
    "console-member-access": Row(
        "POST",
        lambda w: f"/organization/members/{w.memberships['member']}/access",
        _signed_in(403, member=404, admin=400, owner=400, other=404),
        lambda w: {f"ns-{w.namespace.id}": "emperor"},
    ),
    "console-invitations": Row(
        "POST", lambda w: "/organization/invitations", _signed_in(403, admin=400, owner=400, other=400)
    ),
    "console-invitation-revoke": Row(
        "POST",
        lambda w: f"/organization/invitations/{w.invitation}/revoke",
        _signed_in(403, admin=302, owner=302, other=404),
    ),
    "console-invitation-resend": Row(
        "POST",
        lambda w: f"/organization/invitations/{w.invitation}/resend",
        _signed_in(403, admin=302, owner=302, other=404),
    ),
    "console-audit": Row(
        "GET", lambda w: "/organization/audit", _signed_in(403, admin=200, owner=200, other=200)
    ),
    "console-audit-export": Row(
        "GET", lambda w: "/organization/audit/export", _signed_in(403, admin=200, owner=200, other=200)
    ),
    "console-api-keys": Row("GET", lambda w: "/organization/api-keys", _signed_in(200)),
    "console-api-key-revoke": Row(
        "POST",
        lambda w: f"/organization/api-keys/{w.key.id}/revoke",
        _signed_in(404, admin=200, owner=200),
    ),
    "console-api-key-rotate": Row(
        "POST",
        lambda w: f"/organization/api-keys/{w.key.id}/rotate",
        _signed_in(404, admin=400, owner=400),
        lambda w: {"grace_seconds": "-1"},
    ),
    "console-namespace-settings": Row(
        "GET", lambda w: f"/namespaces/{w.namespace.name}/settings", _namespace(403, 403, 200)
    ),
    "console-namespace-archival": Row(
        "POST",
        lambda w: f"/namespaces/{w.namespace.name}/settings/archival",
        _namespace(403, 403, 400),
        lambda w: {"history_enabled": "1", "history_uri": "file:///not-s3"},
    ),
    "console-namespace-sa-add": Row(
        "POST",
        lambda w: f"/namespaces/{w.namespace.name}/settings/search-attributes",
        _namespace(403, 403, 400),
        lambda w: {"name": "Region", "type": "NoSuchType"},
    ),
    "console-namespace-sa-remove": Row(
        "POST",
        lambda w: f"/namespaces/{w.namespace.name}/settings/search-attributes/remove",
        _namespace(403, 403, 400),
        lambda w: {"name": "NotThere"},
    ),
    "console-namespace-delete": Row(
        "POST",
        lambda w: f"/namespaces/{w.namespace.name}/settings/delete",
        _namespace(403, 403, 400),
        lambda w: {"confirm": "not its name"},
    ),
    # Data protection (tests/integration/test_console_compliance.py erases and rotates): an erasure with
    # no subject, a rotation without its form's confirmation, a re-encryption with nothing to move.
    "console-namespace-erase": Row(
        "POST",
        lambda w: f"/namespaces/{w.namespace.name}/settings/erase",
        _namespace(403, 403, 400),
        lambda w: {"subject": ""},
    ),
    "console-namespace-data-key": Row(
        "GET", lambda w: f"/namespaces/{w.namespace.name}/settings/data-key", _namespace(403, 403, 200)
    ),
    "console-namespace-rotate-key": Row(
        "POST",
        lambda w: f"/namespaces/{w.namespace.name}/settings/data-key/rotate",
        _namespace(403, 403, 400),
    ),
    "console-namespace-reencrypt": Row(
        "POST",
        lambda w: f"/namespaces/{w.namespace.name}/settings/data-key/reencrypt",
        _namespace(403, 403, 400),
    ),
    "console-workflows": Row("GET", lambda w: f"/namespaces/{w.namespace.name}/workflows", _namespace(200)),
    # A person's own list settings: whoever may see the list may keep them (a reader too); the forms
    # posted fail validation (an unknown column; a view without a name, sent back to the list with the
    # refusal; a view that is not theirs).
    "console-list-columns": Row(
        "POST",
        lambda w: f"/namespaces/{w.namespace.name}/list-columns",
        _namespace(400),
        lambda w: {"column": "no-such-column"},
    ),
    "console-view-save": Row(
        "POST",
        lambda w: f"/namespaces/{w.namespace.name}/saved-views",
        _namespace(302),
        lambda w: {"name": " "},
    ),
    "console-view-delete": Row(
        "POST", lambda w: f"/namespaces/{w.namespace.name}/saved-views/{uuid.uuid4()}/delete", _namespace(404)
    ),
    "console-run": Row("GET", lambda w: _run(w) + "/history", _namespace(200)),
    "console-run-bar": Row("GET", lambda w: _run(w) + "/actions", _namespace(200)),
    # The action dialogs answer a refused form with 200 and its message in the dialog (htmx swaps it in).
    "console-run-cancel": Row("POST", lambda w: _run(w) + "/cancel", _namespace(403, 200)),
    "console-run-terminate": Row("POST", lambda w: _run(w) + "/terminate", _namespace(403, 200)),
    "console-run-signal": Row("POST", lambda w: _run(w) + "/signal", _namespace(403, 200)),
    "console-run-query": Row("POST", lambda w: _run(w) + "/query", _namespace(200)),
    # (No worker answers: each allowed ask waits its 10 s and says so.)
    "console-run-stack-trace": Row("POST", lambda w: _run(w) + "/stack-trace", _namespace(200)),
    "console-run-update": Row("POST", lambda w: _run(w) + "/update", _namespace(403, 200)),
    "console-run-reset-form": Row("GET", lambda w: _run(w) + "/reset", _namespace(403, 200)),
    "console-run-reset-preview": Row("GET", lambda w: _run(w) + "/reset/preview", _namespace(403, 200)),
    "console-run-reset": Row("POST", lambda w: _run(w) + "/reset/run", _namespace(403, 200)),
    "console-run-timeline": Row("GET", lambda w: _run(w) + "/timeline", _namespace(200)),
    "console-run-export": Row("GET", lambda w: _run(w) + "/export", _namespace(200)),
    "console-schedules": Row("GET", lambda w: f"/namespaces/{w.namespace.name}/schedules", _namespace(200)),
    "console-schedule": Row(
        "GET", lambda w: f"/namespaces/{w.namespace.name}/schedules/{w.schedule_id}", _namespace(200)
    ),
    "console-schedule-action": Row(
        "POST",
        lambda w: f"/namespaces/{w.namespace.name}/schedules/{w.schedule_id}/pause",
        _namespace(403, 400),
    ),
    # Creating and editing need what CreateSchedule and UpdateSchedule need (operator); the posts fail
    # validation (no schedule id; an edit without the schedule's conflict token).
    # (The forms' GETs answer the same 403 to readers: tests/integration/test_console_schedule_forms.py.)
    "console-schedule-create": Row(
        "POST", lambda w: f"/namespaces/{w.namespace.name}/create-schedule", _namespace(403, 400)
    ),
    "console-schedule-edit": Row(
        "POST",
        lambda w: f"/namespaces/{w.namespace.name}/schedules/{w.schedule_id}/edit",
        _namespace(403, 400),
    ),
    # No reason: refused before anything is deleted (the schedule stays for the rows after this one).
    "console-schedule-delete": Row(
        "POST",
        lambda w: f"/namespaces/{w.namespace.name}/schedules/{w.schedule_id}/delete",
        _namespace(403, 400),
    ),
    "console-batches": Row(
        "GET", lambda w: f"/namespaces/{w.namespace.name}/batch-operations", _namespace(200)
    ),
    # The form's GET is a read (how many runs match; readers see no start control); its POST needs the
    # operator role, as StartBatchOperation does (tests/integration/test_console_batches.py posts it as a reader).
    "console-batch-new": Row(
        "GET",
        lambda w: f"/namespaces/{w.namespace.name}/batch-operations/new?query=WorkflowType%3D%27x%27",
        _namespace(200),
    ),
    # No such batch: those who may read it learn that, the others do not get that far.
    "console-batch": Row(
        "GET", lambda w: f"/namespaces/{w.namespace.name}/batch-operations/no-such-job", _namespace(404)
    ),
    "console-batch-stop": Row(
        "POST",
        lambda w: f"/namespaces/{w.namespace.name}/batch-operations/no-such-job/stop",
        _namespace(403, 404),
        lambda w: {"reason": "matrix"},
    ),
    # Last: it changes the namespace's state (reads and the rows above do not depend on it).
    "console-namespace-deprecate": Row(
        "POST", lambda w: f"/namespaces/{w.namespace.name}/settings/deprecate", _namespace(403, 403, 302)
    ),
}

VARIANTS: dict[str, Row] = {
    # The list's Archived tab reads the archive index through the same page: the same people see it.
    "console-workflows?archived=1": Row(
        "GET", lambda w: f"/namespaces/{w.namespace.name}/workflows?archived=1", _namespace(200)
    ),
    "console-workflows?archived=1&query=": Row(
        "GET",
        lambda w: f"/namespaces/{w.namespace.name}/workflows?archived=1&query=WorkflowId%20%3D%20%22x%22",
        _namespace(200),
    ),
}
"""Query strings that switch a page to other data (the archive): rows of their own, URLs they share."""


def _console_names() -> set[str]:
    """The names of every URL the console serves (everything but the REST API, the websockets, static
    files and the health probes)."""
    names: set[str] = set()

    def walk(patterns, prefix: str = "") -> None:  # type: ignore[no-untyped-def]
        for p in patterns:
            route = prefix + str(p.pattern)
            if isinstance(p, URLResolver):
                walk(p.url_patterns, route)
            elif isinstance(p, URLPattern):
                if route.lstrip("^").startswith(("api/", "live", "static", "admin", "healthz", "readyz")):
                    continue
                assert p.name, f"console URL {route} has no name"
                names.add(p.name)

    walk(get_resolver().url_patterns)
    return names


def test_every_console_url_has_a_row():
    """A console URL without a row here fails: say who may use it before shipping it."""
    missing = _console_names() - set(ROWS)
    assert not missing, f"add rows to ROWS for {sorted(missing)}"
    assert not set(ROWS) - _console_names(), "rows for URLs that no longer exist"


@pytest.fixture
def world(signing_key) -> World:  # noqa: F811
    caches["throttle"].clear()
    owner, org = signup()
    ns = create_namespace(owner, "orders")
    workflow_id, run_id = _start(ns["id"])
    namespace = Namespace.objects.get(pk=ns["id"])
    key_id = create_key(owner, [ns["id"]], role="reader").json()["id"]
    people = {"owner": Membership.objects.get(organization__slug=org, role="owner").user}
    members = {m["email"]: m["id"] for m in []}
    for person, org_role, ns_role in [
        ("member", "member", None),
        ("reader", "member", "reader"),
        ("operator", "member", "operator"),
        ("admin", "admin", None),
    ]:
        invite_and_join(owner, f"{person}@{org}.example", role=org_role)
        membership = Membership.objects.get(organization__slug=org, user__email=f"{person}@{org}.example")
        people[person] = membership.user
        if ns_role:
            r = owner.put(f"/api/v1/namespaces/{ns['id']}/access/{membership.id}/", {"role": ns_role})
            assert r.status_code == 200, r.content
    del members
    invited = owner.post("/api/v1/invitations/", {"email": f"later@{org}.example", "role": "member"})
    assert invited.status_code == 201, invited.content
    _, other_org = signup()
    people["other"] = Membership.objects.get(organization__slug=other_org).user
    other = Api()
    other.client.force_login(people["other"])
    caches["throttle"].clear()
    return World(
        org=org,
        namespace=namespace,
        workflow_id=workflow_id,
        run_id=run_id,
        schedule_id=_schedule(namespace),
        key=ApiKey.objects.get(pk=key_id),
        other_org=other_org,
        users=people,
        memberships={
            person: Membership.objects.get(organization__slug=org, user=user).id
            for person, user in people.items()
            if person != "other"
        },
        invitation=invited.json()["id"],
    )


def _answer(response) -> object:  # type: ignore[no-untyped-def]
    if response.status_code == 302 and response["Location"].startswith("/login/"):
        return LOGIN
    return response.status_code


@pytest.mark.django_db(transaction=True)  # the query and update pages read the session on another thread
def test_authorization_matrix(world, monkeypatch):
    """Each row's answers for every person, from a fresh session each (no row leaks into another), asked
    as htmx asks (the action dialogs' parts answer other requests with a redirect to the run page)."""
    # No worker answers the run's stack-trace query: each person let in waited the full 10 s for the page's
    # "no answer" part (40 of the test's 46 s). The status is what the matrix checks.
    monkeypatch.setattr(interactive, "QUERY_TIMEOUT_SECONDS", 0.2)
    found: dict[str, dict[str, object]] = {}
    rows = ROWS | VARIANTS
    for name, row in rows.items():
        found[name] = {}
        for person in PEOPLE:
            client = Client(HTTP_HX_REQUEST="true")
            if person != "anonymous":
                client.force_login(world.users[person])
            path = row.path(world)
            response = client.get(path) if row.method == "GET" else client.post(path, row.data(world))
            found[name][person] = _answer(response)
    wrong = {
        name: {p: (found[name][p], row.expected[p]) for p in PEOPLE if found[name][p] != row.expected[p]}
        for name, row in rows.items()
    }
    wrong = {name: diff for name, diff in wrong.items() if diff}
    assert not wrong, "(got, expected) by URL and person: " + repr(wrong)


def test_pages_offer_no_control_their_person_may_not_use(world):
    """A reader's namespace pages and key list show no write control; an owner's show them."""
    reader, owner = Client(), Client()
    reader.force_login(world.users["reader"])
    owner.force_login(world.users["owner"])
    dashboard = reader.get("/namespaces").content.decode()
    assert "Create a namespace" not in dashboard
    assert "/settings" not in dashboard
    assert "Create a namespace" in owner.get("/namespaces").content.decode()
    keys = reader.get("/organization/api-keys").content.decode()
    assert "Revoke" not in keys  # the owner's key is not theirs to see
    assert uuid.UUID(str(world.key.id)).hex not in keys.replace("-", "")
