"""Namespaces: register (with the first data key), update, rate limits, deprecate, delete, and people's
roles on them (django-guardian object permissions, tenants/roles.py)."""

from __future__ import annotations

import re
import secrets
from typing import Any

from django.db import IntegrityError, transaction
from guardian.shortcuts import assign_perm
from perdura import clock

from tenants import audit, quotas, roles, selectors
from tenants.datakeys import datakey_create
from tenants.errors import NamespaceAlreadyExists, NamespaceError
from tenants.models import Namespace, NamespaceUserPermission, Organization
from tenants.services import caps, keys

# A namespace without organisation (the operator's own, e.g. `default`) has no dot, so it can never
# take a name inside an organisation's `<name>.<slug>` space.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,199}$")
RETENTION_DAYS = range(1, 91)


def namespace_full_name(*, organization: Organization, name: str) -> str:
    """`name` with the organisation's suffix (`orders` → `orders.acme`); unchanged if it has it."""
    suffix = f".{organization.slug}"
    return name if name.endswith(suffix) else f"{name}{suffix}"


def _check_name(name: str, organization: Organization | None) -> None:
    if organization is None:
        if not NAME_RE.match(name):
            raise NamespaceError(
                f"namespace name {name!r} is invalid: use 1-200 letters, digits, '-' or '_', starting with a "
                "letter or digit (names with a '.' belong to organisations: <name>.<organisation>)"
            )
        return
    base, dot, slug = name.rpartition(".")
    if not dot or slug != organization.slug:
        raise NamespaceError(
            f"namespace name {name!r} is invalid: namespaces of organisation {organization.slug!r} are "
            f"named <name>.{organization.slug}"
        )
    if not NAME_RE.match(base):
        raise NamespaceError(
            f"namespace name {name!r} is invalid: before .{organization.slug} use 1-200 letters, digits, "
            "'-' or '_', starting with a letter or digit"
        )


def _check_retention(days: int) -> None:
    if days not in RETENTION_DAYS:
        raise NamespaceError(f"retention must be between 1 and 90 days, not {days}")


def namespace_register(
    *,
    name: str,
    organization: Organization | None = None,
    description: str = "",
    retention_days: int = 1,
    owner_email: str = "",
    creator_key_id: str | None = None,
) -> Namespace:
    """Create a namespace and its first data key in one transaction.

    A namespace of an organisation is named `<name>.<organisation slug>`; one without organisation
    (the operator's own) has no dot. Either way names are globally unique.

    Args:
        creator_key_id: the API key registering it, which may then use it (as RegisterNamespace
            does): otherwise it could not even describe it.

    Raises:
        NamespaceError: the name or retention is invalid.
        NamespaceAlreadyExists: the name is taken.
        QuotaExceeded: the organisation has as many namespaces as it may.
    """
    _check_name(name, organization)
    _check_retention(retention_days)
    try:
        with transaction.atomic():
            if organization is not None:
                caps.organization_lock_txn(organization)
                caps.namespace_cap_check_txn(organization)
            namespace = Namespace.objects.create(
                name=name,
                organization=organization,
                description=description,
                retention_days=retention_days,
                owner_email=owner_email,
                created_at=clock.now(),
            )
            datakey_create(namespace=namespace)
            if creator_key_id is not None:
                namespace.api_keys.add(creator_key_id)  # type: ignore[arg-type]  # a UUID key: django-stubs takes int ones
            audit.record_change(
                action="namespace.register",
                target=f"namespace/{name}",
                namespace=namespace,
                details={"retention_days": retention_days},
            )
    except IntegrityError:
        raise NamespaceAlreadyExists(f"Namespace already exists: {name}") from None
    return namespace


def namespace_ensure(*, name: str, retention_days: int = 1) -> Namespace:
    """The named namespace, registered first if it does not exist (used by `perdura dev` for `default`)."""
    existing = Namespace.objects.filter(name=name).first()
    if existing is not None:
        return existing
    try:
        return namespace_register(name=name, retention_days=retention_days)
    except NamespaceAlreadyExists:
        return Namespace.objects.get(name=name)


def namespace_update(
    *,
    namespace: Namespace,
    description: str | None = None,
    owner_email: str | None = None,
    retention_days: int | None = None,
) -> Namespace:
    """Change a namespace's description, owner email or retention (1-90 days); None leaves a field.

    Raises:
        NamespaceError: the retention is out of range.
    """
    fields: dict[str, Any] = {}
    if description is not None:
        fields["description"] = description
    if owner_email is not None:
        fields["owner_email"] = owner_email
    if retention_days is not None:
        _check_retention(retention_days)
        fields["retention_days"] = retention_days
    if fields:
        with transaction.atomic():
            Namespace.objects.filter(pk=namespace.pk).update(**fields)
            audit.record_change(
                action="namespace.update",
                target=f"namespace/{namespace.name}",
                namespace=namespace,
                details=fields,
            )
        for field, value in fields.items():
            setattr(namespace, field, value)
        selectors.namespace_forget(namespace.name)
    return namespace


def namespace_set_rate_limits(*, namespace: Namespace, changes: dict[str, float | None]) -> Namespace:
    """Override a namespace's rate limits (bucket → requests per second; None: back to the default).

    The operator's call (`perdura namespace update --actions-rps ...`): tenants cannot raise their own
    limits. Every `perdura api` process applies the change within a few seconds.

    Raises:
        quotas.QuotaError: an unknown bucket or a rate that is not positive.
    """
    checked = quotas.validate_overrides(changes)
    with transaction.atomic():
        current = (
            Namespace.objects.select_for_update().values_list("rate_limits", flat=True).get(pk=namespace.pk)
        )
        limits = dict(current or {})
        for bucket, value in checked.items():
            if value is None:
                limits.pop(bucket.value, None)
            else:
                limits[bucket.value] = value
        Namespace.objects.filter(pk=namespace.pk).update(rate_limits=limits)
        audit.record_change(
            action="namespace.rate_limits",
            target=f"namespace/{namespace.name}",
            namespace=namespace,
            details={"rate_limits": limits},
        )
    namespace.rate_limits = limits
    selectors.namespace_forget(namespace.name)
    return namespace


def namespace_deprecate(*, namespace: Namespace) -> Namespace:
    """Mark a namespace deprecated (Temporal's DeprecateNamespace); its runs and keys stay."""
    with transaction.atomic():
        Namespace.objects.filter(pk=namespace.pk).update(state=Namespace.State.DEPRECATED)
        audit.record_change(
            action="namespace.deprecate", target=f"namespace/{namespace.name}", namespace=namespace
        )
    namespace.state = Namespace.State.DEPRECATED
    selectors.namespace_forget(namespace.name)
    return namespace


def namespace_delete(*, namespace: Namespace) -> Namespace:
    """Delete a namespace as Temporal's DeleteNamespace does: mark it deleted and rename it
    `<name>-deleted-<5 hex>` (keeping its organisation suffix), so the name can be registered again;
    API keys lose it at once. Its runs are kept (not purged yet).
    """
    old = namespace.name
    base, dot, slug = old.rpartition(".")
    tag = f"-deleted-{secrets.token_hex(3)[:5]}"
    new = f"{base}{tag}.{slug}" if dot else f"{old}{tag}"
    with transaction.atomic():
        Namespace.objects.filter(pk=namespace.pk).update(state=Namespace.State.DELETED, name=new)
        namespace.api_keys.clear()
        audit.record_change(
            action="namespace.delete",
            target=f"namespace/{old}",
            namespace=namespace,
            details={"deleted_name": new},
        )
    namespace.name, namespace.state = new, Namespace.State.DELETED
    selectors.namespace_forget(old)
    return namespace


def namespace_grant(*, namespace: Namespace, user: Any, role: str | None) -> None:
    """Give `user` the namespace role `role` on `namespace` (replacing any other); None takes it away.

    The keys `user` made are brought within their roles as they now are, in the same transaction.
    """
    with transaction.atomic():
        NamespaceUserPermission.objects.filter(content_object=namespace, user=user).delete()
        if role is not None:
            for codename in roles.permissions_for(role):
                assign_perm(f"tenants.{codename}", user, namespace)
        audit.record_change(
            action="namespace.grant",
            target=f"member/{getattr(user, 'email', '')}",
            namespace=namespace,
            details={"role": str(role) if role is not None else None},
        )
        # People hold roles only on organisations' namespaces (the operator's have no members).
        assert namespace.organization is not None
        keys.apikeys_fit_creator(organization=namespace.organization, user=user, reason="namespace.grant")
