"""When each shard next has work: the earliest due time over all its queues, in one statement.

A shard loop asks this before every pass and to know how long it may sleep. As one ORM query per queue (to
find the due shards) and one more per queue (for the next due time), the asking was half of `perdura dev`'s
timer-firing time: a timer came due, and the loop spent its first 10 ms finding out which shard it was in.
Each subquery is one probe of its queue's partial due index (engine/models.py) for one shard.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from django.db import connection

from engine.shards import retention_pace

_LIVE = "shard = s.column1 AND parked_at IS NULL"
_COLUMNS = (
    f"(SELECT MIN(fire_at) FROM engine_timer WHERE {_LIVE})",
    # A fresh transfer is due at once; one backing off at its retry time.
    f"(SELECT 1 FROM engine_transfer WHERE {_LIVE} AND retry_at IS NULL LIMIT 1)",
    f"(SELECT MIN(retry_at) FROM engine_transfer WHERE {_LIVE} AND retry_at IS NOT NULL)",
    f"(SELECT MIN(next_wakeup_at) FROM engine_schedule WHERE {_LIVE})",
    f"(SELECT MIN(next_wakeup_at) FROM engine_batchoperation WHERE {_LIVE})",
    f"(SELECT MIN(next_wakeup_at) FROM engine_reencryption WHERE {_LIVE} AND next_wakeup_at IS NOT NULL)",
    f"(SELECT MIN(due_at) FROM engine_retention WHERE {_LIVE})",
)


def _time(value: object) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    # SQLite hands raw columns back as text, in UTC.
    return datetime.fromisoformat(str(value)).replace(tzinfo=UTC)


def earliest(shards: Iterable[int], now: datetime) -> dict[int, datetime]:
    """Each of `shards` that has live work: when its earliest row is due (`now`, for a fresh transfer).
    Retention's rows count from when its pace has a token for them (engine/shards/retention_pace.py)."""
    wanted = sorted(set(shards))
    if not wanted:
        return {}
    values = ", ".join(f"({int(s)})" for s in wanted)
    sql = f"SELECT s.column1, {', '.join(_COLUMNS)} FROM (VALUES {values}) AS s"
    with connection.cursor() as cursor:
        cursor.execute(sql)
        rows = cursor.fetchall()
    paced_from = now + timedelta(seconds=retention_pace.seconds_to_token())
    found: dict[int, datetime] = {}
    for shard, timer, fresh, retry, schedule, batch, reencryption, retention in rows:
        times = [t for t in map(_time, (timer, retry, schedule, batch, reencryption)) if t is not None]
        if fresh is not None:
            times.append(now)
        if (first := _time(retention)) is not None:
            times.append(max(first, paced_from))
        if times:
            found[int(shard)] = min(times)
    return found


def plan(shards: Iterable[int], now: datetime) -> tuple[list[int], list[tuple[datetime, int]]]:
    """The shards of `shards` with work due by `now`, and when each of the others with work is next due,
    earliest first."""
    due: list[int] = []
    upcoming: list[tuple[datetime, int]] = []
    for shard, at in sorted(earliest(shards, now).items()):
        if at <= now:
            due.append(shard)
        else:
            upcoming.append((at, shard))
    return due, sorted(upcoming)
