"""The console's organisation pages for signed-in people (Django's test client with CSRF checks): sign-up
answers alike for new and known emails and its link creates the organisation; the first steps lead to a
namespace, a key shown once and a snippet naming both; keys are revoked and rotated; a key never exceeds
its creator; tenant names with markup render inert; a cross-origin form post is refused."""

from __future__ import annotations

import re
import uuid

import pytest
from django.core import mail
from django.core.cache import caches
from django.test import Client

from tenants import auth
from tenants.models import ApiKey, AuditEvent, Membership, Namespace
from tests.integration.test_rest_api import PASSWORD, invite_and_join

pytestmark = pytest.mark.django_db

CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
XSS = '<script>alert(1)</script><img src=x onerror="alert(2)">'


@pytest.fixture(autouse=True)
def _fresh_throttles():
    caches["throttle"].clear()
    yield
    caches["throttle"].clear()


def _csrf(client: Client, path: str) -> str:
    page = client.get(path)
    return CSRF.search(page.content.decode()).group(1)


def _post(client: Client, path: str, data: dict, form_page: str | None = None):
    token = _csrf(client, form_page or path)
    return client.post(path, {**data, "csrfmiddlewaretoken": token})


def console_signup(org: str | None = None, email: str | None = None) -> tuple[Client, str]:
    """Sign up through the console's pages, as a person does, and follow the emailed link."""
    org = org or f"o{uuid.uuid4().hex[:8]}"
    email = email or f"owner@{org}.example"
    client = Client(enforce_csrf_checks=True)
    r = _post(client, "/signup/", {"email": email, "password": PASSWORD, "organization": org})
    assert r.status_code == 202, r.content
    assert b"Check your email" in r.content
    body = next(m.body for m in reversed(mail.outbox) if m.to == [email])
    link = re.search(r"(/signup/confirm/\?token=\S+)", body).group(1)
    confirm = client.get(link)
    assert confirm.status_code == 200
    assert not Namespace.objects.filter(organization__slug=org).exists()
    token = re.search(r'name="token" value="([^"]+)"', confirm.content.decode()).group(1)
    r = client.post(
        "/signup/confirm/",
        {"token": token, "csrfmiddlewaretoken": CSRF.search(confirm.content.decode()).group(1)},
    )
    assert r.status_code == 302, r.content
    assert r["Location"] == "/namespaces?welcome=1"
    return client, org


def test_signup_answers_alike_for_a_known_email():
    _, org = console_signup()
    mail.outbox.clear()
    again = Client(enforce_csrf_checks=True)
    r = _post(
        again, "/signup/", {"email": f"owner@{org}.example", "password": PASSWORD, "organization": "x" + org}
    )
    fresh = _post(
        Client(enforce_csrf_checks=True),
        "/signup/",
        {"email": f"new@{org}.example", "password": PASSWORD, "organization": "y" + org},
    )
    assert (r.status_code, fresh.status_code) == (202, 202)
    strip = re.compile(r'value="[^"]*"|owner@\S+|new@\S+')
    assert strip.sub("", r.content.decode()) == strip.sub("", fresh.content.decode())
    assert "already has an account" in mail.outbox[0].body
    # Validation is the REST API's: a weak password and a taken organisation name are refused.
    weak = _post(
        Client(enforce_csrf_checks=True),
        "/signup/",
        {"email": "a@b.example", "password": "123", "organization": "zz" + org},
    )
    assert weak.status_code == 400
    taken = _post(
        Client(enforce_csrf_checks=True),
        "/signup/",
        {"email": "c@d.example", "password": PASSWORD, "organization": org},
    )
    assert taken.status_code == 400
    assert b"organization-error" in taken.content


def test_first_steps_namespace_key_snippet_revoke_rotate():
    client, org = console_signup()
    page = client.get("/namespaces?welcome=1")
    assert page.status_code == 200
    assert b"First steps" in page.content
    r = _post(client, "/namespaces", {"name": "orders", "retention_days": "7"})
    assert r.status_code == 302
    namespace = Namespace.objects.get(name=f"orders.{org}")
    assert namespace.retention_days == 7
    assert AuditEvent.objects.filter(action="namespace.register", via="console").count() == 1

    r = _post(
        client,
        "/organization/api-keys",
        {"name": "ci", "role": "operator", "namespaces": [str(namespace.id)], "expires_in_days": "30"},
    )
    assert r.status_code == 201, r.content
    text = r.content.decode()
    plaintext = re.search(r'<code id="new-key" class="secret">([^<]+)</code>', text).group(1)
    principal = auth.authenticate(f"Bearer {plaintext}")
    assert principal.namespaces == {namespace.name}
    assert principal.role == "operator"
    assert f"namespace=&quot;{namespace.name}&quot;" in text
    assert f"api_key=&quot;{plaintext}&quot;" in text
    assert f"--api-key {plaintext}" in text
    assert r["Cache-Control"] == "no-store"
    listing = client.get("/organization/api-keys").content.decode()
    assert plaintext not in listing  # shown once
    key = ApiKey.objects.get(prefix=principal.prefix)

    r = _post(
        client, f"/organization/api-keys/{key.id}/rotate", {"grace_seconds": "3600"}, "/organization/api-keys"
    )
    assert r.status_code == 201
    successor = re.search(r'<code id="new-key" class="secret">([^<]+)</code>', r.content.decode()).group(1)
    assert auth.authenticate(f"Bearer {successor}").namespaces == {namespace.name}
    assert auth.authenticate(f"Bearer {plaintext}") is not None  # within its grace

    r = _post(client, f"/organization/api-keys/{key.id}/revoke", {}, "/organization/api-keys")
    assert r.status_code == 200
    with pytest.raises(auth.AuthError):
        auth.authenticate(f"Bearer {plaintext}")
    assert AuditEvent.objects.filter(action="apikey.revoke", via="console").exists()


def test_a_key_gets_rates_of_its_own_from_an_admin_of_its_namespaces_on_the_keys_page():
    owner, org = console_signup()
    _post(owner, "/namespaces", {"name": "orders"})
    namespace = Namespace.objects.get(name=f"orders.{org}")
    page = owner.get("/organization/api-keys").content.decode()
    assert 'name="rate_actions"' in page
    assert "0.5 of each of its namespaces' rates" in page
    form = {"name": "looper", "role": "operator", "namespaces": [str(namespace.id)]}
    r = _post(owner, "/organization/api-keys", {**form, "rate_actions": "7", "rate_polls": ""})
    assert r.status_code == 201, r.content
    key = ApiKey.objects.get(name="looper")
    assert key.rate_limits == {"actions": 7.0}  # polls left blank: the default share
    listing = owner.get("/organization/api-keys").content.decode()
    assert "actions 7/s" in listing
    r = _post(owner, "/organization/api-keys", {**form, "name": "bad", "rate_actions": "-1"})
    assert r.status_code == 400
    assert b"the actions rate must be between 0 and" in r.content
    assert not ApiKey.objects.filter(name="bad").exists()

    # A reader of the namespace makes reader keys, but gives them no rates of their own.
    member = invite_and_join_console(owner, org)
    r = _post(
        member, "/organization/api-keys", {**form, "name": "mine", "role": "reader", "rate_actions": "9"}
    )
    assert r.status_code == 403
    assert b"admins of each of its namespaces" in r.content
    assert not ApiKey.objects.filter(name="mine").exists()


def test_a_key_never_exceeds_its_creator():
    owner, org = console_signup()
    _post(owner, "/namespaces", {"name": "orders"})
    namespace = Namespace.objects.get(name=f"orders.{org}")
    member_api = invite_and_join_console(owner, org)
    token_page = member_api.get("/organization/api-keys").content.decode()
    assert '<option value="admin"' not in token_page
    assert '<option value="operator"' not in token_page
    r = _post(
        member_api,
        "/organization/api-keys",
        {"name": "x", "role": "admin", "namespaces": [str(namespace.id)]},
    )
    assert r.status_code == 403
    assert b"cannot exceed" in r.content
    assert not ApiKey.objects.filter(name="x").exists()


def invite_and_join_console(owner: Client, org: str) -> Client:
    """A member with the reader role on orders.<org>, signed in to the console (the REST API invites)."""
    from tests.integration.test_rest_api import Api

    api = Api()
    api.client = owner
    member = invite_and_join(api, f"reader@{org}.example")
    namespace = Namespace.objects.get(name=f"orders.{org}")
    membership_id = next(
        m["id"] for m in api.get("/api/v1/members/").json() if m["email"].startswith("reader@")
    )
    assert (
        api.put(f"/api/v1/namespaces/{namespace.id}/access/{membership_id}/", {"role": "reader"}).status_code
        == 200
    )
    return member.client


def test_markup_in_names_renders_inert():
    client, org = console_signup()
    from tenants.models import Organization

    Organization.objects.filter(slug=org).update(name=XSS)
    _post(client, "/namespaces", {"name": "orders", "description": XSS})
    namespace = Namespace.objects.get(name=f"orders.{org}")
    _post(
        client, "/organization/api-keys", {"name": XSS, "role": "reader", "namespaces": [str(namespace.id)]}
    )
    # A person whose address carries markup (the validators refuse one; the operator's tools or an older
    # account might not have): the members page shows it as text.
    from django.contrib.auth import get_user_model
    from perdura import clock

    odd = get_user_model().objects.create_user(username="odd", email=XSS + "@x.example", password=PASSWORD)
    Membership.objects.create(
        organization=Organization.objects.get(slug=org), user=odd, role="member", created_at=clock.now()
    )
    for path in ("/namespaces", "/organization/api-keys", "/organization/members"):
        text = client.get(path).content.decode()
        assert "<script>alert(1)</script>" not in text
        assert 'onerror="alert(2)"' not in text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_cross_origin_form_posts_are_refused():
    client, org = console_signup()
    # No token (a form on another site cannot read it): refused, and nothing is created.
    r = client.post("/namespaces", {"name": "evil"}, HTTP_ORIGIN="https://evil.example")
    assert r.status_code == 403
    token = _csrf(client, "/namespaces")
    # With a token but from another origin (as if leaked): Django's origin check refuses it too.
    r = client.post(
        "/namespaces", {"name": "evil", "csrfmiddlewaretoken": token}, HTTP_ORIGIN="https://evil.example"
    )
    assert r.status_code == 403
    r = Client(enforce_csrf_checks=True).post(
        "/signup/", {"email": "e@e.example", "password": PASSWORD, "organization": "evil" + org}
    )
    assert r.status_code == 403
    assert not Namespace.objects.filter(name=f"evil.{org}").exists()


def test_namespace_settings_for_admins():
    """Description, retention and codec server URL (https, or http on localhost); search attributes added
    and removed within their type's limit, audited under their RPC names; deprecate; delete only with the
    name typed."""
    client, org = console_signup()
    _post(client, "/namespaces", {"name": "orders"})
    name = f"orders.{org}"
    settings_url = f"/namespaces/{name}/settings"
    r = _post(
        client,
        settings_url,
        {"description": "Orders", "retention_days": "30", "codec_server_url": "http://codec.example.com"},
    )
    assert r.status_code == 400
    assert b"codec-error" in r.content
    r = _post(
        client,
        settings_url,
        {"description": "Orders", "retention_days": "30", "codec_server_url": "https://codec.example.com/"},
    )
    assert r.status_code == 302
    namespace = Namespace.objects.get(name=name)
    assert (namespace.description, namespace.retention_days) == ("Orders", 30)
    assert namespace.codec_server_url == "https://codec.example.com"
    assert _post(client, settings_url, {"retention_days": "91"}).status_code == 400

    add = f"{settings_url}/search-attributes"
    assert _post(client, add, {"name": "Region", "type": "Keyword"}, settings_url).status_code == 302
    for i in range(3):
        _post(client, add, {"name": f"Flag{i}", "type": "Bool"}, settings_url)
    over = _post(client, add, {"name": "Flag3", "type": "Bool"}, settings_url)
    assert over.status_code == 400
    assert b"cannot have more than 3" in over.content
    page = client.get(settings_url).content.decode()
    assert "Bool (3 of 3)" in page
    assert "<code>Region</code>" in page
    r = _post(client, f"{settings_url}/search-attributes/remove", {"name": "Region"}, settings_url)
    assert r.status_code == 302
    assert "<code>Region</code>" not in client.get(settings_url).content.decode()
    actions = list(
        AuditEvent.objects.filter(namespace_id=namespace.id, via="console").values_list("action", "outcome")
    )
    assert ("AddSearchAttributes", "ok") in actions
    assert ("AddSearchAttributes", "failed") in actions
    assert ("RemoveSearchAttributes", "ok") in actions

    assert _post(client, f"{settings_url}/deprecate", {}, settings_url).status_code == 302
    assert Namespace.objects.get(pk=namespace.pk).state == Namespace.State.DEPRECATED
    wrong = _post(client, f"{settings_url}/delete", {"confirm": "orders"}, settings_url)
    assert wrong.status_code == 400
    r = _post(client, f"{settings_url}/delete", {"confirm": name}, settings_url)
    assert r.status_code == 302
    assert Namespace.objects.get(pk=namespace.pk).state == Namespace.State.DELETED
    assert client.get(settings_url).status_code == 404


def _accept_in_console(email: str) -> Client:
    """The invitee opens the emailed link and accepts with a password."""
    body = next(m.body for m in reversed(mail.outbox) if m.to == [email])
    link = re.search(r"(/invitations/accept/\?token=\S+)", body).group(1)
    invitee = Client(enforce_csrf_checks=True)
    page = invitee.get(link)
    assert page.status_code == 200
    assert email in page.content.decode()
    token = re.search(r'name="token" value="([^"]+)"', page.content.decode()).group(1)
    csrf = CSRF.search(page.content.decode()).group(1)
    r = invitee.post(
        "/invitations/accept/", {"token": token, "password": PASSWORD, "csrfmiddlewaretoken": csrf}
    )
    assert r.status_code == 302, r.content
    return invitee


def test_members_invitations_and_the_roles_grid():
    """Invite (resend: the old link stops working), accept, grant reader on one namespace in the grid; only
    owners make owners; the last owner stays."""
    from django.test import TestCase

    owner, org = console_signup()
    for name in ("orders", "billing"):
        _post(owner, "/namespaces", {"name": name})
    orders = Namespace.objects.get(name=f"orders.{org}")
    email = f"bea@{org}.example"
    mail.outbox.clear()
    with TestCase.captureOnCommitCallbacks(execute=True):
        r = _post(
            owner, "/organization/invitations", {"email": email, "role": "member"}, "/organization/members"
        )
    assert r.status_code == 302
    first = mail.outbox[-1].body
    from tenants.models import Invitation

    invitation = Invitation.objects.get(email=email, revoked_at__isnull=True)
    with TestCase.captureOnCommitCallbacks(execute=True):
        r = _post(owner, f"/organization/invitations/{invitation.id}/resend", {}, "/organization/members")
    assert r.status_code == 302
    assert mail.outbox[-1].body != first
    stale = re.search(r"(/invitations/accept/\?token=\S+)", first).group(1)
    assert Client().get(stale).status_code == 404
    bea = _accept_in_console(email)
    assert "orders." not in bea.get("/namespaces").content.decode()

    membership = Membership.objects.get(organization__slug=org, user__email=email)
    page = owner.get("/organization/members").content.decode()
    assert f'name="ns-{orders.id}" form="grid-{membership.id}"' in page
    r = _post(
        owner,
        f"/organization/members/{membership.id}/access",
        {f"ns-{orders.id}": "reader"},
        "/organization/members",
    )
    assert r.status_code == 302
    dashboard = bea.get("/namespaces").content.decode()
    assert f"orders.{org}" in dashboard
    assert f"billing.{org}" not in dashboard
    assert "Create a namespace" not in dashboard
    # Bea sees the members but manages nothing.
    members_page = bea.get("/organization/members").content.decode()
    assert "Invite" not in members_page
    assert "<select" not in members_page

    # An admin may not make an owner; the owner may; the last owner stays.
    r = _post(
        owner, f"/organization/members/{membership.id}/role", {"role": "admin"}, "/organization/members"
    )
    assert r.status_code == 302
    r = _post(bea, f"/organization/members/{membership.id}/role", {"role": "owner"}, "/organization/members")
    assert r.status_code == 403
    assert b"only owners" in r.content
    assert '<option value="owner"' not in bea.get("/organization/members").content.decode()
    mine = Membership.objects.get(organization__slug=org, role="owner")
    r = _post(owner, f"/organization/members/{mine.id}/role", {"role": "member"}, "/organization/members")
    assert r.status_code == 400
    assert b"at least one owner" in r.content


def test_audit_log_filters_expands_and_exports_what_it_shows():
    """Filter by namespace, actor, action, outcome and time; entries expand to their JSON; the export is the
    filtered view as JSON Lines; a bad time says which filter; a member without admin roles is refused."""
    import json

    owner, org = console_signup()
    _post(owner, "/namespaces", {"name": "orders"})
    _post(owner, "/namespaces", {"name": "billing"})
    orders = Namespace.objects.get(name=f"orders.{org}")
    _post(owner, f"/namespaces/{orders.name}/settings", {"retention_days": "5"})
    _post(owner, "/organization/api-keys", {"name": XSS, "role": "reader", "namespaces": [str(orders.id)]})

    page = owner.get("/organization/audit").content.decode()
    assert "namespace.register" in page
    assert "apikey.create" in page
    assert "&lt;script&gt;" in page  # the key's name, in the expanded JSON, escaped
    assert "<script>alert(1)</script>" not in page
    filtered = owner.get(
        "/organization/audit", {"namespace": orders.name, "action": "namespace."}
    ).content.decode()
    assert "namespace.update" in filtered
    assert f"namespace/billing.{org}" not in filtered
    export = owner.get("/organization/audit/export", {"namespace": orders.name, "action": "namespace."})
    assert export["Content-Type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in b"".join(export.streaming_content).decode().splitlines()]
    assert [e["action"] for e in lines] == ["namespace.register", "namespace.update"]
    assert {e["namespace"] for e in lines} == {orders.name}
    assert all(e["actor"]["label"] == f"owner@{org}.example" for e in lines)
    none = owner.get("/organization/audit", {"outcome": "denied", "actor": "nobody"}).content.decode()
    assert "No entries match these filters" in none
    assert owner.get("/organization/audit", {"since": "yesterday-ish"}).status_code == 400
    assert owner.get("/organization/audit", {"since": "1h", "until": "2099-01-01"}).status_code == 200


def test_pages_draw_from_the_organisations_request_bucket(settings):
    """The organisation pages take their tokens from the bucket the REST API's requests take theirs from:
    past it, 429 with Retry-After, while another organisation's pages are served."""
    import time

    settings.PERDURA_RATE_LIMITS = "memory"
    settings.PERDURA_RATE_REST = 2.0  # two a second, four at once
    client, org = console_signup()
    other, _ = console_signup()
    time.sleep(2.1)  # the set-up's requests refill
    from tests.integration.test_rest_api import Api

    api = Api()
    api.client = client
    codes = [api.get("/api/v1/namespaces/").status_code for _ in range(2)]
    codes += [client.get("/organization/api-keys").status_code for _ in range(2)]
    assert codes == [200, 200, 200, 200]
    refused = client.get("/namespaces")
    assert refused.status_code == 429
    assert refused["Retry-After"] == "1"
    assert f"organisation &#x27;{org}&#x27; allows 2 REST API requests per second" in refused.content.decode()
    assert api.get("/api/v1/namespaces/").status_code == 429
    assert other.get("/namespaces").status_code == 200
