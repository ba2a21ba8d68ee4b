"""API keys: created by a person (never above their own roles) or by the operator, revoked, rotated,
kept within their creator's roles whenever those are lowered, and given rate limits of their own."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import transaction
from perdura import clock

from tenants import access, api_keys, audit, quotas, roles
from tenants.access import Actor
from tenants.errors import Forbidden, TenantError
from tenants.models import ApiKey, Namespace, Organization
from tenants.roles import KeyRole
from tenants.services import caps

KEY_LIFETIME_MAX = timedelta(days=730)


def apikey_create_by_person(
    *,
    actor: Actor,
    name: str,
    role: str,
    namespaces: list[Namespace],
    expires_in: timedelta,
    rate_limits: dict[str, float | None] | None = None,
) -> tuple[ApiKey, str]:
    """A key made by a person: its role may not exceed the person's own role on any of its namespaces,
    and only an admin of every one of them may give it rate limits of its own.

    Returns the row and the plaintext key, which is shown once and never stored.

    Raises:
        Forbidden: a key is acting, the role exceeds the person's role on a namespace, or rate limits are
            given by someone who is not admin on each namespace.
        TenantError: see `apikey_create_by_operator`.
        QuotaExceeded: the organisation has as many live keys as it may.
    """
    if actor.user is None:
        raise Forbidden("API keys are created by people: sign in")
    _check_covers(actor, role, namespaces)
    if rate_limits:
        _check_limits_allowed(actor, namespaces)
    return _key_create(
        organization=actor.organization,
        name=name,
        role=role,
        namespaces=namespaces,
        expires_in=expires_in,
        created_by=actor.user,
        rate_limits=_checked_limits({}, rate_limits or {}),
    )


def apikey_create_by_operator(
    *,
    organization: Organization,
    name: str,
    role: str,
    namespaces: list[Namespace],
    expires_in: timedelta,
    rate_limits: dict[str, float | None] | None = None,
) -> tuple[ApiKey, str]:
    """A key made by the operator (`perdura apikey create`): any role on the organisation's namespaces,
    with no creator whose roles it must stay within.

    Returns the row and the plaintext key, which is shown once and never stored.

    Raises:
        TenantError: no name, unknown role, no namespace, a namespace of another organisation, an
            expiry that is not within two years, or a rate limit that is not a positive rate of a bucket.
        QuotaExceeded: the organisation has as many live keys as it may.
    """
    return _key_create(
        organization=organization,
        name=name,
        role=role,
        namespaces=namespaces,
        expires_in=expires_in,
        created_by=None,
        rate_limits=_checked_limits({}, rate_limits or {}),
    )


def apikey_set_rate_limits_by_person(
    *, actor: Actor, key: ApiKey, changes: dict[str, float | None]
) -> ApiKey:
    """Set a key's own rate limits (see `apikey_set_rate_limits_by_operator`) as a person who is admin on
    every namespace of the key: a key's rate divides its namespaces' budgets among their keys, which is
    theirs to decide, whoever made the key. (Namespace rates themselves are the operator's.)

    Raises:
        Forbidden: a key is acting, or the person is not admin on each of the key's namespaces.
        TenantError: see `apikey_set_rate_limits_by_operator`.
    """
    if actor.user is None:
        raise Forbidden("a key's rate limits are set by people: sign in")
    _check_limits_allowed(actor, list(key.namespaces.all()))
    return apikey_set_rate_limits_by_operator(key=key, changes=changes)


def apikey_set_rate_limits_by_operator(*, key: ApiKey, changes: dict[str, float | None]) -> ApiKey:
    """Set a key's own rate limits: bucket → requests per second in each of its namespaces (None: back to
    the default share of the namespace's rate, PERDURA_KEY_RATE_SHARE). Every `perdura api` process
    applies it on the key's next call; recorded in the audit log (`apikey.rate_limits`).

    Raises:
        TenantError: the key is revoked, an unknown bucket, or a rate that is not positive.
    """
    if key.revoked_at is not None:
        raise TenantError(f"API key {api_keys.display(key.prefix)} is revoked")
    with transaction.atomic():
        current = ApiKey.objects.select_for_update().values_list("rate_limits", flat=True).get(pk=key.pk)
        limits = _checked_limits(dict(current or {}), changes)
        ApiKey.objects.filter(pk=key.pk).update(rate_limits=limits)
        audit.record_change(
            action="apikey.rate_limits",
            target=f"apikey/{api_keys.display(key.prefix)}",
            organization=key.organization,
            details={"name": key.name, "rate_limits": limits},
        )
    key.rate_limits = limits
    return key


def _checked_limits(current: dict[str, float], changes: dict[str, float | None]) -> dict[str, float]:
    try:
        checked = quotas.validate_overrides(changes)
    except quotas.QuotaError as e:
        raise TenantError(str(e)) from None
    limits = dict(current)
    for bucket, value in checked.items():
        if value is None:
            limits.pop(bucket.value, None)
        else:
            limits[bucket.value] = value
    return limits


def _check_limits_allowed(actor: Actor, namespaces: list[Namespace]) -> None:
    for namespace in namespaces:
        held = actor.namespace_role(namespace)
        if held is not KeyRole.ADMIN:
            raise Forbidden(
                f"a key's rate limits are set by admins of each of its namespaces: you are "
                f"{held or 'nothing'} on {namespace.name}"
            )


def apikey_may_set_rate_limits(*, actor: Actor, key: ApiKey) -> bool:
    """True when `actor` may set `key`'s rate limits (the rule `apikey_set_rate_limits_by_person`
    enforces), for pages that offer only what it allows."""
    try:
        _check_limits_allowed(actor, list(key.namespaces.all()))
    except TenantError:
        return False
    return actor.user is not None and key.revoked_at is None


def apikey_rotate_by_person(*, actor: Actor, key: ApiKey, grace: timedelta) -> tuple[ApiKey, str]:
    """Rotate a key the actor sees (see `apikey_rotate_by_operator`); the actor's role must still cover
    the key's.

    Raises:
        Forbidden: the actor's role no longer covers the key.
        TenantError: the key is revoked.
    """
    _check_covers(actor, key.role, list(key.namespaces.all()))
    return _rotate(key, grace)


def apikey_rotate_by_operator(*, key: ApiKey, grace: timedelta = timedelta(0)) -> tuple[ApiKey, str]:
    """A successor of `key` with the same name, role, namespaces, rate limits, creator and lifetime; the
    old key stops working after `grace` (at once by default). A rotation is not counted against the key cap: it
    retires the key it replaces.

    Raises:
        TenantError: the key is already revoked.
    """
    return _rotate(key, grace)


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


def apikeys_fit_creator(*, organization: Organization, user: Any, reason: str) -> list[ApiKey]:
    """Bring every live key `user` created in `organization` within the user's roles as they now are.

    A key never exceeds its creator, at any time: called in the transaction of the change that lowered
    the creator's roles (an organisation role, a namespace role taken or lowered), so no moment exists
    where the key can do more than the person who made it. A key whose creator lost every role on one
    of its namespaces is revoked (its other namespaces would change what it names); a key whose role
    exceeds the creator's weakest role on its namespaces is downgraded to that role. Each is recorded
    in the audit log (`apikey.revoke` or `apikey.downgrade`, with the reason).

    Args:
        reason: why, for the audit entries (`member.role`, `namespace.grant`).

    Returns:
        The keys changed.
    """
    actor = access.actor_for_user(user, organization.slug)
    now = clock.now()
    keys = (
        ApiKey.objects.select_for_update()
        .filter(organization=organization, created_by=user, revoked_at__isnull=True, expires_at__gt=now)
        .order_by("pk")
    )
    changed = []
    for key in keys:
        namespaces = [n for n in key.namespaces.all() if n.state != Namespace.State.DELETED]
        held = [None if actor is None else actor.namespace_role(n) for n in namespaces]
        granted = [role for role in held if role is not None]
        target = f"apikey/{api_keys.display(key.prefix)}"
        if len(granted) < len(held):
            key.revoked_at = now
            key.save(update_fields=["revoked_at"])
            audit.record_change(
                action="apikey.revoke",
                target=target,
                organization=organization,
                details={"name": key.name, "reason": f"{reason}: its creator lost access to a namespace"},
            )
        elif granted and not all(roles.role_covers(role, key.role) for role in granted):
            weakest = min(granted, key=roles.key_access)
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


def _key_create(
    *,
    organization: Organization,
    name: str,
    role: str,
    namespaces: list[Namespace],
    expires_in: timedelta,
    created_by: Any | None,
    rotated_from: ApiKey | None = None,
    rate_limits: dict[str, float] | None = None,
) -> tuple[ApiKey, str]:
    """Create an API key for whoever the caller checked; the row and the plaintext key, which is shown
    once and never stored.

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
            caps.organization_lock_txn(organization)
            caps.apikey_cap_check_txn(organization)
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
            rate_limits=rate_limits or {},
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
                **({"rate_limits": key.rate_limits} if key.rate_limits else {}),
                **({"rotated_from": api_keys.display(rotated_from.prefix)} if rotated_from else {}),
            },
        )
    return key, new.plaintext


def _rotate(key: ApiKey, grace: timedelta) -> tuple[ApiKey, str]:
    """A successor of `key` with the same name, role, namespaces and lifetime; the old key stops working
    after `grace` (at once when it is zero).

    Raises:
        TenantError: the key is already revoked.
    """
    now = clock.now()
    if key.revoked_at is not None:
        raise TenantError(f"API key {api_keys.display(key.prefix)} is revoked")
    with transaction.atomic():
        successor, plaintext = _key_create(
            organization=key.organization,
            name=key.name,
            role=key.role,
            namespaces=list(key.namespaces.all()),
            expires_in=min(key.expires_at - key.created_at, KEY_LIFETIME_MAX),
            created_by=key.created_by,
            rotated_from=key,
            rate_limits=dict(key.rate_limits or {}),
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


def _check_covers(actor: Actor, role: str, namespaces: list[Namespace]) -> None:
    try:
        roles.KeyRole(role)
    except ValueError:
        raise TenantError(f"unknown role {role!r}: use reader, operator or admin") from None
    for namespace in namespaces:
        held = actor.namespace_role(namespace)
        if not roles.role_covers(held, role):
            raise Forbidden(
                f"a key cannot exceed its creator's role: you are {held or 'nothing'} on {namespace.name}, "
                f"not {role}"
            )


def apikey_within_creator(*, actor: Actor, role: str, namespaces: list[Namespace]) -> bool:
    """True when `actor` may make (or rotate) a key of `role` on `namespaces`: the rule
    `apikey_create_by_person` and `apikey_rotate_by_person` enforce, for pages that offer only what it
    allows."""
    try:
        _check_covers(actor, role, namespaces)
    except TenantError:
        return False
    return actor.user is not None
