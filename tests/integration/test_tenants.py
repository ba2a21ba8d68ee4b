"""Control-plane services on the database: organisations, namespace names, API key life cycle and
authentication (expiry, revocation, rotation, last use)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from perdura import clock

from tenants import auth, errors, selectors
from tenants.models import ApiKey, DataKey, Membership
from tenants.services import keys, namespaces, organizations

pytestmark = pytest.mark.django_db


@pytest.fixture
def org():
    return organizations.organization_create(slug=f"o{uuid.uuid4().hex[:8]}", owner_email="Owner@Example.com")


@pytest.fixture
def namespace(org):
    return namespaces.namespace_register(name=f"orders.{org.slug}", organization=org, retention_days=3)


def new_key(org, namespace, role="operator", expires_in=timedelta(days=1)):
    return keys.apikey_create_by_operator(
        organization=org, name="ci", role=role, namespaces=[namespace], expires_in=expires_in
    )


def test_an_organisation_has_its_owner_and_a_unique_slug(org):
    membership = Membership.objects.get(organization=org)
    assert membership.role == "owner"
    assert membership.user.email == "owner@example.com"
    with pytest.raises(errors.OrganizationAlreadyExists):
        organizations.organization_create(slug=org.slug, owner_email="x@example.com")
    with pytest.raises(errors.TenantError, match="lowercase"):
        organizations.organization_create(slug="Bad.Slug", owner_email="x@example.com")


def test_namespace_names_carry_their_organisation_suffix(org, namespace):
    assert DataKey.objects.filter(namespace=namespace).count() == 1
    assert namespaces.namespace_full_name(organization=org, name="payments") == f"payments.{org.slug}"
    with pytest.raises(errors.NamespaceError, match=f"<name>.{org.slug}"):
        namespaces.namespace_register(name="payments.someoneelse", organization=org)
    with pytest.raises(errors.NamespaceError, match="belong to organisations"):
        namespaces.namespace_register(name=f"squat.{org.slug}")
    with pytest.raises(errors.NamespaceAlreadyExists):
        namespaces.namespace_register(name=namespace.name, organization=org)
    with pytest.raises(errors.NamespaceError, match="between 1 and 90"):
        namespaces.namespace_update(namespace=namespace, retention_days=91)


def test_a_key_authenticates_with_its_grants_and_only_its_hash_is_stored(org, namespace):
    key, plaintext = new_key(org, namespace)
    row = ApiKey.objects.get(pk=key.pk)
    assert plaintext not in row.secret_hash
    principal = auth.authenticate(f"Bearer {plaintext}")
    assert principal.namespaces == frozenset({namespace.name})
    assert principal.namespace_ids == frozenset({str(namespace.id)})
    assert principal.role == "operator"
    assert principal.organization_slug == org.slug
    assert plaintext not in principal.label


def test_a_wrong_secret_and_an_unknown_prefix_get_the_same_answer(org, namespace):
    _, plaintext = new_key(org, namespace)
    forged = plaintext[:-2] + ("xx" if not plaintext.endswith("xx") else "yy")
    with pytest.raises(auth.AuthError, match="is not valid") as wrong:
        auth.authenticate(forged)
    assert forged not in str(wrong.value)
    with pytest.raises(auth.AuthError, match="is not valid"):
        auth.authenticate("pdk_" + "a" * 12 + "_" + "b" * 43)


def test_expired_and_revoked_keys_are_refused(org, namespace, monkeypatch):
    key, plaintext = new_key(org, namespace, expires_in=timedelta(hours=1))
    auth.authenticate(plaintext)
    later = clock.now() + timedelta(hours=1, seconds=1)
    monkeypatch.setattr(clock, "now", lambda: later)
    with pytest.raises(auth.AuthError, match="expired"):
        auth.authenticate(plaintext)
    monkeypatch.undo()
    keys.apikey_revoke(key=key)
    with pytest.raises(auth.AuthError, match="revoked"):
        auth.authenticate(plaintext)


def test_last_use_is_written_at_most_once_a_minute(org, namespace, monkeypatch):
    key, plaintext = new_key(org, namespace)
    start = clock.now()
    monkeypatch.setattr(clock, "now", lambda: start)
    auth.authenticate(plaintext)
    assert ApiKey.objects.get(pk=key.pk).last_used_at == start
    monkeypatch.setattr(clock, "now", lambda: start + timedelta(seconds=59))
    auth.authenticate(plaintext)
    assert ApiKey.objects.get(pk=key.pk).last_used_at == start
    monkeypatch.setattr(clock, "now", lambda: start + timedelta(seconds=61))
    auth.authenticate(plaintext)
    assert ApiKey.objects.get(pk=key.pk).last_used_at == start + timedelta(seconds=61)


def test_rotation_hands_over_the_grants_and_retires_the_old_key(org, namespace):
    old, old_plaintext = new_key(org, namespace, role="reader", expires_in=timedelta(days=30))
    new, new_plaintext = keys.apikey_rotate_by_operator(key=old)
    assert new.rotated_from_id == old.pk
    assert new.role == "reader"
    assert list(new.namespaces.all()) == [namespace]
    assert new.expires_at - new.created_at == timedelta(days=30)
    assert auth.authenticate(new_plaintext).key_id == str(new.pk)
    with pytest.raises(auth.AuthError, match="revoked"):
        auth.authenticate(old_plaintext)
    with pytest.raises(errors.TenantError, match="revoked"):
        keys.apikey_rotate_by_operator(key=old)


def test_rotation_with_grace_keeps_the_old_key_briefly(org, namespace, monkeypatch):
    old, old_plaintext = new_key(org, namespace)
    keys.apikey_rotate_by_operator(key=old, grace=timedelta(minutes=5))
    auth.authenticate(old_plaintext)
    later = clock.now() + timedelta(minutes=6)
    monkeypatch.setattr(clock, "now", lambda: later)
    with pytest.raises(auth.AuthError, match="expired"):
        auth.authenticate(old_plaintext)


def test_a_key_cannot_name_another_organisations_namespace_or_outlive_two_years(org, namespace):
    other = organizations.organization_create(slug=f"p{uuid.uuid4().hex[:8]}", owner_email="p@example.com")
    foreign = namespaces.namespace_register(name=f"x.{other.slug}", organization=other)
    with pytest.raises(errors.TenantError, match="does not belong"):
        keys.apikey_create_by_operator(
            organization=org,
            name="k",
            role="admin",
            namespaces=[namespace, foreign],
            expires_in=timedelta(days=1),
        )
    with pytest.raises(errors.TenantError, match="two years"):
        new_key(org, namespace, expires_in=timedelta(days=731))
    with pytest.raises(errors.TenantError, match="unknown role"):
        new_key(org, namespace, role="owner")


def test_keys_are_found_by_whole_key_or_prefix_and_a_wrong_secret_finds_nothing(org, namespace):
    key, plaintext = new_key(org, namespace)
    assert selectors.apikey_find(plaintext).pk == key.pk
    assert selectors.apikey_find(plaintext[:16]).pk == key.pk
    assert selectors.apikey_find(key.prefix).pk == key.pk
    assert selectors.apikey_find(plaintext[:-1] + ("A" if plaintext[-1] != "A" else "B")) is None
