"""The audit log: who changed the control plane or acted on runs, when, from where, and how it ended.

Entries (tenants.models.AuditEvent) are append-only: code here only inserts and reads them, the model
refuses updates and deletes, and on Postgres a trigger refuses them too (migration 0005).

Who is acting comes from the transport, which binds an `AuditContext` for the duration of a request
(`acting`): the REST views (a person or an API key, with the client address), the gRPC interceptor (a
key or the loopback operator, with the peer address) and the operator CLI. Control-plane services call
`record_change` inside their own transaction, so a change and its entry commit or roll back together;
the gRPC interceptor records run operations after the call with its status code (engine/api/audit.py),
but for the hot ones, whose entry commits with their change when they succeed (`PendingEntry`).

Entries never hold payloads (workflow inputs, signal arguments, results, memos) or secrets (API keys,
their hashes, passwords, tokens, data keys): keys are named by `pdk_<prefix>` and their name, people by
id and email, and details carry only the names and settings a change set.

Retention (`prune`) is the one deletion path: it removes entries older than PERDURA_AUDIT_RETENTION_DAYS,
telling the Postgres trigger its cutoff through a transaction-local setting; the trigger still refuses
every UPDATE, every other DELETE, and any cutoff younger than 30 days (migration 0006).
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import QuerySet
from perdura import clock, env

from tenants import api_keys
from tenants.models import AuditEvent, Namespace, Organization

USER, KEY, OPERATOR, SYSTEM = "user", "key", "operator", "system"
OK, DENIED, FAILED = "ok", "denied", "failed"


@dataclass(frozen=True, slots=True)
class AuditActor:
    """Who acted, as the log names them (never a secret)."""

    kind: str
    """`user` (a person), `key` (an API key), `operator` (the CLI or the loopback allowance) or `system`."""
    id: str = ""
    """The user's id, the key's `pdk_<prefix>`, or how the operator came in (`cli`, `loopback`)."""
    label: str = ""
    """The user's email, the key's name, the operator's OS account."""


@dataclass(frozen=True, slots=True)
class AuditContext:
    """The actor of the request being served, where it came from and through which interface."""

    actor: AuditActor
    source: str = ""
    """The client address (gRPC peer or REST REMOTE_ADDR), or the host for the CLI."""
    via: str = "internal"
    """`grpc`, `rest`, `cli`, `console` (the web console's actions on runs) or `internal`."""


SYSTEM_CONTEXT = AuditContext(actor=AuditActor(kind=SYSTEM, id="perdura"), via="internal")
_context: contextvars.ContextVar[AuditContext | None] = contextvars.ContextVar("perdura_audit", default=None)


def user_actor(user: Any) -> AuditActor:
    """A person: their user id and email."""
    return AuditActor(
        kind=USER, id=str(getattr(user, "pk", "") or ""), label=getattr(user, "email", "") or ""
    )


def key_actor(prefix: str, name: str) -> AuditActor:
    """An API key: its public prefix and its name (the secret is never at hand here)."""
    return AuditActor(kind=KEY, id=api_keys.display(prefix), label=name)


def operator_actor(how: str, label: str = "") -> AuditActor:
    """The installation's operator: through the CLI, or a call of the loopback allowance."""
    return AuditActor(kind=OPERATOR, id=how, label=label)


@contextlib.contextmanager
def acting(context: AuditContext) -> Iterator[AuditContext]:
    """Bind `context` as the actor of everything recorded inside the block."""
    token = _context.set(context)
    try:
        yield context
    finally:
        _context.reset(token)


def bind(context: AuditContext) -> contextvars.Token:
    """Bind `context` until `unbind(token)` (for transports whose request has no single block)."""
    return _context.set(context)


def unbind(token: contextvars.Token) -> None:
    _context.reset(token)


def acting_as_user(user: Any) -> contextlib.AbstractContextManager[AuditContext]:
    """Bind `user` as the actor, keeping the bound source and interface: for the requests in which a
    person comes into being or into the organisation (sign-up, accepting an invitation), whose change
    is theirs although they were anonymous when the request began."""
    return acting(replace(current(), actor=user_actor(user)))


def current() -> AuditContext:
    """The bound context, or the system's (internal calls such as `perdura migrate`)."""
    return _context.get() or SYSTEM_CONTEXT


@dataclass(slots=True)
class PendingEntry:
    """The entry of a call in progress, to be written by the first transaction of the call that commits
    (`write_path.in_transaction`), so a run's change and its entry commit together, in one commit where
    they took two. If no transaction of the call commits, the transport writes it after the call. A caller
    who goes away while its change commits can leave two entries: the change's `ok`, and the call's
    `CANCELLED` (before, only the latter, though the change was made)."""

    write: Callable[[], object]
    """Insert the entry, in the current transaction."""
    written: bool = False
    """A transaction that wrote it has committed."""


_pending: contextvars.ContextVar[PendingEntry | None] = contextvars.ContextVar(
    "perdura_audit_pending", default=None
)


def expect(entry: PendingEntry) -> contextvars.Token:
    """Make `entry` the current call's, until `unexpect(token)`."""
    return _pending.set(entry)


def unexpect(token: contextvars.Token) -> None:
    _pending.reset(token)


def pending() -> PendingEntry | None:
    """The current call's entry while no transaction has committed it."""
    entry = _pending.get()
    return entry if entry is not None and not entry.written else None


def record(
    *,
    action: str,
    target: str = "",
    organization_id: uuid.UUID | str | None = None,
    namespace: Namespace | None = None,
    namespace_name: str = "",
    outcome: str = OK,
    code: str = "OK",
    details: dict[str, Any] | None = None,
    context: AuditContext | None = None,
) -> AuditEvent:
    """Append one entry (in the caller's transaction, if one is open).

    Args:
        action: what was done (`namespace.register`, `StartWorkflowExecution`, ...).
        target: what it was done to (`workflow/<id>`, `apikey/pdk_<prefix>`, ...).
        organization_id: the organisation whose log holds the entry (default: the namespace's).
        namespace: the namespace concerned, if any.
        namespace_name: its name when no row is at hand (a refused call naming another tenant's).
        outcome: `ok`, `denied` or `failed`; `code` is the gRPC status name or HTTP status.
        details: non-secret facts of the change (names, roles, settings), JSON-serialisable.
        context: who acted; default the bound context.
    """
    context = context or current()
    if organization_id is None and namespace is not None:
        organization_id = namespace.organization_id
    return AuditEvent.objects.create(
        time=clock.now(),
        organization_id=organization_id,
        namespace_id=namespace.id if namespace is not None else None,
        # Cut to the columns: a refused call may name anything up to the edge's limits, and an entry that
        # does not fit would be lost (Postgres refuses it) where the log must keep it.
        namespace=(namespace.name if namespace is not None else namespace_name)[:255],
        actor_kind=context.actor.kind,
        actor_id=context.actor.id[:64],
        actor_label=context.actor.label[:255],
        action=action[:64],
        target=target[:512],
        source=context.source[:128],
        via=context.via,
        outcome=outcome,
        code=code[:32],
        details=details or {},
    )


def record_change(
    *,
    action: str,
    target: str,
    namespace: Namespace | None = None,
    organization: Organization | None = None,
    details: dict[str, Any] | None = None,
) -> AuditEvent:
    """A successful control-plane change, recorded by the service inside the change's own transaction."""
    return record(
        action=action,
        target=target,
        organization_id=organization.id if organization is not None else None,
        namespace=namespace,
        details=details,
    )


# --- reading --------------------------------------------------------------------------------------


def events(
    *,
    organization_id: uuid.UUID | str | None,
    namespace_id: object | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> QuerySet[AuditEvent]:
    """An organisation's entries (None: the operator's namespaces'), optionally of one namespace and
    in [since, until), in the order they were written."""
    query = AuditEvent.objects.filter(organization_id=organization_id)
    if namespace_id is not None:
        query = query.filter(namespace_id=namespace_id)
    if since is not None:
        query = query.filter(time__gte=since)
    if until is not None:
        query = query.filter(time__lt=until)
    return query.order_by("id")


def events_page(
    query: QuerySet[AuditEvent], *, before: int | None, limit: int
) -> tuple[list[AuditEvent], int | None]:
    """A page of `query`'s entries, newest first, with ids below `before` (None: from the newest); and
    the cursor of the next page (the last entry's id), None after the last page."""
    query = query.order_by("-id")
    if before is not None:
        query = query.filter(id__lt=before)
    page = list(query[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    return page, page[-1].id if more else None


def events_stream(query: QuerySet[AuditEvent], *, chunk_size: int = 500) -> Iterator[AuditEvent]:
    """`query`'s entries in its order, read `chunk_size` at a time (an export of any length in bounded memory)."""
    return query.iterator(chunk_size=chunk_size)


def as_dict(event: AuditEvent) -> dict[str, Any]:
    """An entry as the REST API and the JSON Lines export show it."""
    return {
        "id": event.id,
        "time": event.time.isoformat().replace("+00:00", "Z"),
        "organization_id": str(event.organization_id) if event.organization_id else None,
        "namespace": event.namespace or None,
        "namespace_id": str(event.namespace_id) if event.namespace_id else None,
        "actor": {"kind": event.actor_kind, "id": event.actor_id, "label": event.actor_label},
        "action": event.action,
        "target": event.target,
        "source": event.source,
        "via": event.via,
        "outcome": event.outcome,
        "code": event.code,
        "details": event.details,
    }


_RELATIVE = re.compile(r"^\d+[smhdw]$")


def parse_time(text: str) -> datetime:
    """An RFC 3339 time (`2026-01-31T12:00:00Z`, a date, or a naive time taken as UTC), or a duration
    back from now (`90m`, `24h`, `7d`).

    Raises:
        ValueError: neither.
    """
    text = text.strip()
    if _RELATIVE.match(text):
        return clock.now() - api_keys.parse_duration(text)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time: use RFC 3339 (2026-01-31T12:00:00Z), a date, or a duration back "
            "from now (24h, 7d)"
        ) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


# --- retention ------------------------------------------------------------------------------------

PRUNE_BATCH = 5000
"""Entries deleted per transaction: a long-unpruned log goes in short transactions, not one huge one."""
_PRUNE_SETTING = "perdura.audit_prune"
"""The transaction-local Postgres setting that lets the append-only trigger accept this path's deletes."""


@dataclass(frozen=True, slots=True)
class PruneResult:
    """What `prune` did."""

    deleted: int
    """Entries deleted."""
    cutoff: datetime | None
    """Entries older than this were deleted; None when the retention keeps everything."""


def prune(*, retention_days: int | None = None, batch: int = PRUNE_BATCH) -> PruneResult:
    """Delete the entries older than the retention: the only way an entry ever leaves the log.

    On Postgres each batch's transaction sets `perdura.audit_prune` to the cutoff (SET LOCAL), which
    is what the append-only trigger checks: it lets a DELETE through only for a row older than that
    cutoff, and only if the cutoff is at least 30 days old, so no path can remove recent history, and
    UPDATE stays refused. A prune that deleted something is itself recorded (`audit.prune`, in the
    operator's log, with the cutoff and the count). Idempotent: running it again deletes nothing more.

    Args:
        retention_days: days to keep (default PERDURA_AUDIT_RETENTION_DAYS); 0 keeps everything.
        batch: entries deleted per transaction.

    Raises:
        ValueError: a retention shorter than 30 days (other than 0).
    """
    days = settings.PERDURA_AUDIT_RETENTION_DAYS if retention_days is None else retention_days
    if days == 0:
        return PruneResult(deleted=0, cutoff=None)
    if days < env.AUDIT_RETENTION_MIN_DAYS:
        raise ValueError(
            f"the audit retention is at least {env.AUDIT_RETENTION_MIN_DAYS} days (0: forever), not {days}"
        )
    cutoff = clock.now() - timedelta(days=days)
    table = connection.ops.quote_name(AuditEvent._meta.db_table)
    postgres = connection.vendor == "postgresql"
    deleted = 0
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            if postgres:
                cursor.execute("SELECT set_config(%s, %s, true)", [_PRUNE_SETTING, cutoff.isoformat()])
            cursor.execute(
                f"DELETE FROM {table} WHERE id IN "
                f"(SELECT id FROM {table} WHERE time < %s ORDER BY id LIMIT %s)",
                [cutoff, batch],
            )
            count = cursor.rowcount
            if postgres:
                # Inside a caller's transaction SET LOCAL would outlive this block: clear it now.
                cursor.execute("SELECT set_config(%s, '', true)", [_PRUNE_SETTING])
        deleted += count
        if count < batch:
            break
    if deleted:
        record(
            action="audit.prune",
            target="audit",
            details={"cutoff": cutoff.isoformat(), "retention_days": days, "deleted": deleted},
        )
    return PruneResult(deleted=deleted, cutoff=cutoff)
