"""Control-plane writes: organisations and members, namespaces (with their data keys), API keys."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from perdura import clock

from tenants import api_keys, audit, quotas, roles, selectors
from tenants.datakeys import datakey_create
from tenants.models import ApiKey, Membership, Namespace, Organization
from tenants.roles import KeyRole, OrgRole

# A namespace without organisation (the operator's own, e.g. `default`) has no dot, so it can never
# take a name inside an organisation's `<name>.<slug>` space.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,199}$")
SLUG_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$")
RETENTION_DAYS = range(1, 91)
KEY_LIFETIME_MAX = timedelta(days=730)


class TenantError(ValueError):
    """A control-plane request that cannot be honoured, with a message for a person."""


class NamespaceError(TenantError):
    pass


class NamespaceAlreadyExists(NamespaceError):
    pass


class OrganizationAlreadyExists(TenantError):
    pass


class QuotaExceeded(TenantError):
    """An organisation is at one of its caps (tenants/quotas.py)."""


def _lock_organization(organization: Organization) -> None:
    # Concurrent creations count under the organisation's row lock, so a cap cannot be overshot
    # (SQLite serialises writers anyway).
    Organization.objects.select_for_update().filter(pk=organization.pk).first()


def _check_namespace_cap(organization: Organization) -> None:
    cap = quotas.max_namespaces()
    count = Namespace.objects.filter(organization=organization).exclude(state=Namespace.State.DELETED).count()
    if count >= cap:
        raise QuotaExceeded(
            f"organisation {organization.slug!r} has {count} namespaces, its limit "
            f"(PERDURA_ORG_MAX_NAMESPACES={cap}); delete one or ask the operator to raise the limit"
        )


def _check_key_cap(organization: Organization) -> None:
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


# --- organisations and members ------------------------------------------------------------------


def _check_slug(slug: str) -> None:
    if not SLUG_RE.match(slug):
        raise TenantError(
            f"organisation name {slug!r} is invalid: use 1-40 lowercase letters, digits or '-', "
            "starting and ending with a letter or digit (it becomes the suffix of its namespaces)"
        )


def organization_check_free(*, slug: str) -> None:
    """Raise what `organization_create` would for `slug` (TenantError, OrganizationAlreadyExists)."""
    _check_slug(slug)
    if Organization.objects.filter(slug=slug).exists():
        raise OrganizationAlreadyExists(f"organisation {slug!r} already exists")


def organization_create(*, slug: str, owner_email: str, name: str = "") -> Organization:
    """Create an organisation with its first owner (a Django user, created if the email is new).

    Raises:
        TenantError: the slug or email is invalid.
        OrganizationAlreadyExists: the slug is taken.
    """
    _check_slug(slug)
    try:
        with transaction.atomic():
            organization = Organization.objects.create(slug=slug, name=name or slug, created_at=clock.now())
            audit.record_change(
                action="organization.create", target=f"organization/{slug}", organization=organization
            )
            member_add(organization=organization, email=owner_email, role=OrgRole.OWNER)
    except IntegrityError:
        raise OrganizationAlreadyExists(f"organisation {slug!r} already exists") from None
    return organization


def member_add(*, organization: Organization, email: str, role: OrgRole) -> Membership:
    """Give the person with `email` a role in `organization` (creating the user if needed).

    Raises:
        TenantError: the email is not an address.
    """
    email = email.strip().lower()
    if "@" not in email or email.startswith("@") or email.endswith("@"):
        raise TenantError(f"{email!r} is not an email address")
    user_model = get_user_model()
    user = user_model.objects.filter(email=email).first()
    if user is None:
        user = user_model.objects.create_user(username=email, email=email)  # unusable password until set
    with transaction.atomic():
        membership, _ = Membership.objects.update_or_create(
            organization=organization,
            user=user,
            defaults={"role": OrgRole(role).value, "created_at": clock.now()},
        )
        audit.record_change(
            action="member.add",
            target=f"member/{email}",
            organization=organization,
            details={"role": membership.role},
        )
    return membership


# --- namespaces ------------------------------------------------------------------------------


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
) -> Namespace:
    """Create a namespace and its first data key in one transaction.

    A namespace of an organisation is named `<name>.<organisation slug>`; one without organisation
    (the operator's own) has no dot. Either way names are globally unique.

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
                _lock_organization(organization)
                _check_namespace_cap(organization)
            namespace = Namespace.objects.create(
                name=name,
                organization=organization,
                description=description,
                retention_days=retention_days,
                owner_email=owner_email,
                created_at=clock.now(),
            )
            datakey_create(namespace=namespace)
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
    fields = {}
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


# --- API keys --------------------------------------------------------------------------------


def apikey_create(
    *,
    organization: Organization,
    name: str,
    role: str,
    namespaces: list[Namespace],
    expires_in: timedelta,
    created_by: object | None = None,
    rotated_from: ApiKey | None = None,
) -> tuple[ApiKey, str]:
    """Create an API key; returns the row and the plaintext key, which is shown once and never stored.

    Raises:
        TenantError: no name, unknown role, no namespace, a namespace of another organisation, or an
            expiry that is not within two years.
        QuotaExceeded: the organisation has as many live keys as it may (a rotation is not counted:
            it retires the key it replaces).
    """
    if not name.strip():
        raise TenantError("an API key needs a name")
    try:
        role = KeyRole(role).value
    except ValueError:
        raise TenantError(f"unknown role {role!r}: use reader, operator or admin") from None
    if not namespaces:
        raise TenantError("an API key needs at least one namespace")
    foreign = [n.name for n in namespaces if n.organization_id != organization.id]
    if foreign:
        raise TenantError(f"namespace {foreign[0]!r} does not belong to organisation {organization.slug!r}")
    if not timedelta(0) < expires_in <= KEY_LIFETIME_MAX:
        raise TenantError("an API key must expire within two years (730 days)")
    new = api_keys.generate()
    now = clock.now()
    with transaction.atomic():
        if rotated_from is None:
            _lock_organization(organization)
            _check_key_cap(organization)
        key = ApiKey.objects.create(
            organization=organization,
            name=name.strip(),
            prefix=new.prefix,
            secret_hash=new.secret_hash,
            role=role,
            created_by=created_by,
            created_at=now,
            expires_at=now + expires_in,
            rotated_from=rotated_from,
        )
        key.namespaces.set(namespaces)
        audit.record_change(
            action="apikey.create",
            target=f"apikey/{api_keys.display(key.prefix)}",
            organization=organization,
            namespace=namespaces[0] if len(namespaces) == 1 else None,
            details={
                "name": key.name,
                "role": role,
                "namespaces": sorted(n.name for n in namespaces),
                "expires_at": key.expires_at.isoformat(),
                **({"rotated_from": api_keys.display(rotated_from.prefix)} if rotated_from else {}),
            },
        )
    return key, new.plaintext


def apikey_revoke(*, key: ApiKey) -> ApiKey:
    """Revoke a key: the next call made with it is refused (no cache stands in between)."""
    if key.revoked_at is None:
        key.revoked_at = clock.now()
        with transaction.atomic():
            if ApiKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(revoked_at=key.revoked_at):
                audit.record_change(
                    action="apikey.revoke",
                    target=f"apikey/{api_keys.display(key.prefix)}",
                    organization=key.organization,
                    details={"name": key.name},
                )
    return key


def apikey_rotate(*, key: ApiKey, grace: timedelta = timedelta(0)) -> tuple[ApiKey, str]:
    """A successor of `key` with the same name, role, namespaces and lifetime; the old key stops working
    after `grace` (at once by default).

    Raises:
        TenantError: the key is already revoked.
    """
    now = clock.now()
    if key.revoked_at is not None:
        raise TenantError(f"API key {api_keys.display(key.prefix)} is revoked")
    with transaction.atomic():
        successor, plaintext = apikey_create(
            organization=key.organization,
            name=key.name,
            role=key.role,
            namespaces=list(key.namespaces.all()),
            expires_in=min(key.expires_at - key.created_at, KEY_LIFETIME_MAX),
            created_by=key.created_by,
            rotated_from=key,
        )
        if grace > timedelta(0):
            ApiKey.objects.filter(pk=key.pk).update(expires_at=min(key.expires_at, now + grace))
        else:
            apikey_revoke(key=key)
        audit.record_change(
            action="apikey.rotate",
            target=f"apikey/{api_keys.display(key.prefix)}",
            organization=key.organization,
            details={"successor": api_keys.display(successor.prefix), "grace_seconds": grace.total_seconds()},
        )
    return successor, plaintext


def apikeys_fit_creator(
    *, organization: Organization, user: object, role_on: Callable[[Namespace], KeyRole | None], reason: str
) -> list[ApiKey]:
    """Bring every live key `user` created in `organization` within the user's roles as they now are.

    A key never exceeds its creator, at any time: called in the transaction of the change that lowered
    the creator's roles (an organisation role, a namespace role taken or lowered), so no moment exists
    where the key can do more than the person who made it. A key whose creator lost every role on one
    of its namespaces is revoked (its other namespaces would change what it names); a key whose role
    exceeds the creator's weakest role on its namespaces is downgraded to that role. Each is recorded
    in the audit log (`apikey.revoke` or `apikey.downgrade`, with the reason).

    Args:
        role_on: the creator's role on a namespace after the change (None: no role).
        reason: why, for the audit entries (`member.role`, `namespace.grant`).

    Returns:
        The keys changed.
    """
    now = clock.now()
    keys = (
        ApiKey.objects.select_for_update()
        .filter(organization=organization, created_by=user, revoked_at__isnull=True, expires_at__gt=now)
        .order_by("pk")
    )
    changed = []
    for key in keys:
        namespaces = [n for n in key.namespaces.all() if n.state != Namespace.State.DELETED]
        held = [role_on(n) for n in namespaces]
        target = f"apikey/{api_keys.display(key.prefix)}"
        if any(role is None for role in held):
            key.revoked_at = now
            key.save(update_fields=["revoked_at"])
            audit.record_change(
                action="apikey.revoke",
                target=target,
                organization=organization,
                details={"name": key.name, "reason": f"{reason}: its creator lost access to a namespace"},
            )
        elif held and not all(roles.role_covers(role, key.role) for role in held):
            weakest = min(held, key=roles.key_access)
            audit.record_change(
                action="apikey.downgrade",
                target=target,
                organization=organization,
                details={"name": key.name, "from": key.role, "to": weakest.value, "reason": reason},
            )
            key.role = weakest.value
            key.save(update_fields=["role"])
        else:
            continue
        changed.append(key)
    return changed
