"""Celery tasks of the shard workers: thin wrappers that take ids and call the shard code (idempotent)."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from celery import shared_task
from celery.signals import worker_process_shutdown, worker_shutting_down
from perdura import metrics

from engine.persistence import leases
from engine.shards import budget, namespace_purge, timers
from engine.shards.failure_log import FailureLog
from engine.shards.loop import owner_name

log = logging.getLogger("perdura.shards")
failure_log = FailureLog(log)


WORKER_PASS_SECONDS = 1.0
"""How long one pass may hold a pool process. The pool has few processes, and a timer's hint that comes
due while all of them are in passes waits for one to end: with 5 s passes, one tenant's burst of 100
child starts made another tenant's timers 3 s late. A shard with work left after its pass is queued
again (_queue_again), behind the hints already waiting, instead of waiting for the sweep."""


@shared_task(name="engine.tasks.process_shard", ignore_result=True)
def process_shard(shard: int, attempt: int = 0, since: float | None = None) -> int:
    """Fire the shard's due timers. Sent with an ETA when a timer is created, and by the sweep.

    `since` (epoch seconds) is when the work this message announces was committed and due. A pass that
    began after it has seen that work, so the message is dropped at the cost of one read: a burst of
    wake-ups for a few shards (100 children finishing) would otherwise queue a pass each, and another
    tenant's timer due meanwhile would wait behind all of them in the pool's queue.

    A failing row is charged to the row (engine/shards/parking.py); what still escapes (an outage) is
    logged here at a limited rate instead of by Celery on every sweep, and the sweep tries again.
    """
    try:
        if since is not None and leases.passed_since(shard, datetime.fromtimestamp(since, UTC)):
            metrics.shard_wakeups_spent.inc()
            return 0
        # A pool process may wait in its pass for retention's next token (engine/shards/retention_pace.py).
        pass_budget = budget.Budget(WORKER_PASS_SECONDS, may_wait=True)
        done = timers.process_shard(shard, owner_name(), budget=pass_budget)
    except Exception as e:  # noqa: BLE001 - the rows stay; the next sweep retries
        failure_log.failed(f"shard:{shard}", f"processing shard {shard} failed; the sweep retries it", e)
        return 0
    if done is None:
        _look_again(shard, attempt, since)
        return 0
    if pass_budget.spent() and not budget.stop_requested.is_set():
        _queue_again(shard)
    return done


def _sent_now() -> dict[str, float]:
    return {"since": time.time()}


def _queue_again(shard: int) -> None:
    try:
        process_shard.apply_async(args=(shard,), kwargs=_sent_now(), retry=False)
    except Exception as e:  # noqa: BLE001 - the sweep still finds the work
        failure_log.failed("requeue", "could not queue a busy shard again; the sweep finds it", e)


BUSY_RETRY_SECONDS = 0.2
BUSY_RETRIES = 3
_retry_sent_at: dict[int, float] = {}


def _look_again(shard: int, attempt: int, since: float | None) -> None:
    """Another process held the shard's lease when this hint came. It looks for due work once more
    before letting go, but a hint that lands between that look and the release would wait for the
    sweep: send one short retry. At most one is in flight per shard from this process, and a chain of
    them ends after BUSY_RETRIES (a holder busy longer than that sees the work itself)."""
    now = time.monotonic()
    if attempt >= BUSY_RETRIES or now - _retry_sent_at.get(shard, -1.0) < BUSY_RETRY_SECONDS:
        return
    _retry_sent_at[shard] = now
    try:
        process_shard.apply_async(
            args=(shard,),
            kwargs={"attempt": attempt + 1, "since": since},
            countdown=BUSY_RETRY_SECONDS,
            retry=False,
        )
    except Exception as e:  # noqa: BLE001 - the sweep still finds the work
        failure_log.failed("busy-retry", "could not send a retry for a busy shard; the sweep finds it", e)


def unheld_due_shards() -> list[int]:
    """The shards with work due that no shard loop holds (all of them lapsed or let go): the sweep's."""
    held = leases.live_shards()
    return [shard for shard in timers.due_shards() if shard not in held]


@shared_task(name="engine.tasks.sweep", ignore_result=True)
def sweep() -> int:
    """Beat's safety net: queue a pass for every shard with work due that no shard loop holds (engine/shards/
    ownership.py), so a shard whose loop died, or that none has taken yet, still gets its timers fired."""
    shards = unheld_due_shards()
    for shard in shards:
        process_shard.apply_async(args=(shard,), kwargs=_sent_now())
    return len(shards)


@shared_task(name="engine.tasks.purge_deleted_namespaces", ignore_result=True)
def purge_deleted_namespaces() -> int:
    """Beat's pass over deleted namespaces: their open runs terminated, their retention rows due now."""
    return namespace_purge.purge_pass()


@worker_shutting_down.connect
@worker_process_shutdown.connect
def _stop_passes(**_: object) -> None:
    """The worker is stopping: passes in this process end after the row in hand (engine/shards/budget.py)."""
    budget.stop_requested.set()
