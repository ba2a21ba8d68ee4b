"""Celery wake-ups of a shard (engine/tasks.py): one that a pass has already answered costs a read, not a pass.

A burst of a tenant's work (100 children finishing) sends a wake-up for nearly every commit. When each of
them ran a pass, another tenant's timer due meanwhile waited behind all of them in the pool's queue.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from perdura import clock, metrics

from engine import tasks
from engine.models import ShardLease, Timer
from engine.persistence import leases
from engine.shards import timers
from tests.integration.test_shard_fencing import fired_events, run_with_due_timer

pytestmark = pytest.mark.django_db(transaction=True)


def range_id(shard: int) -> int:
    return ShardLease.objects.get(shard=shard).range_id


def spent() -> float:
    return metrics.shard_wakeups_spent._value.get()


def test_a_wakeup_sent_before_the_latest_pass_began_is_dropped_without_a_pass():
    execution = run_with_due_timer()
    sent = time.time()
    time.sleep(leases.CLOCK_MARGIN.total_seconds() + 0.01)
    assert timers.process_shard(execution.shard, "another worker") == 1
    fence, before = range_id(execution.shard), spent()

    assert tasks.process_shard(execution.shard, since=sent) == 0
    assert range_id(execution.shard) == fence  # no lease taken: no pass
    assert spent() == before + 1
    assert fired_events(execution) == 1


def test_a_wakeup_for_work_newer_than_the_latest_pass_runs_one():
    execution = run_with_due_timer()
    (row,) = Timer.objects.filter(execution=execution, kind=1)
    Timer.objects.filter(pk=row.pk).update(fire_at=clock.now() + timedelta(hours=1))
    assert timers.process_shard(execution.shard, "another worker") == 0
    fence = range_id(execution.shard)

    # The timer comes due after that pass began; its wake-up says so.
    Timer.objects.filter(pk=row.pk).update(fire_at=clock.now())
    assert tasks.process_shard(execution.shard, since=time.time()) == 1
    assert range_id(execution.shard) == fence + 1
    assert fired_events(execution) == 1


def test_a_wakeup_within_the_clock_margin_of_a_pass_still_runs_one():
    """Clocks of the sender and the worker may differ by up to the margin: such a wake-up cannot tell
    whether the pass saw its work, so it runs a pass of its own."""
    execution = run_with_due_timer()
    (row,) = Timer.objects.filter(execution=execution, kind=1)
    Timer.objects.filter(pk=row.pk).update(fire_at=clock.now() + timedelta(hours=1))
    assert timers.process_shard(execution.shard, "another worker") == 0
    Timer.objects.filter(pk=row.pk).update(fire_at=clock.now())
    passed_at = ShardLease.objects.get(shard=execution.shard).passed_at
    sent = (passed_at - leases.CLOCK_MARGIN / 2).timestamp()  # by the sender's clock, just before that pass
    assert tasks.process_shard(execution.shard, since=sent) == 1
    assert fired_events(execution) == 1


def test_a_wakeup_without_a_time_always_runs_a_pass():
    """Messages queued by an older version carry no time."""
    execution = run_with_due_timer()
    assert timers.process_shard(execution.shard, "another worker") == 1
    fence = range_id(execution.shard)
    assert tasks.process_shard(execution.shard) == 0
    assert range_id(execution.shard) == fence + 1


def test_the_sweep_queues_only_the_due_shards_no_loop_holds():
    """Shard loops hold their shards' leases (engine/shards/ownership.py); a Celery pass of a held shard
    would find the lease taken and look again three times for nothing. The sweep is for shards nobody
    holds: a loop that died, or none started."""
    execution = run_with_due_timer()
    assert execution.shard in tasks.unheld_due_shards()
    range_id = leases.acquire(execution.shard, "a shard loop")
    assert range_id is not None
    assert execution.shard not in tasks.unheld_due_shards()
    # The loop's lease lapses: the sweep takes the shard up again.
    ShardLease.objects.filter(shard=execution.shard).update(expires_at=clock.now() - timedelta(seconds=1))
    assert execution.shard in tasks.unheld_due_shards()
