"""Namespaces: register (with the first data key), update, rate limits, deprecate, delete, and people's
roles on them (django-guardian object permissions, tenants/roles.py)."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import IntegrityError, transaction
from guardian.shortcuts import assign_perm
from perdura import clock

from tenants import archival, audit, quotas, roles, selectors
from tenants.datakeys import datakey_create
from tenants.errors import NamespaceAlreadyExists, NamespaceError
from tenants.models import Namespace, NamespaceUserPermission, Organization
from tenants.services import caps, keys

# A namespace without organisation (the operator's own, e.g. `default`) has no dot, so it can never
# take a name inside an organisation's `<name>.<slug>` space.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,199}$")
RETENTION_DAYS = range(1, 91)
MAX_RETENTION = timedelta(days=90)


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
    archival_request: ArchivalRequest | None = None,
) -> Namespace:
    """Create a namespace and its first data key in one transaction.

    A namespace of an organisation is named `<name>.<organisation slug>`; one without organisation
    (the operator's own) has no dot. Either way names are globally unique.

    Args:
        creator_key_id: the API key registering it, which may then use it (as RegisterNamespace
            does): otherwise it could not even describe it.
        archival_request: its archival settings (both disabled when None).

    Raises:
        NamespaceError: the name, retention or archival settings are invalid.
        NamespaceAlreadyExists: the name is taken.
        QuotaExceeded: the organisation has as many namespaces as it may.
    """
    _check_name(name, organization)
    _check_retention(retention_days)
    blank = archival.Setting(state=archival.State.DISABLED, uri="")
    history, visibility = (
        archival_request.applied(blank, blank) if archival_request is not None else (blank, blank)
    )
    try:
        with transaction.atomic():
            if organization is not None:
                caps.organization_lock_txn(organization)
                caps.namespace_cap_check_txn(organization)
            namespace = Namespace.objects.create(
                name=name,
                organization=organization,
                description=description,
                retention=timedelta(days=retention_days),
                owner_email=owner_email,
                created_at=clock.now(),
                **_archival_fields(history, visibility),
            )
            datakey_create(namespace=namespace)
            if creator_key_id is not None:
                namespace.api_keys.add(creator_key_id)  # type: ignore[arg-type]  # a UUID key: django-stubs takes int ones
            audit.record_change(
                action="namespace.register",
                target=f"namespace/{name}",
                namespace=namespace,
                details={
                    "retention_days": retention_days,
                    **(
                        _archival_fields(history, visibility)
                        if archival_request is not None and not archival_request.empty
                        else {}
                    ),
                },
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
    codec_server_url: str | None = None,
) -> Namespace:
    """Change a namespace's description, owner email, retention (1-90 days) or codec server URL; None
    leaves a field.

    A new retention applies to runs that close afterwards (as in Temporal).

    Raises:
        NamespaceError: the retention is out of range, or the codec server URL is not https (or http on
            a loopback host).
    """
    fields: dict[str, Any] = {}
    if codec_server_url is not None:
        fields["codec_server_url"] = check_codec_server_url(codec_server_url)
    if description is not None:
        fields["description"] = description
    if owner_email is not None:
        fields["owner_email"] = owner_email
    audited = dict(fields)
    if retention_days is not None:
        _check_retention(retention_days)
        fields["retention"] = timedelta(days=retention_days)
        audited["retention_days"] = retention_days
    if fields:
        with transaction.atomic():
            Namespace.objects.filter(pk=namespace.pk).update(**fields)
            audit.record_change(
                action="namespace.update",
                target=f"namespace/{namespace.name}",
                namespace=namespace,
                details=audited,
            )
        for field, value in fields.items():
            setattr(namespace, field, value)
        selectors.namespace_forget(namespace.name)
    return namespace


@dataclass(frozen=True, slots=True)
class ArchivalRequest:
    """What a register or update asks of a namespace's archival; 0 and "" leave a state or URI as it is."""

    history_state: int = 0
    history_uri: str = ""
    visibility_state: int = 0
    visibility_uri: str = ""

    @property
    def empty(self) -> bool:
        return not (self.history_state or self.history_uri or self.visibility_state or self.visibility_uri)

    def applied(
        self, history: archival.Setting, visibility: archival.Setting
    ) -> tuple[archival.Setting, archival.Setting]:
        """The settings after this request (tenants.archival.apply), on the operator's bucket list.

        Raises:
            NamespaceError: a setting is invalid, or a bucket is not on PERDURA_ARCHIVAL_BUCKETS.
        """
        history = archival.apply(history, state=self.history_state, uri=self.history_uri, what="history")
        visibility = archival.apply(
            visibility, state=self.visibility_state, uri=self.visibility_uri, what="visibility"
        )
        for what, setting, given in (
            ("history", history, self.history_uri),
            ("visibility", visibility, self.visibility_uri),
        ):
            if given:
                archival.check_bucket_allowed(
                    archival.parse_uri(setting.uri), settings.PERDURA_ARCHIVAL_BUCKETS, what=what
                )
        return history, visibility


def archival_settings(namespace: Namespace) -> tuple[archival.Setting, archival.Setting]:
    """The namespace's history and visibility archival settings."""
    return (
        archival.Setting(state=namespace.history_archival_state, uri=namespace.history_archival_uri),
        archival.Setting(state=namespace.visibility_archival_state, uri=namespace.visibility_archival_uri),
    )


def _archival_fields(history: archival.Setting, visibility: archival.Setting) -> dict[str, Any]:
    return {
        "history_archival_state": int(history.state),
        "history_archival_uri": history.uri,
        "visibility_archival_state": int(visibility.state),
        "visibility_archival_uri": visibility.uri,
    }


def namespace_set_archival(*, namespace: Namespace, request: ArchivalRequest) -> Namespace:
    """Change a namespace's archival settings (UpdateNamespace, `perdura namespace update`).

    A new URI applies to runs archived from then on; each archived run keeps the location it went to,
    so earlier archives stay readable. Disabling history archival lets retention delete runs unarchived.

    Raises:
        NamespaceError: a setting is invalid, or a bucket is not on PERDURA_ARCHIVAL_BUCKETS.
    """
    if request.empty:
        return namespace
    with transaction.atomic():
        locked = Namespace.objects.select_for_update().get(pk=namespace.pk)
        history, visibility = request.applied(*archival_settings(locked))
        fields = _archival_fields(history, visibility)
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


def retention_floor() -> timedelta:
    """The shortest retention the operator may set (PERDURA_RETENTION_MIN_SECONDS)."""
    return timedelta(seconds=settings.PERDURA_RETENTION_MIN_SECONDS)


def namespace_set_retention(*, namespace: Namespace, retention: timedelta) -> Namespace:
    """Set a namespace's retention to any duration from the operator's floor to 90 days.

    The operator's call (`perdura namespace update NAME --retention 30s`); tenants choose whole days
    through `namespace_update`. Applies to runs that close afterwards: a closed run's retention timer
    keeps the due time it got when the run closed (as in Temporal).

    Raises:
        NamespaceError: the retention is below PERDURA_RETENTION_MIN_SECONDS or above 90 days.
    """
    floor = retention_floor()
    if not floor <= retention <= MAX_RETENTION:
        raise NamespaceError(
            f"retention must be between {floor.total_seconds():g}s (PERDURA_RETENTION_MIN_SECONDS) "
            f"and 90 days, not {retention.total_seconds():g}s"
        )
    with transaction.atomic():
        Namespace.objects.filter(pk=namespace.pk).update(retention=retention)
        audit.record_change(
            action="namespace.update",
            target=f"namespace/{namespace.name}",
            namespace=namespace,
            details={"retention_seconds": retention.total_seconds()},
        )
    namespace.retention = retention
    selectors.namespace_forget(namespace.name)
    return namespace


def check_codec_server_url(url: str) -> str:
    """The codec server URL as stored ("" for none), or NamespaceError.

    Browsers post payloads to it, so it must be https (plain http only on loopback, for a codec server
    on the developer's machine) with no credentials, query or fragment.
    """
    url = url.strip()
    if not url:
        return ""
    parts = urlsplit(url)
    loopback = parts.hostname in ("localhost", "127.0.0.1", "::1")
    if (
        len(url) > 2048
        or parts.scheme not in ("https", "http")
        or (parts.scheme == "http" and not loopback)
        or not parts.hostname
        or parts.username
        or parts.password
        or parts.query
        or parts.fragment
    ):
        raise NamespaceError(
            "the codec server URL must be https://host[/path] (http only on localhost), without "
            "credentials, query or fragment"
        )
    return url.rstrip("/")


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


def namespace_set_retry_jitter(*, namespace: Namespace, fraction: float) -> Namespace:
    """Set the namespace's default retry jitter (0 off, up to 1 full jitter; engine/history/retry_jitter.py).

    Retries decided from then on use it (every process within a few seconds); a `perdura-retry-jitter`
    header on an activity or run overrides it.

    Raises:
        NamespaceError: a fraction outside [0, 1].
    """
    if not 0 <= fraction <= 1:  # also refuses NaN
        raise NamespaceError(
            f"retry jitter must be a fraction from 0 (off) to 1 (full jitter), not {fraction:g}"
        )
    with transaction.atomic():
        Namespace.objects.filter(pk=namespace.pk).update(retry_jitter=fraction)
        audit.record_change(
            action="namespace.retry_jitter",
            target=f"namespace/{namespace.name}",
            namespace=namespace,
            details={"retry_jitter": fraction},
        )
    namespace.retry_jitter = fraction
    selectors.namespace_forget(namespace.name)
    return namespace


def namespace_set_on_retries_exhausted(*, namespace: Namespace, choice: str) -> Namespace:
    """Set what activities whose retries are exhausted do by default: "fail" (Temporal's) or "park"
    (engine/history/parking.py). Retries decided from then on use it (every process within a few
    seconds); a `perdura-on-retries-exhausted` header on an activity overrides it.

    Raises:
        NamespaceError: a choice other than "fail" or "park".
    """
    if choice not in ("fail", "park"):
        raise NamespaceError(f'on retries exhausted must be "fail" or "park", not {choice!r}')
    with transaction.atomic():
        Namespace.objects.filter(pk=namespace.pk).update(on_retries_exhausted=choice)
        audit.record_change(
            action="namespace.on_retries_exhausted",
            target=f"namespace/{namespace.name}",
            namespace=namespace,
            details={"on_retries_exhausted": choice},
        )
    namespace.on_retries_exhausted = choice
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
    API keys lose it at once. Its runs are deleted in the background: the engine's purge pass
    terminates the open ones and makes every retention row of the namespace due now, and the shard
    passes delete them as they delete any expired run (engine/shards/namespace_purge.py).
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
