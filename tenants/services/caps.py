"""An organisation's caps (tenants/quotas.py), checked under its row lock so that concurrent creations
cannot overshoot them."""

from __future__ import annotations

from perdura import clock

from tenants import quotas
from tenants.errors import QuotaExceeded
from tenants.models import ApiKey, Namespace, Organization


def organization_lock_txn(organization: Organization) -> None:
    """Lock the organisation's row until the caller's transaction ends (SQLite serialises writers anyway)."""
    Organization.objects.select_for_update().filter(pk=organization.pk).first()


def namespace_cap_check_txn(organization: Organization) -> None:
    """Raise QuotaExceeded if the organisation has as many namespaces (not deleted) as it may.

    Call it after `organization_lock_txn`, in the transaction that creates the namespace.
    """
    cap = quotas.max_namespaces()
    count = Namespace.objects.filter(organization=organization).exclude(state=Namespace.State.DELETED).count()
    if count >= cap:
        raise QuotaExceeded(
            f"organisation {organization.slug!r} has {count} namespaces, its limit "
            f"(PERDURA_ORG_MAX_NAMESPACES={cap}); delete one or ask the operator to raise the limit"
        )


def apikey_cap_check_txn(organization: Organization) -> None:
    """Raise QuotaExceeded if the organisation has as many live keys (neither revoked nor expired) as it may.

    Call it after `organization_lock_txn`, in the transaction that creates the key.
    """
    cap = quotas.max_api_keys()
    live = ApiKey.objects.filter(
        organization=organization, revoked_at__isnull=True, expires_at__gt=clock.now()
    )
    count = live.count()
    if count >= cap:
        raise QuotaExceeded(
            f"organisation {organization.slug!r} has {count} live API keys, its limit "
            f"(PERDURA_ORG_MAX_API_KEYS={cap}); revoke one or ask the operator to raise the limit"
        )
