"""Firing due timer rows of a shard: each fire is one fenced transaction on the run it belongs to."""

from __future__ import annotations

import contextlib
import logging
from datetime import datetime

from django.db.models import Min
from perdura import clock

from engine.history import due_timers
from engine.history.errors import StaleTask
from engine.history.mutation import Mutation, TimerKind
from engine.models import Timer
from engine.persistence import leases, store
from engine.services import write_path
from engine.shards import parking, schedules, transfers
from engine.shards.budget import Budget

log = logging.getLogger(__name__)
BATCH = 200
SLICE_SECONDS = 0.25
"""How long transfers (or schedule ticks) may run in a pass before the shard's due timers get a turn."""


class UnknownTimerKind(ValueError):
    """A timer of a kind this process cannot fire (a newer version's, or a corrupt row): it is charged a
    failed attempt and parked, never dropped, so that a worker that knows the kind can fire it later."""


def _apply(m: Mutation, row: Timer) -> None:
    rule = due_timers.RULES.get(row.kind)
    if rule is None:
        raise UnknownTimerKind(f"unknown timer kind {row.kind}")
    rule(m, event_id=row.event_id, attempt=row.attempt, detail=row.detail)


def kind_name(kind: int) -> str:
    try:
        return TimerKind(kind).name
    except ValueError:
        return f"UNKNOWN({kind})"


def fire(row: Timer, *, shard: int, range_id: int) -> bool:
    """Apply one due timer under the shard's fence. Returns False if the timer was already gone."""

    def body() -> bool:
        execution = store.lock_execution(row.execution_id)
        # Deleting first makes firing idempotent: a second processor finds nothing to delete.
        if execution is None or Timer.objects.filter(pk=row.pk).delete()[0] == 0:
            return False
        try:
            write_path.apply_locked(execution, lambda _e, m: _apply(m, row))
        except StaleTask:
            pass  # the run moved past it: the timer row goes, the run stays as it is
        return True

    return write_path.in_transaction(body, shard=shard, range_id=range_id)


def _fire_due(shard: int, range_id: int, budget: Budget) -> int:
    """Fire the shard's due timers, each on its own: one that raises is charged a failed attempt and
    moved to its next attempt (or parked), and the timers behind it fire on time."""
    fired = 0
    tried: set[int] = set()
    while not budget.spent():
        # A row tried in this pass is never taken again in it, whatever became of it.
        rows = [r for r in store.due_timers(shard, clock.now(), BATCH) if r.pk not in tried]
        if not rows:
            break
        for row in rows:
            if budget.spent():
                break
            tried.add(row.pk)
            try:
                if fire(row, shard=shard, range_id=range_id):
                    fired += 1
            except leases.LeaseLost:
                raise
            except Exception as e:  # noqa: BLE001 - the row pays for it, never the shard
                parking.row_failed(
                    queue=parking.TIMER,
                    pk=row.pk,
                    shard=shard,
                    range_id=range_id,
                    error=e,
                    label=kind_name(row.kind),
                )
                continue
    return fired


def process_shard(shard: int, owner: str, *, budget: Budget | None = None) -> int | None:
    """Fire every due timer and run every transfer and schedule tick of `shard` if its lease can be had;
    returns the count, or None when another owner holds the lease (that owner looks again for due work
    before it lets the lease go). A pass ends when its budget is spent (the rows left stay due for the
    next one).

    Raises:
        parking.Outage: the database failed; the rows stay as they were.
    """
    range_id = leases.acquire(shard, owner)
    if range_id is None:
        return None
    budget = budget or Budget()
    done = 0
    try:
        while True:
            # Timers first, then a slice of each other queue, round after round: a long run of
            # transfers (or of failing ones) keeps the shard's timers waiting a slice at most.
            done += _fire_due(shard, range_id, budget)
            transfer_slice = budget.slice(SLICE_SECONDS)
            done += transfers.process(shard, range_id, budget=transfer_slice)
            schedule_slice = budget.slice(SLICE_SECONDS)
            done += schedules.process_due(shard, range_id, budget=schedule_slice)
            if budget.spent():
                break
            # Work that came due during this pass had its wake-up hint refused (the lease was ours): look
            # again before letting the lease go, or it would wait for the next hint or sweep.
            if not (transfer_slice.spent() or schedule_slice.spent() or _work_due(shard, clock.now())):
                break
    except leases.LeaseLost:
        log.warning("lost the lease of shard %s while processing it; another worker continues", shard)
        return done
    except Exception:
        # Let another worker take the shard at once rather than when the lease expires (best effort).
        with contextlib.suppress(Exception):
            leases.release(shard, range_id)
        raise
    leases.release(shard, range_id)
    return done


def _work_due(shard: int, now: datetime) -> bool:
    """Whether `shard` has a timer, a transfer or a schedule tick due by `now` (three indexed probes)."""
    return (
        Timer.objects.filter(shard=shard, parked_at__isnull=True, fire_at__lte=now).exists()
        or transfers.due_in_shard(shard, now)
        or schedules.due_in_shard(shard, now)
    )


def due_shards() -> list[int]:
    """Shards that have timers due now or transfers waiting (reads, so idle sweeps write nothing)."""
    now = clock.now()
    live = Timer.objects.filter(parked_at__isnull=True)
    due = set(live.filter(fire_at__lte=now).values_list("shard", flat=True).distinct())
    return sorted(due | set(transfers.shards_with_transfers(now)) | schedules.due_shards(now))


def next_fire_at() -> datetime | None:
    """The earliest time a live timer, a transfer's retry or a schedule tick is due."""
    times = [
        Timer.objects.filter(parked_at__isnull=True).aggregate(first=Min("fire_at"))["first"],
        transfers.next_retry_at(),
        schedules.next_wakeup(),
    ]
    return min((t for t in times if t is not None), default=None)
