"""Quotas on the database: per-organisation caps on namespaces and API keys, and per-namespace rate overrides."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from tenants import errors, quotas
from tenants.models import Namespace
from tenants.services import keys, namespaces, organizations

pytestmark = pytest.mark.django_db


@pytest.fixture
def org():
    return organizations.organization_create(slug=f"q{uuid.uuid4().hex[:8]}", owner_email="owner@example.com")


def test_an_organisation_may_have_only_so_many_namespaces(org, settings):
    settings.PERDURA_ORG_MAX_NAMESPACES = 2
    first = namespaces.namespace_register(name=f"a.{org.slug}", organization=org)
    namespaces.namespace_register(name=f"b.{org.slug}", organization=org)
    with pytest.raises(errors.QuotaExceeded, match=r"has 2 namespaces.*PERDURA_ORG_MAX_NAMESPACES=2"):
        namespaces.namespace_register(name=f"c.{org.slug}", organization=org)
    # The operator's own namespaces belong to no organisation and are not capped.
    namespaces.namespace_register(name=f"op{uuid.uuid4().hex[:8]}")
    # A deleted namespace frees its place.
    Namespace.objects.filter(pk=first.pk).update(state=Namespace.State.DELETED)
    namespaces.namespace_register(name=f"c.{org.slug}", organization=org)


def test_an_organisation_may_have_only_so_many_live_keys(org, settings):
    settings.PERDURA_ORG_MAX_API_KEYS = 2
    namespace = namespaces.namespace_register(name=f"a.{org.slug}", organization=org)

    def create():
        return keys.apikey_create_by_operator(
            organization=org, name="k", role="reader", namespaces=[namespace], expires_in=timedelta(days=1)
        )

    first, _ = create()
    create()
    with pytest.raises(errors.QuotaExceeded, match=r"has 2 live API keys.*PERDURA_ORG_MAX_API_KEYS=2"):
        create()
    # Rotation replaces a key, so it is allowed at the cap; a revoked key frees its place.
    successor, _ = keys.apikey_rotate_by_operator(key=first)
    with pytest.raises(errors.QuotaExceeded):
        create()
    keys.apikey_revoke(key=successor)
    create()


def test_rate_overrides_are_stored_on_the_namespace_and_reset_to_the_default(org, settings):
    namespace = namespaces.namespace_register(name=f"a.{org.slug}", organization=org)
    assert quotas.namespace_rates(namespace.rate_limits).rps == quotas.default_rps()
    namespaces.namespace_set_rate_limits(namespace=namespace, changes={"actions": 5, "visibility": 2.5})
    stored = Namespace.objects.get(pk=namespace.pk).rate_limits
    assert stored == {"actions": 5, "visibility": 2.5}
    rates = quotas.namespace_rates(stored)
    assert rates.rps[quotas.Bucket.ACTIONS] == 5
    assert rates.rate(quotas.Bucket.ACTIONS).burst == 10  # two seconds' worth
    assert rates.rps[quotas.Bucket.POLLS] == settings.PERDURA_RATE_POLLS
    assert rates.overridden == {quotas.Bucket.ACTIONS, quotas.Bucket.VISIBILITY}
    namespaces.namespace_set_rate_limits(namespace=namespace, changes={"actions": None})
    assert Namespace.objects.get(pk=namespace.pk).rate_limits == {"visibility": 2.5}
    with pytest.raises(quotas.QuotaError, match="unknown rate-limit bucket 'none'"):
        namespaces.namespace_set_rate_limits(namespace=namespace, changes={"none": 1})
    with pytest.raises(quotas.QuotaError, match="must be between"):
        namespaces.namespace_set_rate_limits(namespace=namespace, changes={"polls": 0})
