"""The REST control-plane API through Django's test client on Postgres: accounts, members, namespaces,
API keys, and its security (IDOR, CSRF, throttling, roles, no secrets in answers or logs)."""

from __future__ import annotations

import json
import logging
import re
import time
import uuid

import pytest
from django.core import mail
from django.core.cache import caches
from django.test import Client, TestCase
from django.urls import URLPattern, URLResolver, get_resolver
from prometheus_client import REGISTRY

from tenants import auth
from tenants.models import ApiKey, AuditEvent, DataKey, Namespace
from tenants.rest.permissions import Declared, need_of
from tests.support import servers

pytestmark = pytest.mark.django_db
PASSWORD = "correct horse battery 9"


@pytest.fixture(autouse=True)
def _fresh_throttles():
    caches["throttle"].clear()
    yield
    caches["throttle"].clear()


class Api:
    """A browser-like session: CSRF enforced, the token taken from the cookie as a SPA would."""

    def __init__(self, key: str | None = None) -> None:
        self.client = Client(enforce_csrf_checks=True)
        self.key = key

    def _headers(self, method: str) -> dict:
        if self.key:
            return {"HTTP_AUTHORIZATION": f"Bearer {self.key}"}
        if method == "GET":
            return {}
        if "csrftoken" not in self.client.cookies:
            self.client.get("/api/v1/auth/csrf/")
        return {"HTTP_X_CSRFTOKEN": self.client.cookies["csrftoken"].value}

    def call(self, method: str, path: str, body: dict | None = None, **extra):
        headers = {**self._headers(method), **extra}
        fn = getattr(self.client, method.lower())
        if body is None:
            return fn(path, **headers)
        return fn(path, data=json.dumps(body), content_type="application/json", **headers)

    def get(self, path, **extra):
        return self.call("GET", path, **extra)

    def post(self, path, body=None, **extra):
        return self.call("POST", path, body if body is not None else {}, **extra)

    def patch(self, path, body, **extra):
        return self.call("PATCH", path, body, **extra)

    def put(self, path, body, **extra):
        return self.call("PUT", path, body, **extra)

    def delete(self, path, **extra):
        return self.call("DELETE", path, **extra)


def signup_token(email: str) -> str:
    """The token of the sign-up link last mailed to `email`."""
    body = next(m.body for m in reversed(mail.outbox) if m.to == [email])
    return re.search(r"signup/confirm/\?token=(\S+)", body).group(1)


def signup(org: str | None = None, email: str | None = None) -> tuple[Api, str]:
    """Sign up as a person does: the request (202), then the emailed link, which signs in."""
    org = org or f"o{uuid.uuid4().hex[:8]}"
    email = email or f"owner@{org}.example"
    api = Api()
    r = api.post("/api/v1/auth/signup/", {"email": email, "password": PASSWORD, "organization": org})
    assert r.status_code == 202, r.content
    r = api.post("/api/v1/auth/signup/confirm/", {"token": signup_token(email)})
    assert r.status_code == 201, r.content
    assert r.json()["organization"]["slug"] == org
    assert r.json()["role"] == "owner"
    return api, org


def create_namespace(api: Api, name: str, retention: int = 3) -> dict:
    r = api.post("/api/v1/namespaces/", {"name": name, "retention_days": retention})
    assert r.status_code == 201, r.content
    return r.json()


def create_key(api: Api, namespaces: list[str], role: str = "operator", name: str = "ci"):
    return api.post("/api/v1/api-keys/", {"name": name, "role": role, "namespaces": namespaces})


def invite_and_join(owner: Api, email: str, role: str = "member") -> Api:
    mail.outbox.clear()
    with TestCase.captureOnCommitCallbacks(execute=True):  # the email leaves after commit
        r = owner.post("/api/v1/invitations/", {"email": email, "role": role})
    assert r.status_code == 201, r.content
    assert "token" not in r.json()
    token = re.search(r"token=([A-Za-z0-9_-]+)", mail.outbox[-1].body).group(1)
    member = Api()
    assert member.get(f"/api/v1/invitations/accept/?token={token}").json()["email"] == email
    r = member.post("/api/v1/invitations/accept/", {"token": token, "password": PASSWORD})
    assert r.status_code == 200, r.content
    return member


# --- the main flow ---------------------------------------------------------------------------


def test_signup_two_namespaces_a_key_for_each():
    api, org = signup()
    a = create_namespace(api, "alpha")
    b = create_namespace(api, f"beta.{org}", retention=7)
    assert a["name"] == f"alpha.{org}"
    assert b["name"] == f"beta.{org}"
    assert (a["retention_days"], a["state"], a["your_role"]) == (3, "registered", "admin")
    assert a["retention_seconds"] == 3 * 86400
    assert DataKey.objects.filter(namespace_id=a["id"]).count() == 1

    keys = {}
    for ns in (a, b):
        r = create_key(api, [ns["id"]], name=f"key {ns['name']}")
        assert r.status_code == 201, r.content
        body = r.json()
        assert body["key"].startswith(body["prefix"] + "_")
        keys[ns["name"]] = body["key"]
        principal = auth.authenticate(f"Bearer {body['key']}")
        assert principal.namespaces == {ns["name"]}
        assert principal.role == "operator"

    listed = api.get("/api/v1/api-keys/").json()
    assert len(listed) == 2
    assert all("key" not in k for k in listed)
    assert {n["name"] for n in api.get("/api/v1/namespaces/").json()} == {a["name"], b["name"]}

    # The key works on REST too, within its namespace only.
    key_a = Api(key=keys[a["name"]])
    assert [n["name"] for n in key_a.get("/api/v1/namespaces/").json()] == [a["name"]]
    assert key_a.get(f"/api/v1/namespaces/{a['id']}/").json()["your_role"] == "operator"
    assert key_a.get(f"/api/v1/namespaces/{b['id']}/").status_code == 404
    assert key_a.patch(f"/api/v1/namespaces/{a['id']}/", {"description": "x"}).status_code == 403
    assert key_a.get("/api/v1/api-keys/").status_code == 403
    assert key_a.get("/api/v1/members/").status_code == 403


def test_namespace_update_deprecate_delete():
    api, org = signup()
    ns = create_namespace(api, "orders")
    path = f"/api/v1/namespaces/{ns['id']}/"
    r = api.patch(path, {"description": "the orders", "retention_days": 30})
    assert r.status_code == 200
    assert r.json()["retention_days"] == 30
    assert r.json()["description"] == "the orders"
    assert api.patch(path, {"retention_days": 91}).status_code == 400
    assert api.patch(path, {"retention_days": 0}).status_code == 400
    assert api.post(f"{path}deprecate/").json()["state"] == "deprecated"
    key = create_key(api, [ns["id"]]).json()
    assert api.delete(path).status_code == 204
    assert api.get(path).status_code == 404
    assert Namespace.objects.get(pk=ns["id"]).state == Namespace.State.DELETED
    assert not ApiKey.objects.get(pk=key["id"]).namespaces.exists()
    # The name is free again.
    assert create_namespace(api, "orders")["name"] == f"orders.{org}"


def test_login_logout_and_password_reset():
    api, org = signup()
    email = f"owner@{org}.example"
    assert api.post("/api/v1/auth/logout/").status_code == 204
    assert api.get("/api/v1/auth/me/").status_code == 401
    fresh = Api()
    assert (
        fresh.post("/api/v1/auth/login/", {"email": email, "password": "wrong password"}).status_code == 401
    )
    r = fresh.post("/api/v1/auth/login/", {"email": email.upper(), "password": PASSWORD})
    assert r.status_code == 200
    assert r.json()["organization"]["slug"] == org

    mail.outbox.clear()
    assert fresh.post("/api/v1/auth/password-reset/", {"email": "nobody@nowhere.example"}).status_code == 202
    assert not mail.outbox
    assert fresh.post("/api/v1/auth/password-reset/", {"email": email}).status_code == 202
    link = re.search(r"uid=(\S+)&token=(\S+)", mail.outbox[-1].body)
    confirm = {"uid": link.group(1), "token": link.group(2), "password": "another horse battery 7"}
    assert fresh.post("/api/v1/auth/password-reset/confirm/", confirm).status_code == 204
    assert fresh.post("/api/v1/auth/password-reset/confirm/", confirm).status_code == 400  # single use
    assert Api().post("/api/v1/auth/login/", {"email": email, "password": PASSWORD}).status_code == 401
    r = Api().post("/api/v1/auth/login/", {"email": email, "password": "another horse battery 7"})
    assert r.status_code == 200


def test_an_unconfirmed_signup_does_not_hold_an_address_against_its_owner():
    """Someone signs up with another's address and never confirms: the owner, invited later, joins with
    their own password (the invitation proves the address, as the link would)."""
    owner, org = signup()
    email = f"victim{uuid.uuid4().hex[:6]}@example.com"
    squat = {"email": email, "password": "squatter password 77", "organization": f"s{uuid.uuid4().hex[:8]}"}
    assert Api().post("/api/v1/auth/signup/", squat).status_code == 202
    member = invite_and_join(owner, email)
    assert member.get("/api/v1/auth/me/").json()["organization"]["slug"] == org
    assert Api().post("/api/v1/auth/login/", {"email": email, "password": PASSWORD}).status_code == 200
    assert (
        Api().post("/api/v1/auth/login/", {"email": email, "password": squat["password"]}).status_code == 401
    )


def test_signup_refuses_taken_organisation_and_weak_password():
    _, org = signup()
    r = Api().post(
        "/api/v1/auth/signup/", {"email": "x@y.example", "password": PASSWORD, "organization": org}
    )
    assert r.status_code == 400
    r = Api().post(
        "/api/v1/auth/signup/", {"email": "x@y.example", "password": "short", "organization": "zz1"}
    )
    assert r.status_code == 400


def test_signup_does_not_say_whether_an_email_has_an_account():
    """A known email gets the answer a new one gets (202, no body, no cookie, similar time), as password
    reset answers; the account's owner is emailed instead. Before, it answered 400 "an account with this
    email exists"."""
    _, org = signup()
    known = f"owner@{org}.example"

    def attempt(email: str):
        mail.outbox.clear()
        api = Api()
        api.get("/api/v1/auth/csrf/")
        started = time.perf_counter()
        r = api.post(
            "/api/v1/auth/signup/",
            {"email": email, "password": PASSWORD, "organization": f"n{uuid.uuid4().hex[:8]}"},
        )
        return r, time.perf_counter() - started, list(mail.outbox)

    new_email = f"new{uuid.uuid4().hex[:6]}@example.com"
    answers = [attempt(known), attempt(new_email), attempt(known), attempt(new_email)]
    for r, _, _ in answers:
        assert (r.status_code, r.content) == (202, b"")
        assert "sessionid" not in r.cookies
    known_times = [
        t for (r, t, _), email in zip(answers, [known, new_email] * 2, strict=True) if email == known
    ]
    new_times = [
        t for (r, t, _), email in zip(answers, [known, new_email] * 2, strict=True) if email != known
    ]
    # Both hash the password once: neither answer is several times slower than the other.
    print(f"sign-up answer times: known {known_times}, new {new_times}")
    assert max(known_times) < 3 * min(new_times) + 0.05
    assert max(new_times) < 3 * min(known_times) + 0.05
    # The owner of the known address learns someone tried; the new address gets its link.
    (known_mail,) = answers[0][2]
    assert known_mail.to == [known]
    assert "already has an account" in known_mail.body
    (new_mail,) = answers[1][2]
    assert new_mail.to == [new_email]
    assert "signup/confirm/?token=" in new_mail.body
    # The known account is untouched: its password still signs in, and no organisation was made.
    assert Api().post("/api/v1/auth/login/", {"email": known, "password": PASSWORD}).status_code == 200


def test_a_signup_link_works_once_and_only_for_its_account():
    email = f"ann{uuid.uuid4().hex[:6]}@example.com"
    org = f"o{uuid.uuid4().hex[:8]}"
    api = Api()
    assert (
        api.post(
            "/api/v1/auth/signup/", {"email": email, "password": PASSWORD, "organization": org}
        ).status_code
        == 202
    )
    # Until confirmed, the account cannot sign in and the organisation does not exist.
    assert Api().post("/api/v1/auth/login/", {"email": email, "password": PASSWORD}).status_code == 401
    token = signup_token(email)
    assert api.post("/api/v1/auth/signup/confirm/", {"token": token[:-2] + "xx"}).status_code == 400
    r = api.post("/api/v1/auth/signup/confirm/", {"token": token})
    assert r.status_code == 201, r.content
    assert r.json()["organization"]["slug"] == org
    assert Api().post("/api/v1/auth/signup/confirm/", {"token": token}).status_code == 400  # single use
    assert Api().post("/api/v1/auth/login/", {"email": email, "password": PASSWORD}).status_code == 200


# --- members and roles ------------------------------------------------------------------------


def test_invited_member_roles_and_key_ceiling():
    owner, org = signup()
    ns = create_namespace(owner, "app")
    other = create_namespace(owner, "other")
    member = invite_and_join(owner, f"dev@{org}.example")
    assert member.get("/api/v1/auth/me/").json()["role"] == "member"

    # A member does no admin things.
    assert member.post("/api/v1/namespaces/", {"name": "mine"}).status_code == 403
    assert member.post("/api/v1/invitations/", {"email": "z@z.example"}).status_code == 403
    assert member.patch("/api/v1/organization/", {"name": "Evil"}).status_code == 403
    members = member.get("/api/v1/members/").json()
    owner_id = next(m["id"] for m in members if m["role"] == "owner")
    me_id = next(m["id"] for m in members if m["role"] == "member")
    assert member.patch(f"/api/v1/members/{me_id}/", {"role": "admin"}).status_code == 403
    assert member.delete(f"/api/v1/members/{owner_id}/").status_code == 403
    # Without a grant the member sees no namespace at all.
    assert member.get("/api/v1/namespaces/").json() == []
    assert member.get(f"/api/v1/namespaces/{ns['id']}/").status_code == 404
    assert create_key(member, [ns["id"]], role="reader").status_code == 404

    # Reader on `app`: may describe, not change; keys up to reader only.
    assert owner.put(f"/api/v1/namespaces/{ns['id']}/access/{me_id}/", {"role": "reader"}).status_code == 200
    assert member.get(f"/api/v1/namespaces/{ns['id']}/").json()["your_role"] == "reader"
    assert member.patch(f"/api/v1/namespaces/{ns['id']}/", {"description": "x"}).status_code == 403
    assert member.delete(f"/api/v1/namespaces/{ns['id']}/").status_code == 403
    assert member.get(f"/api/v1/namespaces/{ns['id']}/access/").status_code == 403
    r = create_key(member, [ns["id"]], role="operator")
    assert r.status_code == 403
    assert "exceed" in r.json()["detail"]
    assert create_key(member, [ns["id"]], role="admin").status_code == 403
    assert create_key(member, [ns["id"], other["id"]], role="reader").status_code == 404
    r = create_key(member, [ns["id"]], role="reader")
    assert r.status_code == 201
    own_key = r.json()
    # A member sees the keys they made, not the owner's.
    owners_key = create_key(owner, [other["id"]]).json()
    assert [k["id"] for k in member.get("/api/v1/api-keys/").json()] == [own_key["id"]]
    assert member.post(f"/api/v1/api-keys/{owners_key['id']}/revoke/").status_code == 404

    # Operator now: operator keys allowed, admin still not.
    owner.put(f"/api/v1/namespaces/{ns['id']}/access/{me_id}/", {"role": "operator"})
    assert create_key(member, [ns["id"]], role="operator").status_code == 201
    assert create_key(member, [ns["id"]], role="admin").status_code == 403
    grants = owner.get(f"/api/v1/namespaces/{ns['id']}/access/").json()
    assert {"member": me_id, "email": f"dev@{org}.example", "role": "operator"} in grants

    # Removing the member revokes the keys they created.
    assert owner.delete(f"/api/v1/members/{me_id}/").status_code == 204
    assert ApiKey.objects.get(pk=own_key["id"]).revoked_at is not None
    assert member.get("/api/v1/namespaces/").status_code == 403


def test_a_key_never_exceeds_its_creator_when_the_creator_is_lowered():
    """Lowering a member's namespace role downgrades the keys they made to it, in the same change;
    taking the role away (or lowering an admin to member without grants) revokes them; each is audited.
    Before, the keys kept the role they were made with."""
    owner, org = signup()
    ns = create_namespace(owner, "app")
    other = create_namespace(owner, "other")
    member = invite_and_join(owner, f"dev@{org}.example")
    me_id = next(m["id"] for m in owner.get("/api/v1/members/").json() if m["role"] == "member")
    access = f"/api/v1/namespaces/{ns['id']}/access/{me_id}/"
    assert owner.put(access, {"role": "admin"}).status_code == 200
    admin_key = create_key(member, [ns["id"]], role="admin", name="admin").json()
    operator_key = create_key(member, [ns["id"]], role="operator", name="operator").json()
    reader_key = create_key(member, [ns["id"]], role="reader", name="reader").json()
    owners_key = create_key(owner, [ns["id"]], role="admin", name="owner's").json()

    assert owner.put(access, {"role": "reader"}).status_code == 200
    keys = {k.name: k for k in ApiKey.objects.filter(organization__slug=org)}
    assert {n: (k.role, k.revoked_at is None) for n, k in keys.items()} == {
        "admin": ("reader", True),
        "operator": ("reader", True),
        "reader": ("reader", True),
        "owner's": ("admin", True),  # the owner's own key is the owner's business
    }
    assert auth.authenticate(f"Bearer {admin_key['key']}").role == "reader"
    downgrades = AuditEvent.objects.filter(
        action="apikey.downgrade", organization_id=keys["admin"].organization_id
    )
    assert sorted((e.target, e.details["from"], e.details["to"]) for e in downgrades) == sorted(
        [
            (f"apikey/{admin_key['prefix']}", "admin", "reader"),
            (f"apikey/{operator_key['prefix']}", "operator", "reader"),
        ]
    )

    # The role taken away: the keys are revoked, at once.
    assert owner.delete(access).status_code == 204
    for key in (admin_key, reader_key):
        with pytest.raises(auth.AuthError):
            auth.authenticate(f"Bearer {key['key']}")
    assert auth.authenticate(f"Bearer {owners_key['key']}").role == "admin"

    # An organisation admin holds admin on every namespace; lowered to member (no grants), their keys go.
    lead = invite_and_join(owner, f"lead@{org}.example", role="admin")
    lead_key = create_key(lead, [other["id"]], role="admin", name="lead").json()
    lead_id = next(
        m["id"] for m in owner.get("/api/v1/members/").json() if m["email"] == f"lead@{org}.example"
    )
    assert (
        owner.put(f"/api/v1/namespaces/{other['id']}/access/{lead_id}/", {"role": "operator"}).status_code
        == 200
    )
    assert auth.authenticate(f"Bearer {lead_key['key']}").role == "admin"  # still an org admin
    assert owner.patch(f"/api/v1/members/{lead_id}/", {"role": "member"}).status_code == 200
    assert auth.authenticate(f"Bearer {lead_key['key']}").role == "operator"
    entry = AuditEvent.objects.filter(action="apikey.downgrade", target=f"apikey/{lead_key['prefix']}").get()
    assert entry.details["reason"] == "member.role"


def test_owner_rules():
    owner, org = signup()
    admin = invite_and_join(owner, f"admin@{org}.example", role="admin")
    members = owner.get("/api/v1/members/").json()
    owner_id = next(m["id"] for m in members if m["role"] == "owner")
    admin_id = next(m["id"] for m in members if m["role"] == "admin")
    # An admin administers, but makes no owners and cannot remove one.
    assert admin.post("/api/v1/namespaces/", {"name": "by-admin"}).status_code == 201
    assert admin.post("/api/v1/invitations/", {"email": "o2@x.example", "role": "owner"}).status_code == 403
    assert admin.delete(f"/api/v1/members/{owner_id}/").status_code == 403
    assert admin.patch(f"/api/v1/members/{admin_id}/", {"role": "owner"}).status_code == 403
    # The last owner stays.
    assert owner.patch(f"/api/v1/members/{owner_id}/", {"role": "member"}).status_code == 400
    assert owner.delete(f"/api/v1/members/{owner_id}/").status_code == 400
    assert owner.patch(f"/api/v1/members/{admin_id}/", {"role": "owner"}).json()["role"] == "owner"
    assert owner.patch(f"/api/v1/members/{owner_id}/", {"role": "member"}).status_code == 200


# --- keys ------------------------------------------------------------------------------------


def test_revoke_and_rotate():
    api, _ = signup()
    ns = create_namespace(api, "keys")
    created = create_key(api, [ns["id"]]).json()
    rotated = api.post(f"/api/v1/api-keys/{created['id']}/rotate/", {})
    assert rotated.status_code == 201
    new = rotated.json()
    assert new["rotated_from"] == created["id"]
    assert new["key"] != created["key"]
    assert Api(key=created["key"]).get("/api/v1/namespaces/").status_code == 401
    assert Api(key=new["key"]).get("/api/v1/namespaces/").status_code == 200
    assert api.post(f"/api/v1/api-keys/{new['id']}/revoke/").json()["revoked_at"] is not None
    r = Api(key=new["key"]).get("/api/v1/namespaces/")
    assert r.status_code == 401
    assert "revoked" in r.json()["detail"]
    assert r["WWW-Authenticate"].startswith("Bearer")


def test_admin_key_creates_a_namespace_it_can_then_use():
    api, org = signup()
    ns = create_namespace(api, "seed")
    key = create_key(api, [ns["id"]], role="admin").json()["key"]
    made = Api(key=key).post("/api/v1/namespaces/", {"name": "made-by-key"})
    assert made.status_code == 201
    assert Api(key=key).get(f"/api/v1/namespaces/{made.json()['id']}/").status_code == 200
    operator = create_key(api, [ns["id"]], role="operator").json()["key"]
    assert Api(key=operator).post("/api/v1/namespaces/", {"name": "nope"}).status_code == 403


# --- security ----------------------------------------------------------------------------------


def test_idor_other_tenants_ids_are_not_found():
    """Every object endpoint answers 404 to another organisation's ids, for its owner and its keys."""
    victim, victim_org = signup()
    ns = create_namespace(victim, "secret")
    key = create_key(victim, [ns["id"]]).json()
    invitation = victim.post("/api/v1/invitations/", {"email": "x@victim.example"}).json()
    member_id = victim.get("/api/v1/members/").json()[0]["id"]

    attacker, attacker_org = signup()
    own_ns = create_namespace(attacker, "mine")
    attacker_key = Api(key=create_key(attacker, [own_ns["id"]], role="admin").json()["key"])
    n, k, i, m = ns["id"], key["id"], invitation["id"], member_id
    calls = [
        ("GET", f"/api/v1/namespaces/{n}/", None),
        ("PATCH", f"/api/v1/namespaces/{n}/", {"description": "pwned"}),
        ("DELETE", f"/api/v1/namespaces/{n}/", None),
        ("POST", f"/api/v1/namespaces/{n}/deprecate/", {}),
        ("GET", f"/api/v1/namespaces/{n}/access/", None),
        ("PUT", f"/api/v1/namespaces/{n}/access/{m}/", {"role": "admin"}),
        ("DELETE", f"/api/v1/namespaces/{n}/access/{m}/", None),
        ("GET", f"/api/v1/api-keys/{k}/", None),
        ("PATCH", f"/api/v1/api-keys/{k}/", {"rate_limits": {"actions": 10_000}}),
        ("POST", f"/api/v1/api-keys/{k}/revoke/", {}),
        ("POST", f"/api/v1/api-keys/{k}/rotate/", {}),
        ("GET", f"/api/v1/members/{m}/", None),
        ("PATCH", f"/api/v1/members/{m}/", {"role": "member"}),
        ("DELETE", f"/api/v1/members/{m}/", None),
        ("GET", f"/api/v1/invitations/{i}/", None),
        ("DELETE", f"/api/v1/invitations/{i}/", None),
        ("POST", "/api/v1/api-keys/", {"name": "x", "role": "reader", "namespaces": [n]}),
    ]
    for method, path, body in calls:
        r = attacker.call(method, path, body)
        assert r.status_code == 404, (method, path, r.status_code, r.content)
        if (
            "/members/" not in path
            and "/invitations/" not in path
            and method != "POST"
            or "namespaces/" in path
        ):
            r = attacker_key.call(method, path, body)
            assert r.status_code in (403, 404), (method, path, r.status_code)
            assert r.status_code == 404 or "person" in r.json()["detail"], (method, path)
    # Nothing changed on the victim's side.
    assert victim.get(f"/api/v1/namespaces/{n}/").json()["description"] == ""
    assert ApiKey.objects.get(pk=k).revoked_at is None
    assert ApiKey.objects.get(pk=k).rate_limits == {}
    assert victim.get(f"/api/v1/invitations/{i}/").json()["revoked_at"] is None
    assert victim.get("/api/v1/organization/").json()["slug"] == victim_org != attacker_org


def test_csrf_is_enforced_on_session_writes():
    api, _ = signup()
    ns = create_namespace(api, "csrf")
    raw = api.client  # the same session cookie, without the X-CSRFToken header
    for method, path, body in [
        ("post", "/api/v1/namespaces/", {"name": "x"}),
        ("patch", f"/api/v1/namespaces/{ns['id']}/", {"description": "x"}),
        ("delete", f"/api/v1/namespaces/{ns['id']}/", None),
        ("post", "/api/v1/api-keys/", {"name": "x", "role": "reader", "namespaces": [ns["id"]]}),
        ("post", "/api/v1/invitations/", {"email": "a@b.example"}),
        ("post", "/api/v1/auth/logout/", {}),
    ]:
        kwargs = {"data": json.dumps(body), "content_type": "application/json"} if body is not None else {}
        r = getattr(raw, method)(path, **kwargs)
        assert r.status_code == 403, (method, path, r.content)
        assert "CSRF" in r.json()["detail"], (method, path, r.content)
    assert api.get(f"/api/v1/namespaces/{ns['id']}/").json()["description"] == ""
    # Login and sign-up need the token too (login CSRF).
    r = Client(enforce_csrf_checks=True).post(
        "/api/v1/auth/login/", {"email": "a@b.example", "password": "x"}, content_type="application/json"
    )
    assert r.status_code == 403


def test_login_is_throttled_per_address_and_per_account():
    _, org = signup()
    email = f"owner@{org}.example"
    attacker = Api()
    answers = [
        attacker.post("/api/v1/auth/login/", {"email": email, "password": f"guess {i}"}).status_code
        for i in range(6)
    ]
    assert answers[:5] == [401] * 5
    assert answers[5] == 429
    # Even the right password waits now: the account is throttled, from anywhere.
    r = Api().post("/api/v1/auth/login/", {"email": email, "password": PASSWORD})
    assert r.status_code == 429
    assert int(r["Retry-After"]) > 0
    # Per address: many accounts from one address.
    caches["throttle"].clear()
    codes = [
        attacker.post("/api/v1/auth/login/", {"email": f"u{i}@x.example", "password": "p"}).status_code
        for i in range(11)
    ]
    assert codes[:10] == [401] * 10
    assert codes[10] == 429


@pytest.mark.parametrize("store", ["memory", "redis"])
def test_each_organisation_has_a_rest_request_limit(settings, store):
    """Requests of one organisation, by its people and keys alike, draw from one token bucket (the rate
    limiter's, as on the gRPC API); past it: 429, Retry-After and a message naming the limit, while
    another organisation is served. Before, the REST API had no per-organisation limit."""
    settings.PERDURA_RATE_LIMITS = store
    settings.PERDURA_REDIS_URL = servers.REDIS_URL
    settings.PERDURA_RATE_REST = 2.0  # two a second, four at once
    owner, org = signup()
    ns = create_namespace(owner, "app")
    key = Api(key=create_key(owner, [ns["id"]]).json()["key"])
    other, _ = signup()
    time.sleep(2.1)  # the set-up's requests refill
    answers = [key.get("/api/v1/namespaces/") for _ in range(2)] + [
        owner.get("/api/v1/namespaces/") for _ in range(2)
    ]
    assert [r.status_code for r in answers] == [200, 200, 200, 200]
    counted = (
        REGISTRY.get_sample_value("perdura_rest_rate_limit_refusals_total", {"organization": org}) or 0.0
    )
    refused = owner.get("/api/v1/namespaces/")
    assert refused.status_code == 429
    assert (
        REGISTRY.get_sample_value("perdura_rest_rate_limit_refusals_total", {"organization": org})
        == counted + 1
    )
    assert refused["Retry-After"] == "1"
    assert f"organisation {org!r} allows 2 REST API requests per second" in refused.json()["detail"]
    assert key.get(f"/api/v1/namespaces/{ns['id']}/").status_code == 429
    assert other.get("/api/v1/namespaces/").status_code == 200
    time.sleep(0.6)
    assert key.get("/api/v1/namespaces/").status_code == 200


def test_failed_api_keys_are_throttled_per_address():
    codes = [Api(key=f"pdk_{'a' * 12}_{'b' * 43}").get("/api/v1/namespaces/").status_code for _ in range(21)]
    assert codes[:20] == [401] * 20
    assert codes[20] == 429


def test_no_secret_in_any_answer_or_log(caplog):
    caplog.set_level(logging.DEBUG)
    api, org = signup()
    ns = create_namespace(api, "leak")
    created = create_key(api, [ns["id"]]).json()
    rotated = api.post(f"/api/v1/api-keys/{created['id']}/rotate/", {"grace_seconds": 60}).json()
    member = invite_and_join(api, f"m@{org}.example")
    Api().post("/api/v1/auth/login/", {"email": f"owner@{org}.example", "password": "wrong"})
    Api(key=created["key"] + "x").get("/api/v1/namespaces/")
    answers = []
    for path in [
        "/api/v1/api-keys/",
        f"/api/v1/api-keys/{created['id']}/",
        "/api/v1/namespaces/",
        f"/api/v1/namespaces/{ns['id']}/",
        "/api/v1/members/",
        "/api/v1/invitations/",
        "/api/v1/organization/",
        "/api/v1/auth/me/",
        "/api/schema/",
    ]:
        r = api.get(path)
        assert r.status_code == 200, path
        answers.append(r.content.decode())
    answers.append(member.get("/api/v1/auth/me/").content.decode())
    keys = [ApiKey.objects.get(pk=created["id"]), ApiKey.objects.get(pk=rotated["id"])]
    user_hashes = [m.user.password for m in keys[0].organization.memberships.select_related("user")]
    data_keys = [bytes(d.wrapped_key).hex() for d in DataKey.objects.filter(namespace_id=ns["id"])]
    secrets = [created["key"], rotated["key"], PASSWORD, *user_hashes, *(k.secret_hash for k in keys)]
    # A key's secret is all after `pdk_<prefix>_` (it may hold underscores itself).
    secrets += data_keys + [s.split("_", 2)[2] for s in (created["key"], rotated["key"])]
    logs = caplog.text
    for secret in secrets:
        assert secret
        assert all(secret not in a for a in answers), secret[:8]
        assert secret not in logs, secret[:8]


# --- declarations and schema ---------------------------------------------------------------------


def _api_views():
    def walk(patterns, prefix=""):
        for p in patterns:
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern) and (prefix + str(p.pattern)).startswith("api/v1/"):
                yield prefix + str(p.pattern), p.callback.view_class

    return list(walk(get_resolver().url_patterns))


def test_every_view_declares_what_each_method_needs():
    views = _api_views()
    assert len(views) >= 20
    for route, view in views:
        assert Declared in view.permission_classes, route
        methods = [
            m.upper() for m in view.http_method_names if hasattr(view, m) and m not in ("options", "head")
        ]
        assert methods, route
        for method in methods:
            assert need_of(view, method) is not None, f"{route} {method} declares no need"


def test_schema_and_docs_are_served():
    client = Client()
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    paths = json.loads(schema.content)["paths"]
    assert "/api/v1/namespaces/{namespace_id}/" in paths
    assert "/api/v1/api-keys/" in paths
    assert client.get("/api/docs/").status_code == 200
