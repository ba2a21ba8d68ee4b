"""Firing due timer rows of a shard: each fire is one fenced transaction on the run it belongs to."""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection
from opentelemetry import trace
from perdura import clock, metrics

from engine.history import due_timers
from engine.history.errors import StaleTask
from engine.history.mutation import Mutation, TimerKind
from engine.models import Timer
from engine.persistence import leases, store, timer_groups
from engine.services import write_path
from engine.shards import (
    batches,
    next_due,
    parking,
    reencryption,
    retention,
    retention_pace,
    schedules,
    transfers,
    visibility_index,
)
from engine.shards.budget import Budget

log = logging.getLogger(__name__)
_tracer = trace.get_tracer("perdura.shards")
BATCH = 200
SLICE_SECONDS = 0.25
"""How long transfers (or schedule ticks) may run in a pass before the shard's due timers get a turn."""


class UnknownTimerKind(ValueError):
    """A timer of a kind this process cannot fire (a newer version's, or a corrupt row): it is charged a
    failed attempt and parked, never dropped, so that a worker that knows the kind can fire it later."""


def _apply_row(row: Timer, _execution: object, m: Mutation) -> None:
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
    return bool(fire_together([row], shard=shard, range_id=range_id))


FIRE_TOGETHER = 32
"""Due timers of distinct runs fired in one transaction at most: it pays the opening round trip and the
COMMIT once for all of them."""


def fire_together(rows: list[Timer], *, shard: int, range_id: int) -> list[Timer]:
    """Apply due timers, each of a different run, in one fenced transaction: the runs locked in id order
    and the rows deleted in one round trip (engine/persistence/timer_groups.py; as in `fire`, deleting
    makes firing idempotent), then each timer applied. Returns the rows fired; the others were already
    gone.

    Raises:
        whatever applying one of them raised (nothing of any of them is written then), or
        leases.LeaseLost.
    """

    def body() -> list[Timer]:
        runs, present = timer_groups.open_group(
            shard, range_id, [row.execution_id for row in rows], [row.pk for row in rows]
        )
        fired = []
        for row in rows:
            if row.pk not in present or row.execution_id not in runs:
                continue
            try:
                write_path.apply_locked(runs[row.execution_id], functools.partial(_apply_row, row))
            except StaleTask:
                pass  # the run moved past it: the timer row goes, the run stays as it is
            fired.append(row)
        return fired

    return write_path.in_transaction(body, shard=shard, range_id=range_id, body_fences=True)


def _groups(rows: list[Timer]) -> list[list[Timer]]:
    """`rows` in order, cut into groups of at most FIRE_TOGETHER with one timer per run in each (a second
    timer of a run starts a group of its own: its fire must see the first's)."""
    groups: list[list[Timer]] = [[]]
    runs: set[int] = set()
    for row in rows:
        if len(groups[-1]) >= FIRE_TOGETHER or row.execution_id in runs:
            groups.append([])
            runs = set()
        groups[-1].append(row)
        runs.add(row.execution_id)
    return [g for g in groups if g]


def _fire_due(shard: int, range_id: int, budget: Budget, *, due_by: datetime | None = None) -> int:
    """Fire the shard's due timers, a group to a transaction. When a group fails, its timers are fired each
    on its own: one that raises is charged a failed attempt and moved to its next attempt (or parked), and
    the timers behind it fire on time. `due_by`: a time a little ahead; the timers due by then are read
    now, and fired from then on."""
    fired = 0
    tried: set[int] = set()
    lateness = metrics.timer_lateness.labels(str(shard))
    while not budget.spent():
        # A row tried in this pass is never taken again in it, whatever became of it.
        now = clock.now()
        due = store.due_timers(shard, now if due_by is None else max(now, due_by), BATCH)
        if due_by is not None:
            _sleep_until(due_by)
            due_by = None
        rows = [r for r in due if r.pk not in tried]
        for group in _groups(rows):
            if budget.spent():
                break
            tried.update(row.pk for row in group)
            for row in _fire_group(group, shard=shard, range_id=range_id):
                fired += 1
                # From its due time, not its last attempt's: a retried timer was that late.
                lateness.observe(max((clock.now() - row.fire_at).total_seconds(), 0.0))
        if len(due) < BATCH:
            break  # all were taken: timers come due since are the caller's next look's
    return fired


def _sleep_until(at: datetime) -> None:
    """Wait until `at` (a few milliseconds ahead at most: the loop's `early`), the GIL released: a timer
    never fires before it is due."""
    left = (at - clock.now()).total_seconds()
    if left > 0:
        time.sleep(left)


def _fire_group(group: list[Timer], *, shard: int, range_id: int) -> list[Timer]:
    """The rows of `group` fired: together if they can be, else each on its own, a failing one charged."""
    try:
        return fire_together(group, shard=shard, range_id=range_id)
    except leases.LeaseLost:
        raise
    except Exception as e:  # noqa: BLE001 - nothing was written: each row is tried alone, and pays alone
        if len(group) == 1:
            _charge(group[0], e, shard=shard, range_id=range_id)
            return []
    fired = []
    for row in group:
        try:
            if fire(row, shard=shard, range_id=range_id):
                fired.append(row)
        except leases.LeaseLost:
            raise
        except Exception as e:  # noqa: BLE001 - the row pays for it, never the shard
            _charge(row, e, shard=shard, range_id=range_id)
    return fired


def _charge(row: Timer, error: Exception, *, shard: int, range_id: int) -> None:
    parking.row_failed(
        queue=parking.TIMER, pk=row.pk, shard=shard, range_id=range_id, error=error, label=kind_name(row.kind)
    )


def process_shard(shard: int, owner: str, *, budget: Budget | None = None) -> int | None:
    """Fire every due timer and run every transfer, schedule tick, retention row, batch step and
    re-encryption batch of `shard` if its lease can be had;
    returns the count, or None when another owner holds the lease (that owner looks again for due work
    before it lets the lease go). A pass ends when its budget is spent (the rows left stay due for the
    next one).

    Raises:
        parking.Outage: the database failed; the rows stay as they were.
    """
    with _tracer.start_as_current_span("perdura.shard.process", attributes={"perdura.shard": shard}) as span:
        done = _process_leased(shard, owner, budget)
        span.set_attribute("perdura.lease_held", done is not None)
        if done is not None:
            span.set_attribute("perdura.rows", done)
        return done


def _process_leased(shard: int, owner: str, budget: Budget | None) -> int | None:
    range_id = leases.acquire(shard, owner)
    if range_id is None:
        return None
    try:
        done = _pass(shard, range_id, budget)
    except leases.LeaseLost:
        return 0
    except Exception:
        # Let another worker take the shard at once rather than when the lease expires (best effort).
        with contextlib.suppress(Exception):
            leases.release(shard, range_id)
        raise
    leases.release(shard, range_id)
    return done


def process_held(
    shard: int, range_id: int, *, budget: Budget | None = None, due_by: datetime | None = None
) -> int:
    """One pass over `shard` under a lease a shard loop holds as `range_id` (engine/shards/loop.py): its
    due timers, then a slice of each other queue with rows due, round after round, until nothing is due or
    the budget is spent. `due_by`: the loop slept until (a little before) the shard's next work is due at
    `due_by`, most likely a timer: the timers due by then are read at once and fired from then on, before
    anything else is asked. That takes the reading and the asking (a round trip each) off their lateness.

    Raises:
        leases.LeaseLost: another worker took the shard; what was committed before stands.
        parking.Outage: the database failed; the rows stay as they were.
    """
    attributes = {"perdura.shard": shard, "perdura.lease_held": True}
    with _tracer.start_as_current_span("perdura.shard.process", attributes=attributes) as span:
        done = _pass(shard, range_id, budget, due_by=due_by)
        span.set_attribute("perdura.rows", done)
        return done


def _pass(shard: int, range_id: int, budget: Budget | None, *, due_by: datetime | None = None) -> int:
    budget = budget or Budget()
    done = 0
    try:
        if due_by is not None:
            done += _fire_due(shard, range_id, budget, due_by=due_by)
        # A long run of transfers (or of failing ones) keeps the shard's timers waiting a slice at most.
        # Each round starts with one probe of every queue; the last, finding nothing, is also the look for
        # work that came due during the pass (a Celery pass's wake-up hint was refused: the lease was
        # its own), so it does not wait for the next hint or sweep.
        while due := _due_queues(shard, clock.now(), may_wait=budget.may_wait):
            before = done
            if "timers" in due:
                done += _fire_due(shard, range_id, budget)
            for queue in _SLICED:
                if queue.name in due and not budget.spent():
                    done += queue.process(shard, range_id, budget=budget.slice(SLICE_SECONDS))
            if budget.spent():
                break
            if done == before and not visibility_index.backoff.ready():
                # A round that moved nothing while OpenSearch is backed off: the rows still due are its
                # visibility rows (a row that failed this round waits for its retry time), and going
                # round again only spun, a whole turn of `perdura dev`'s one thread at a time, while
                # every call waited. The loop comes back when the backoff ends (loop.py).
                break
    except leases.LeaseLost:
        metrics.shard_lease_lost.labels(str(shard)).inc()
        log.warning("lost the lease of shard %s while processing it; another worker continues", shard)
        raise
    return done


@dataclass(frozen=True, slots=True)
class _Queue:
    name: str
    process: Callable[..., int]


_SLICED = (
    _Queue("transfers", transfers.process),
    _Queue("schedules", schedules.process_due),
    _Queue("retention", retention.process),
    _Queue("batches", batches.process_due),
    _Queue("reencryption", reencryption.process_due),
)


_PROBES = {
    # Each the condition of its queue's partial due index (engine/models.py), so each is one index probe.
    "timers": "SELECT 1 FROM engine_timer WHERE shard = %s AND parked_at IS NULL AND fire_at <= %s",
    "transfers": "SELECT 1 FROM engine_transfer WHERE shard = %s AND parked_at IS NULL AND retry_at IS NULL",
    "transfer_retries": "SELECT 1 FROM engine_transfer WHERE shard = %s AND parked_at IS NULL AND retry_at <= %s",
    "schedules": "SELECT 1 FROM engine_schedule WHERE shard = %s AND parked_at IS NULL AND next_wakeup_at <= %s",
    "retention": "SELECT 1 FROM engine_retention WHERE shard = %s AND parked_at IS NULL AND due_at <= %s",
    "batches": "SELECT 1 FROM engine_batchoperation WHERE shard = %s AND parked_at IS NULL AND next_wakeup_at <= %s",
    "reencryption": "SELECT 1 FROM engine_reencryption WHERE shard = %s AND parked_at IS NULL "
    "AND next_wakeup_at IS NOT NULL AND next_wakeup_at <= %s",
}
_PROBE_SQL = "SELECT " + ", ".join(f"EXISTS ({sql})" for sql in _PROBES.values())


def _due_queues(shard: int, now: datetime, *, may_wait: bool = False) -> set[str]:
    """The queues of `shard` with a row due by `now`, in one statement of indexed EXISTS probes written
    out once: an empty pass costs its lease, this and the release. (As ORM queries, one per queue, the
    probes were a quarter of a busy worker's pass time.) Retention is left out while its pace has no token
    for it: none now, or, for a pass that `may_wait`, none within a slice."""
    at = connection.ops.adapt_datetimefield_value(now)
    params: list[Any] = []
    for sql in _PROBES.values():
        params += [shard, at] if sql.count("%s") == 2 else [shard]
    with connection.cursor() as cursor:
        cursor.execute(_PROBE_SQL, params)
        found = cursor.fetchone()
    due = {name for name, present in zip(_PROBES, found, strict=True) if present}
    if "retention" in due and retention_pace.seconds_to_token() > (SLICE_SECONDS if may_wait else 0.0):
        due.remove("retention")  # no token soon: the pass goes on with the other queues
    if "transfer_retries" in due:
        due = (due - {"transfer_retries"}) | {"transfers"}
    return due


def due_shards() -> list[int]:
    """Shards that have timers due now, transfers waiting, schedule ticks, batch steps, re-encryption or
    retention rows due (reads, so idle sweeps write nothing)."""
    due_now, _ = next_due.plan(range(settings.PERDURA_SHARDS), clock.now())
    return due_now


def next_fire_at() -> datetime | None:
    """The earliest time a live timer, a transfer's retry, a schedule tick, a retention row, a batch step or
    a re-encryption batch is due (now, for a fresh transfer)."""
    now = clock.now()
    return min(next_due.earliest(range(settings.PERDURA_SHARDS), now).values(), default=None)
