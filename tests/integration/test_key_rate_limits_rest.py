"""Setting an API key's own rate limits through the REST API (`/api/v1/api-keys/`, create and PATCH):
who may (a person who is admin on every namespace of the key), what is checked, and that the gRPC
API's next authentication of the key carries them."""

from __future__ import annotations

import pytest
from django.core.cache import caches

from tenants.auth import authenticate
from tests.integration.test_rest_api import Api, create_key, create_namespace, invite_and_join, signup

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_throttles():
    caches["throttle"].clear()  # sign-ups are throttled per address, and each test signs up several
    yield
    caches["throttle"].clear()


def test_an_owner_sets_a_keys_limits_at_creation_and_later_and_the_key_carries_them():
    owner, _ = signup()
    ns = create_namespace(owner, "app")
    body = {"name": "ci", "role": "operator", "namespaces": [ns["id"]], "rate_limits": {"actions": 5}}
    r = owner.post("/api/v1/api-keys/", body)
    assert r.status_code == 201, r.content
    made = r.json()
    assert made["rate_limits"] == {"actions": 5.0}
    assert authenticate(f"Bearer {made['key']}").rate_limits == (("actions", 5.0),)

    path = f"/api/v1/api-keys/{made['id']}/"
    r = owner.patch(path, {"rate_limits": {"polls": 40, "actions": None}})
    assert r.status_code == 200, r.content
    assert r.json()["rate_limits"] == {"polls": 40.0}  # actions back to the default share
    assert owner.get(path).json()["rate_limits"] == {"polls": 40.0}
    assert authenticate(f"Bearer {made['key']}").rate_limits == (("polls", 40.0),)

    # A rotation's successor keeps them.
    successor = owner.post(f"/api/v1/api-keys/{made['id']}/rotate/", {}).json()
    assert successor["rate_limits"] == {"polls": 40.0}
    # A key without limits of its own says so.
    assert create_key(owner, [ns["id"]]).json()["rate_limits"] == {}


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"starts": 5}, "unknown rate-limit bucket 'starts'"),
        ({"none": 5}, "unknown rate-limit bucket 'none'"),
        ({"actions": 0}, "the actions rate must be between 0 and"),
        ({"actions": -3}, "the actions rate must be between 0 and"),
        ({"actions": 2_000_000}, "the actions rate must be between 0 and"),
    ],
)
def test_a_limit_that_is_not_a_positive_rate_of_a_bucket_is_refused(limits, message):
    owner, _ = signup()
    ns = create_namespace(owner, "app")
    key = create_key(owner, [ns["id"]]).json()
    r = owner.patch(f"/api/v1/api-keys/{key['id']}/", {"rate_limits": limits})
    assert r.status_code == 400, r.content
    assert message in r.json()["detail"]
    body = {"name": "ci", "role": "reader", "namespaces": [ns["id"]], "rate_limits": limits}
    r = owner.post("/api/v1/api-keys/", body)
    assert r.status_code == 400, r.content
    assert owner.get(f"/api/v1/api-keys/{key['id']}/").json()["rate_limits"] == {}


def test_a_non_number_is_refused_by_the_shape():
    owner, _ = signup()
    key = create_key(owner, [create_namespace(owner, "app")["id"]]).json()
    r = owner.patch(f"/api/v1/api-keys/{key['id']}/", {"rate_limits": {"actions": "fast"}})
    assert r.status_code == 400
    assert owner.patch(f"/api/v1/api-keys/{key['id']}/", {}).status_code == 400


def test_only_an_admin_of_every_namespace_of_the_key_sets_its_limits():
    owner, org = signup()
    app = create_namespace(owner, "app")
    other = create_namespace(owner, "other")
    member = invite_and_join(owner, f"dev@{org}.example")
    me = next(m["id"] for m in owner.get("/api/v1/members/").json() if m["role"] == "member")
    owner.put(f"/api/v1/namespaces/{app['id']}/access/{me}/", {"role": "operator"})
    owner.put(f"/api/v1/namespaces/{other['id']}/access/{me}/", {"role": "reader"})

    # An operator makes keys, but does not divide the namespace's budget among them.
    own = create_key(member, [app["id"]]).json()
    r = member.patch(f"/api/v1/api-keys/{own['id']}/", {"rate_limits": {"actions": 1000}})
    assert r.status_code == 403
    assert "admins of each of its namespaces: you are operator on" in r.json()["detail"]
    body = {"name": "x", "role": "reader", "namespaces": [app["id"]], "rate_limits": {"actions": 1000}}
    assert member.post("/api/v1/api-keys/", body).status_code == 403

    # Admin on `app` but reader on `other`: a key on both is still not theirs to set.
    owner.put(f"/api/v1/namespaces/{app['id']}/access/{me}/", {"role": "admin"})
    both = create_key(member, [app["id"], other["id"]], role="reader").json()
    r = member.patch(f"/api/v1/api-keys/{both['id']}/", {"rate_limits": {"actions": 3}})
    assert r.status_code == 403
    assert "you are reader on" in r.json()["detail"]
    # On `app` alone they may, on their own key.
    r = member.patch(f"/api/v1/api-keys/{own['id']}/", {"rate_limits": {"actions": 3}})
    assert r.status_code == 200, r.content
    # Whoever made it: an admin of its namespaces divides their budget, the owner's keys included.
    owners = create_key(owner, [app["id"]]).json()
    r = member.patch(f"/api/v1/api-keys/{owners['id']}/", {"rate_limits": {"actions": 2}})
    assert r.status_code == 200, r.content
    assert r.json()["rate_limits"] == {"actions": 2.0}

    # No API key sets limits, not even an admin key of the namespace (not its own either).
    admin_key = create_key(owner, [app["id"]], role="admin").json()
    as_key = Api(key=admin_key["key"])
    r = as_key.patch(f"/api/v1/api-keys/{admin_key['id']}/", {"rate_limits": {"actions": 10_000}})
    assert r.status_code == 403
    assert owner.get(f"/api/v1/api-keys/{admin_key['id']}/").json()["rate_limits"] == {}

    # Another organisation's owner gets 404 for the key.
    stranger, _ = signup()
    assert (
        stranger.patch(f"/api/v1/api-keys/{own['id']}/", {"rate_limits": {"actions": 9}}).status_code == 404
    )
    assert owner.get(f"/api/v1/api-keys/{own['id']}/").json()["rate_limits"] == {"actions": 3.0}


def test_a_revoked_keys_limits_are_not_changed():
    owner, _ = signup()
    key = create_key(owner, [create_namespace(owner, "app")["id"]]).json()
    owner.post(f"/api/v1/api-keys/{key['id']}/revoke/")
    r = owner.patch(f"/api/v1/api-keys/{key['id']}/", {"rate_limits": {"actions": 3}})
    assert r.status_code == 400
    assert "revoked" in r.json()["detail"]
