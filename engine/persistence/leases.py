"""Shard leases with a fencing number (DESIGN.md rule 4).

A Celery pass holds a lease while it processes a shard; a shard loop (engine/shards/loop.py) holds its
shards' leases from one pass to the next and renews them. Taking a lease bumps `range_id`.
Every write the processor makes re-reads `range_id` inside its own transaction (FOR SHARE on
Postgres, so a concurrent steal waits for it) and gives up if it changed: two workers that both
believe they own a shard can never both commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from perdura import clock, metrics

LEASE_SECONDS = 30.0
"""The default of PERDURA_SHARD_LEASE_SECONDS."""


class LeaseLost(Exception):
    """Another worker took the shard: stop processing it."""


def acquire(shard: int, owner: str, ttl: float | None = None) -> int | None:
    """Take the shard's lease (bumping range_id) unless another owner holds a live one; returns range_id.

    Written out in SQL: it starts every pass, and the ORM's version cost a busy worker more than the
    statements themselves."""
    ttl = getattr(settings, "PERDURA_SHARD_LEASE_SECONDS", LEASE_SECONDS) if ttl is None else ttl
    now = clock.now()
    at = connection.ops.adapt_datetimefield_value(now)
    until = connection.ops.adapt_datetimefield_value(now + timedelta(seconds=ttl))
    lock = " FOR UPDATE" if connection.vendor == "postgresql" else ""
    read = (
        "SELECT owner, expires_at IS NOT NULL AND expires_at > %s, range_id FROM engine_shardlease "
        f"WHERE shard = %s{lock}"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(read, [at, shard])
        row = cursor.fetchone()
        if row is None:  # the shard's first pass ever
            cursor.execute(
                "INSERT INTO engine_shardlease (shard, owner, range_id) VALUES (%s, '', 0) ON CONFLICT DO NOTHING",
                [shard],
            )
            cursor.execute(read, [at, shard])
            row = cursor.fetchone()
        held_by, live, range_id = row
        if held_by and held_by != owner and live:
            return None
        range_id += 1
        cursor.execute(
            "UPDATE engine_shardlease SET owner = %s, range_id = %s, expires_at = %s, passed_at = %s "
            "WHERE shard = %s",
            [owner, range_id, until, at, shard],
        )
    label = str(shard)
    metrics.shard_lease_acquisitions.labels(label).inc()
    # An owner still named on the row let its lease expire without releasing it: died or stalled.
    if held_by and held_by != owner:
        metrics.shard_lease_takeovers.labels(label).inc()
    return range_id


CLOCK_MARGIN = timedelta(milliseconds=50)
"""How far apart the clocks of the process that sent a wake-up and the one that ran a pass may be."""


def passed_since(shard: int, since: datetime) -> bool:
    """Whether a pass over `shard` began after `since` (by more than the clock margin). Such a pass read the
    shard's queues after everything committed by `since`, and looks again before it lets the lease go,
    or it queues the shard again when its time runs out: a wake-up sent at `since` has nothing left to do."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM engine_shardlease WHERE shard = %s AND passed_at > %s",
            [shard, connection.ops.adapt_datetimefield_value(since + CLOCK_MARGIN)],
        )
        return cursor.fetchone() is not None


def release(shard: int, range_id: int) -> None:
    """Let the lease go early (only if still ours), so the next wake-up anywhere can take it at once."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE engine_shardlease SET owner = '', expires_at = %s WHERE shard = %s AND range_id = %s",
            [connection.ops.adapt_datetimefield_value(clock.now()), shard, range_id],
        )


def renew(owner: str, held: dict[int, int], ttl: float | None = None) -> dict[int, int]:
    """Extend the leases `owner` holds (shard -> range_id); returns those still its own, in one statement.
    A lease taken over meanwhile (another range_id) is left as it is and missing from the answer."""
    if not held:
        return {}
    ttl = getattr(settings, "PERDURA_SHARD_LEASE_SECONDS", LEASE_SECONDS) if ttl is None else ttl
    until = connection.ops.adapt_datetimefield_value(clock.now() + timedelta(seconds=ttl))
    shards = sorted(held)
    marks = ", ".join(["%s"] * len(shards))
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE engine_shardlease SET expires_at = %s WHERE owner = %s AND shard IN ({marks}) "
            "RETURNING shard, range_id",
            [until, owner, *shards],
        )
        rows = cursor.fetchall()
    return {shard: range_id for shard, range_id in rows if held.get(shard) == range_id}


def free(shards: range, owner: str) -> list[int]:
    """The shards of `shards` whose lease nobody else holds live: released, lapsed, never taken, or
    `owner`'s own (taken again by a loop started again under its name)."""
    at = connection.ops.adapt_datetimefield_value(clock.now())
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT shard FROM engine_shardlease WHERE owner <> '' AND owner <> %s AND expires_at > %s",
            [owner, at],
        )
        taken = {shard for (shard,) in cursor.fetchall()}
    return [shard for shard in shards if shard not in taken]


def live_shards() -> set[int]:
    """The shards whose lease someone holds now."""
    at = connection.ops.adapt_datetimefield_value(clock.now())
    with connection.cursor() as cursor:
        cursor.execute("SELECT shard FROM engine_shardlease WHERE owner <> '' AND expires_at > %s", [at])
        return {shard for (shard,) in cursor.fetchall()}


def check(shard: int, range_id: int) -> None:
    """Inside a transaction: fail unless `range_id` is still the shard's. Holds a share lock until commit."""
    with connection.cursor() as cursor:
        cursor.execute(*check_statement(shard))
        verify(shard, range_id, cursor.fetchone())


def check_statement(shard: int) -> tuple[str, list[Any]]:
    """`check`'s statement, for a caller that sends it with others (then `verify` its row)."""
    suffix = " FOR SHARE" if connection.vendor == "postgresql" else ""
    return f"SELECT range_id FROM engine_shardlease WHERE shard = %s{suffix}", [shard]


def verify(shard: int, range_id: int, row: Sequence[Any] | None) -> None:
    """Fail unless `row`, the answer to `check_statement`, says `range_id` is still the shard's."""
    if row is None or row[0] != range_id:
        raise LeaseLost(f"shard {shard} lease moved on (ours {range_id}, now {row[0] if row else None})")
