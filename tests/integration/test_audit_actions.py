"""Every control-plane change the REST API offers, made by a person (session) and, where the API lets
one, by an API key, leaves its own audit entry: action, actor, namespace, target, source address and
outcome; refused and failed changes too. tests/unit/test_audit_actions.py checks that the actions
covered here and in tests/e2e/test_audit_actions.py are every action the code records."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.core.cache import caches
from django.test import TestCase

from tenants.models import AuditEvent, Namespace
from tests.integration.test_rest_api import PASSWORD, Api, signup_token

pytestmark = pytest.mark.django_db

ADDRESS = "203.0.113.7"
"""The client address every request of this file comes from (REMOTE_ADDR): the entries must name it."""


@pytest.fixture(autouse=True)
def _fresh_throttles():
    caches["throttle"].clear()
    yield
    caches["throttle"].clear()


class Client(Api):
    """A REST client calling from ADDRESS, and who the audit log must name for its calls."""

    def __init__(self, key: str | None = None, actor: dict | None = None) -> None:
        super().__init__(key=key)
        self.actor = actor or {}

    def call(self, method: str, path: str, body: dict | None = None, **extra):
        return super().call(method, path, body, REMOTE_ADDR=ADDRESS, **extra)


def ok(response, status: int = 200):
    assert response.status_code == status, response.content
    return response.json() if response.content else None


def person(email: str) -> dict:
    user = get_user_model().objects.get(email=email)
    return {"kind": "user", "id": str(user.pk), "label": email}


@dataclass
class World:
    """An organisation: its owner (a session) and an admin API key of one of its namespaces."""

    owner: Client
    org: str
    admin_key: Client = field(init=False)

    def namespace(self, api: Client) -> dict:
        name = f"n{uuid.uuid4().hex[:8]}"
        return ok(api.post("/api/v1/namespaces/", {"name": name, "retention_days": 3}), 201)

    def key(self, role: str = "reader", namespaces: list[str] | None = None) -> Client:
        """A new key (made by the owner) as a client; `.made` is the creation answer."""
        namespaces = namespaces or [self.namespace(self.owner)["id"]]
        body = {"name": f"k{uuid.uuid4().hex[:6]}", "role": role, "namespaces": namespaces}
        made = ok(self.owner.post("/api/v1/api-keys/", body), 201)
        client = Client(key=made["key"], actor={"kind": "key", "id": made["prefix"], "label": made["name"]})
        client.made = made
        return client

    def invite(self, email: str, role: str = "member") -> tuple[dict, str]:
        mail.outbox.clear()
        with TestCase.captureOnCommitCallbacks(execute=True):  # the email leaves after commit
            invitation = ok(self.owner.post("/api/v1/invitations/", {"email": email, "role": role}), 201)
        token = re.search(r"token=([A-Za-z0-9_-]+)", mail.outbox[-1].body).group(1)
        return invitation, token

    def member(self, role: str = "member") -> tuple[Client, dict]:
        """A person who accepted an invitation (a session), and their membership."""
        email = f"m{uuid.uuid4().hex[:6]}@{self.org}.example"
        _, token = self.invite(email, role)
        joined = Client()
        ok(joined.post("/api/v1/invitations/accept/", {"token": token, "password": PASSWORD}))
        joined.actor = person(email)
        members = ok(self.owner.get("/api/v1/members/"))
        return joined, next(m for m in members if m["email"] == email)


def signup(org: str, email: str) -> Client:
    api = Client()
    body = {"email": email, "password": PASSWORD, "organization": org}
    ok(api.post("/api/v1/auth/signup/", body), 202)
    ok(api.post("/api/v1/auth/signup/confirm/", {"token": signup_token(email)}), 201)
    api.actor = person(email)
    return api


@pytest.fixture
def world() -> World:
    org = f"o{uuid.uuid4().hex[:8]}"
    w = World(owner=signup(org, f"owner@{org}.example"), org=org)
    w.admin_key = w.key("admin", [w.namespace(w.owner)["id"]])
    return w


@dataclass(frozen=True)
class Expected:
    """The entry an action must leave."""

    action: str
    target: str
    namespace: str | None = None
    details: dict = field(default_factory=dict)
    """A subset of the entry's details."""
    outcome: str = "ok"
    code: str = "OK"
    by: Client | None = None
    """Who the entry names, when not the case's `api` (a refused member or key)."""


# Each case performs one change as `api` (the owner's session or the admin key) and returns the
# entries it must leave, in order; CASES says who may perform it.


def organization_update(w: World, api: Client) -> list[Expected]:
    ok(api.patch("/api/v1/organization/", {"name": "Renamed Inc"}))
    return [Expected("organization.update", f"organization/{w.org}", details={"name": "Renamed Inc"})]


def invitation_create(w: World, api: Client) -> list[Expected]:
    email = f"new@{w.org}.example"
    ok(api.post("/api/v1/invitations/", {"email": email, "role": "admin"}), 201)
    return [Expected("invitation.create", f"invitation/{email}", details={"role": "admin"})]


def invitation_revoke(w: World, api: Client) -> list[Expected]:
    email = f"gone@{w.org}.example"
    invitation, _ = w.invite(email)
    ok(api.delete(f"/api/v1/invitations/{invitation['id']}/"), 204)
    return [Expected("invitation.revoke", f"invitation/{email}")]


def member_role(w: World, api: Client) -> list[Expected]:
    _, member = w.member()
    ok(api.patch(f"/api/v1/members/{member['id']}/", {"role": "admin"}))
    return [Expected("member.role", f"member/{member['email']}", details={"from": "member", "to": "admin"})]


def member_remove(w: World, api: Client) -> list[Expected]:
    joined, member = w.member("admin")
    ns = w.namespace(joined)
    body = {"name": "theirs", "role": "reader", "namespaces": [ns["id"]]}
    made = ok(joined.post("/api/v1/api-keys/", body), 201)
    ok(api.delete(f"/api/v1/members/{member['id']}/"), 204)
    # The keys the person made are revoked with them: the entry names them.
    details = {"role": "admin", "revoked_keys": [made["prefix"]]}
    return [Expected("member.remove", f"member/{member['email']}", details=details)]


def namespace_register(w: World, api: Client) -> list[Expected]:
    ns = w.namespace(api)
    return [Expected("namespace.register", f"namespace/{ns['name']}", ns["name"], {"retention_days": 3})]


def namespace_update(w: World, api: Client) -> list[Expected]:
    ns = w.namespace(api)
    ok(api.patch(f"/api/v1/namespaces/{ns['id']}/", {"description": "orders", "retention_days": 9}))
    details = {"description": "orders", "retention_days": 9}
    return [Expected("namespace.update", f"namespace/{ns['name']}", ns["name"], details)]


def namespace_deprecate(w: World, api: Client) -> list[Expected]:
    ns = w.namespace(api)
    ok(api.post(f"/api/v1/namespaces/{ns['id']}/deprecate/"))
    return [Expected("namespace.deprecate", f"namespace/{ns['name']}", ns["name"])]


def namespace_delete(w: World, api: Client) -> list[Expected]:
    ns = w.namespace(api)
    ok(api.delete(f"/api/v1/namespaces/{ns['id']}/"), 204)
    # The entry names the namespace as it was; details, the `<name>-deleted-<hex>.<org>` it became.
    renamed = Namespace.objects.get(pk=ns["id"]).name
    assert renamed.startswith(ns["name"].split(".")[0] + "-deleted-")
    return [Expected("namespace.delete", f"namespace/{ns['name']}", ns["name"], {"deleted_name": renamed})]


def namespace_grant(w: World, api: Client) -> list[Expected]:
    ns = w.namespace(api)
    _, member = w.member()
    path = f"/api/v1/namespaces/{ns['id']}/access/{member['id']}/"
    ok(api.put(path, {"role": "operator"}))
    ok(api.delete(path), 204)
    target = f"member/{member['email']}"
    return [
        Expected("namespace.grant", target, ns["name"], {"role": "operator"}),
        Expected("namespace.grant", target, ns["name"], {"role": None}),
    ]


def apikey_create(w: World, api: Client) -> list[Expected]:
    ns = w.namespace(w.owner)
    body = {"name": "deploy", "role": "operator", "namespaces": [ns["id"]], "expires_in_days": 30}
    key = ok(api.post("/api/v1/api-keys/", body), 201)
    details = {"name": "deploy", "role": "operator", "namespaces": [ns["name"]]}
    return [Expected("apikey.create", f"apikey/{key['prefix']}", ns["name"], details)]


def apikey_revoke(w: World, api: Client) -> list[Expected]:
    key = w.key().made
    ok(api.post(f"/api/v1/api-keys/{key['id']}/revoke/"))
    return [Expected("apikey.revoke", f"apikey/{key['prefix']}", details={"name": key["name"]})]


def apikey_rotate(w: World, api: Client) -> list[Expected]:
    key = w.key().made
    successor = ok(api.post(f"/api/v1/api-keys/{key['id']}/rotate/", {"grace_seconds": 0}), 201)
    old, new = f"apikey/{key['prefix']}", f"apikey/{successor['prefix']}"
    return [
        Expected(
            "apikey.create", new, key["namespaces"][0], {"rotated_from": key["prefix"], "role": "reader"}
        ),
        Expected("apikey.revoke", old),
        Expected("apikey.rotate", old, details={"successor": successor["prefix"], "grace_seconds": 0.0}),
    ]


def apikey_rate_limits(w: World, api: Client) -> list[Expected]:
    key = w.key().made
    ok(api.patch(f"/api/v1/api-keys/{key['id']}/", {"rate_limits": {"actions": 7}}))
    details = {"name": key["name"], "rate_limits": {"actions": 7.0}}
    return [Expected("apikey.rate_limits", f"apikey/{key['prefix']}", details=details)]


def apikey_downgrade(w: World, api: Client) -> list[Expected]:
    """Lowering a member's namespace role downgrades (or, taken away, revokes) the keys they made, in the
    same change, each with its own entry after the grant's."""
    ns = w.namespace(api)
    member, membership = w.member()
    path = f"/api/v1/namespaces/{ns['id']}/access/{membership['id']}/"
    ok(api.put(path, {"role": "operator"}))
    body = {"name": "worker", "role": "operator", "namespaces": [ns["id"]]}
    key = ok(member.post("/api/v1/api-keys/", body), 201)
    ok(api.put(path, {"role": "reader"}))
    ok(api.delete(path), 204)
    grant, target = f"member/{membership['email']}", f"apikey/{key['prefix']}"
    return [
        Expected("namespace.grant", grant, ns["name"], {"role": "reader"}),
        Expected(
            "apikey.downgrade",
            target,
            details={"from": "operator", "to": "reader", "reason": "namespace.grant"},
        ),
        Expected("namespace.grant", grant, ns["name"], {"role": None}),
        Expected("apikey.revoke", target, details={"name": "worker"}),
    ]


def subject_erase(w: World, api: Client) -> list[Expected]:
    ns = w.namespace(w.owner)
    erasing = api if api is w.owner else w.key("admin", [ns["id"]])  # an admin key of this namespace
    subject = f"s-{uuid.uuid4().hex[:6]}"
    done = ok(erasing.post(f"/api/v1/namespaces/{ns['id']}/erase/", {"subject": subject}))
    assert done == {"subject": subject, "destroyed_keys": [], "terminated_runs": []}
    # A reader may not erase.
    reader = w.key("reader", [ns["id"]])
    path = f"/api/v1/namespaces/{ns['id']}/erase/"
    assert reader.post(path, {"subject": subject}).status_code == 403
    return [
        Expected(
            "subject.erase",
            f"subject/{subject}",
            ns["name"],
            {"destroyed_keys": [], "terminated_runs": []},
            by=erasing,
        ),
        Expected("POST SubjectEraseView", path, ns["name"], outcome="denied", code="403", by=reader),
    ]


# Refused (403: `denied`) and failed (4xx: `failed`) changes are recorded by the view with its HTTP
# status: the action names the method and view, the target the path.


def refused_organization_update(w: World, api: Client) -> list[Expected]:
    member, _ = w.member()
    assert member.patch("/api/v1/organization/", {"name": "mine now"}).status_code == 403
    return [
        Expected("PATCH OrganizationView", "/api/v1/organization/", outcome="denied", code="403", by=member)
    ]


def refused_namespace_update(w: World, api: Client) -> list[Expected]:
    ns = w.namespace(w.owner)
    reader = w.key("reader", [ns["id"]])
    path = f"/api/v1/namespaces/{ns['id']}/"
    assert reader.patch(path, {"retention_days": 2}).status_code == 403
    return [Expected("PATCH NamespaceView", path, ns["name"], outcome="denied", code="403", by=reader)]


def refused_apikey_create(w: World, api: Client) -> list[Expected]:
    ns = w.namespace(w.owner)
    body = {"name": "by a key", "role": "reader", "namespaces": [ns["id"]]}
    assert api.post("/api/v1/api-keys/", body).status_code == 403  # keys are made by people
    return [Expected("POST ApiKeyListView", "/api/v1/api-keys/", outcome="denied", code="403")]


def failed_namespace_register(w: World, api: Client) -> list[Expected]:
    ns = w.namespace(api)
    assert api.post("/api/v1/namespaces/", {"name": ns["name"]}).status_code == 400  # taken
    return [Expected("POST NamespaceListView", "/api/v1/namespaces/", outcome="failed", code="400")]


def failed_namespace_update(w: World, api: Client) -> list[Expected]:
    ns = w.namespace(api)
    path = f"/api/v1/namespaces/{ns['id']}/"
    assert api.patch(path, {"retention_days": 500}).status_code == 400
    return [Expected("PATCH NamespaceView", path, ns["name"], outcome="failed", code="400")]


PERSON, KEY = "person", "key"
CASES: dict[Callable[[World, Client], list[Expected]], tuple[str, ...]] = {
    organization_update: (PERSON,),
    invitation_create: (PERSON,),
    invitation_revoke: (PERSON,),
    member_role: (PERSON,),
    member_remove: (PERSON,),
    namespace_register: (PERSON, KEY),
    namespace_update: (PERSON, KEY),
    namespace_deprecate: (PERSON, KEY),
    namespace_delete: (PERSON, KEY),
    namespace_grant: (PERSON, KEY),
    apikey_create: (PERSON,),
    apikey_revoke: (PERSON,),
    apikey_rotate: (PERSON,),
    apikey_rate_limits: (PERSON,),
    apikey_downgrade: (PERSON, KEY),
    subject_erase: (PERSON, KEY),
    refused_organization_update: (PERSON,),
    refused_namespace_update: (PERSON,),
    refused_apikey_create: (KEY,),
    failed_namespace_register: (PERSON, KEY),
    failed_namespace_update: (PERSON, KEY),
}
"""Each case and who performs it: the owner's session, the admin key, or both where the API lets keys
(organisation, members, invitations and API keys are managed by people only)."""

REST_WRITES = {
    ("SignupView", "POST"): "test_signup_and_accepting_an_invitation_are_the_new_persons",
    ("SignupConfirmView", "POST"): "test_signup_and_accepting_an_invitation_are_the_new_persons",
    ("InvitationAcceptView", "POST"): "test_signup_and_accepting_an_invitation_are_the_new_persons",
    ("OrganizationView", "PATCH"): "organization_update",
    ("MemberView", "PATCH"): "member_role",
    ("MemberView", "DELETE"): "member_remove",
    ("InvitationListView", "POST"): "invitation_create",
    ("InvitationView", "DELETE"): "invitation_revoke",
    ("NamespaceListView", "POST"): "namespace_register",
    ("NamespaceView", "PATCH"): "namespace_update",
    ("NamespaceView", "DELETE"): "namespace_delete",
    ("NamespaceDeprecateView", "POST"): "namespace_deprecate",
    ("NamespaceAccessView", "PUT"): "namespace_grant",
    ("NamespaceAccessView", "DELETE"): "namespace_grant",
    ("ApiKeyListView", "POST"): "apikey_create",
    ("ApiKeyRevokeView", "POST"): "apikey_revoke",
    ("ApiKeyRotateView", "POST"): "apikey_rotate",
    ("ApiKeyView", "PATCH"): "apikey_rate_limits",
    ("SubjectEraseView", "POST"): "subject_erase",
}
"""Each write of the REST API (view, method) and the case or test that checks its entry."""
NOT_AUDITED_REST_WRITES = {
    ("LoginView", "POST"),
    ("LogoutView", "POST"),
    ("PasswordResetView", "POST"),
    ("PasswordResetConfirmView", "POST"),
}
"""Writes that change a person's session or password, not an organisation's control plane: logged
(tenants/rest/views.py), not audited."""

COVERED_ACTIONS = {
    # by test_signup_and_accepting_an_invitation_are_the_new_persons:
    "organization.create",
    "member.add",
    "invitation.accept",
    # by test_each_change_leaves_its_entry:
    "organization.update",
    "invitation.create",
    "invitation.revoke",
    "member.role",
    "member.remove",
    "namespace.register",
    "namespace.update",
    "namespace.deprecate",
    "namespace.delete",
    "namespace.grant",
    "apikey.create",
    "apikey.revoke",
    "apikey.rotate",
    "apikey.rate_limits",
    "apikey.downgrade",
    "subject.erase",
}
"""The recorded actions (`record_change`) whose successful entry this file checks through the REST API."""


def mark() -> int:
    return AuditEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0


def exported(api: Client, query: str = "") -> list[dict]:
    """The organisation's log as the export gives it (JSON Lines, oldest first), read by `api`."""
    body = b"".join(api.get(f"/api/v1/audit/export{query}").streaming_content)
    return [json.loads(line) for line in body.splitlines()]


def check(entry: dict, expected: Expected, actor: dict) -> None:
    assert (entry["action"], entry["target"]) == (expected.action, expected.target)
    assert entry["namespace"] == expected.namespace, entry
    assert entry["actor"] == actor, entry
    assert (entry["source"], entry["via"]) == (ADDRESS, "rest"), entry
    assert (entry["outcome"], entry["code"]) == (expected.outcome, expected.code), entry
    for name, value in expected.details.items():
        assert entry["details"].get(name) == value, (name, entry)


@pytest.mark.parametrize(
    ("case", "who"),
    [(case, who) for case, actors in CASES.items() for who in actors],
    ids=[f"{case.__name__}-{who}" for case, actors in CASES.items() for who in actors],
)
def test_each_change_leaves_its_entry(world, case, who):
    api = world.owner if who == PERSON else world.admin_key
    before = mark()
    expected = case(world, api)
    # The set-up's own entries (the namespace or key a case makes first) name other targets or come
    # first: the last entries of the expected actions and targets are exactly the expected ones.
    wanted = {(e.action, e.target) for e in expected}
    found = [e for e in exported(world.owner) if e["id"] > before and (e["action"], e["target"]) in wanted]
    found = found[-len(expected) :]
    assert [(e["action"], e["target"]) for e in found] == [(e.action, e.target) for e in expected]
    for entry, want in zip(found, expected, strict=True):
        check(entry, want, (want.by or api).actor)


def test_signup_and_accepting_an_invitation_are_the_new_persons():
    """Sign-up and acceptance start anonymous; their entries name the person they make or admit."""
    org = f"o{uuid.uuid4().hex[:8]}"
    owner = signup(org, f"first@{org}.example")
    rows = exported(owner)
    assert [(e["action"], e["target"], e["details"]) for e in rows] == [
        ("organization.create", f"organization/{org}", {}),
        ("member.add", f"member/first@{org}.example", {"role": "owner"}),
    ]
    for entry in rows:
        check(entry, Expected(entry["action"], entry["target"], details=entry["details"]), owner.actor)

    w = World(owner=owner, org=org)
    invitee = f"joiner@{org}.example"
    _, token = w.invite(invitee, "admin")
    before = mark()
    ok(Client().post("/api/v1/invitations/accept/", {"token": token, "password": PASSWORD}))
    rows = [e for e in exported(owner) if e["id"] > before]
    assert [(e["action"], e["target"], e["details"]) for e in rows] == [
        ("invitation.accept", f"invitation/{invitee}", {"role": "admin"}),
        ("member.add", f"member/{invitee}", {"role": "admin"}),
    ]
    for entry in rows:
        check(entry, Expected(entry["action"], entry["target"], details=entry["details"]), person(invitee))


def test_the_export_gives_a_namespace_and_a_time_range_as_json_lines(world):
    ns = world.namespace(world.owner)
    ok(world.owner.patch(f"/api/v1/namespaces/{ns['id']}/", {"retention_days": 5}))
    rows = exported(world.owner, f"?namespace={ns['name']}&since=1h")
    assert [(r["action"], r["namespace"]) for r in rows] == [
        ("namespace.register", ns["name"]),
        ("namespace.update", ns["name"]),
    ]
    assert exported(world.owner, f"?namespace={ns['name']}&until=2000-01-01") == []
