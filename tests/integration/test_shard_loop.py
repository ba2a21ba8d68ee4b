"""The shard loop's turn (engine/shards/loop.py): leases held from one pass to the next, the due shards found
in one statement (engine/shards/next_due.py), and fencing still refusing a loop whose lease was taken."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from perdura import clock

from engine.history.mutation import TimerKind
from engine.models import ShardLease, ShardOwner, Timer
from engine.persistence import leases
from engine.shards import loop, next_due, ownership, timers
from tests.integration.test_shard_fencing import fired_events, run_with_due_timer
from tests.integration.test_shard_parking import started_run

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def lease_writes(captured: CaptureQueriesContext) -> list[str]:
    return [
        q["sql"]
        for q in captured.captured_queries
        if "engine_shardlease" in q["sql"] and not q["sql"].lstrip().upper().startswith("SELECT")
    ]


def test_the_loop_takes_every_lease_once_and_fires_without_taking_or_releasing_one():
    held = ownership.Ownership("loop-a", range(settings.PERDURA_SHARDS))
    held.refresh(0.0)
    assert sorted(held.held) == list(range(settings.PERDURA_SHARDS))
    execution = run_with_due_timer()
    with CaptureQueriesContext(connection) as captured:
        again, _ = loop._cycle(held, 1.0, [])
    assert again
    assert fired_events(execution) == 1
    # A Celery pass takes the lease and lets it go (two commits); the loop's turn writes no lease at all.
    assert lease_writes(captured) == []
    assert held.held == dict(ShardLease.objects.filter(owner="loop-a").values_list("shard", "range_id"))


def test_leases_are_renewed_a_third_of_the_way_through_and_a_lease_taken_over_is_dropped(settings):
    settings.PERDURA_SHARD_LEASE_SECONDS = 30
    held = ownership.Ownership("loop-a", range(settings.PERDURA_SHARDS))
    held.refresh(0.0)
    with CaptureQueriesContext(connection) as captured:
        held.refresh(9.0)
    assert captured.captured_queries == []
    ShardLease.objects.filter(shard=3).update(expires_at=clock.now() - timedelta(seconds=1))
    taken = leases.acquire(3, "loop-b")
    assert taken is not None
    before = clock.now()
    held.refresh(11.0)
    assert 3 not in held.held  # still loop-b's: a live lease is not stolen back
    assert len(held.held) == settings.PERDURA_SHARDS - 1
    renewed = ShardLease.objects.filter(owner="loop-a").values_list("expires_at", flat=True)
    assert all(at >= before + timedelta(seconds=29) for at in renewed)


def test_a_loop_whose_lease_was_taken_commits_nothing_and_lets_the_shard_go():
    held = ownership.Ownership("loop-a", range(settings.PERDURA_SHARDS))
    held.refresh(0.0)
    execution = run_with_due_timer()
    ShardLease.objects.filter(shard=execution.shard).update(expires_at=clock.now() - timedelta(seconds=1))
    assert leases.acquire(execution.shard, "loop-b") is not None
    loop._cycle(held, 1.0, [])
    assert fired_events(execution) == 0
    assert execution.shard not in held.held
    assert Timer.objects.filter(execution=execution, kind=TimerKind.USER_TIMER).exists()


def test_a_loop_started_again_under_its_name_takes_its_live_leases_back_at_once():
    """`perdura dev` killed and started again: its leases are still live, and it must not wait them out."""
    first = ownership.Ownership(loop.dev_owner_name(), range(settings.PERDURA_SHARDS))
    first.refresh(0.0)
    again = ownership.Ownership(loop.dev_owner_name(), range(settings.PERDURA_SHARDS))
    again.refresh(0.0)
    assert sorted(again.held) == list(range(settings.PERDURA_SHARDS))
    assert all(again.held[s] == first.held[s] + 1 for s in again.held)
    again.release_all()
    assert not ShardLease.objects.exclude(owner="").exists()


def test_the_due_shards_and_the_next_due_time_come_from_one_statement():
    due_run = run_with_due_timer()
    later_run = started_run(shard=(due_run.shard + 1) % settings.PERDURA_SHARDS)
    parked_run = started_run(shard=(due_run.shard + 2) % settings.PERDURA_SHARDS)
    soon = clock.now() + timedelta(seconds=30)
    Timer.objects.create(shard=later_run.shard, fire_at=soon, execution=later_run, kind=TimerKind.USER_TIMER)
    Timer.objects.create(
        shard=parked_run.shard,
        fire_at=clock.now() - timedelta(seconds=5),
        execution=parked_run,
        kind=TimerKind.USER_TIMER,
        parked_at=clock.now(),
    )
    with CaptureQueriesContext(connection) as captured:
        due_now, upcoming = next_due.plan(range(settings.PERDURA_SHARDS), clock.now())
    assert len(captured.captured_queries) == 1
    assert due_now == [due_run.shard]
    assert upcoming == [(soon, later_run.shard)]
    assert timers.due_shards() == [due_run.shard]
    # Only the shards asked about.
    assert next_due.plan([later_run.shard], clock.now()) == ([], [(soon, later_run.shard)])


def test_two_loops_share_the_shards_and_one_takes_them_all_when_the_other_leaves(settings):
    settings.PERDURA_SHARD_LEASE_SECONDS = 30
    shards = range(settings.PERDURA_SHARDS)
    first, second = ownership.Ownership("loop-a", shards), ownership.Ownership("loop-b", shards)
    first.refresh(0.0)
    assert len(first.held) == len(shards)  # alone: all of them
    second.refresh(0.0)
    assert second.held == {}  # none free yet; it is counted from now on
    first.refresh(10.0)  # its next round: two loops alive, it lets half go
    assert len(first.held) == len(shards) // 2
    second.refresh(1.0)  # a loop under its share looks again within a second
    assert len(second.held) == len(shards) // 2
    assert not set(first.held) & set(second.held)
    second.release_all()  # a stop: leases let go, the loop gone from the living
    first.refresh(20.0)
    assert len(first.held) == len(shards)


def test_a_dead_loop_is_forgotten_after_a_lease_and_its_shards_are_taken(settings):
    settings.PERDURA_SHARD_LEASE_SECONDS = 30
    shards = range(settings.PERDURA_SHARDS)
    first, second = ownership.Ownership("loop-a", shards), ownership.Ownership("loop-b", shards)
    first.refresh(0.0)
    second.refresh(0.0)
    first.refresh(10.0)
    second.refresh(1.0)
    # loop-b dies: no release, no leave. Its leases and its heartbeat lapse.
    ShardLease.objects.filter(owner="loop-b").update(expires_at=clock.now() - timedelta(seconds=1))
    ShardOwner.objects.filter(name="loop-b").update(seen_at=clock.now() - timedelta(seconds=31))
    first.refresh(20.0)
    assert len(first.held) == len(shards)


def test_share_is_the_shard_count_over_the_loops_rounded_up():
    def loops(n: int) -> list[str]:
        return [f"h:1:worker/{i}" for i in range(n)]

    assert [ownership.share(16, "h:1:worker/0", loops(n)) for n in (0, 1, 2, 3, 4, 8, 16)] == [
        16,
        16,
        8,
        6,
        4,
        2,
        1,
    ]


def test_loops_beyond_the_shard_count_share_the_shards_across_workers():
    # Two workers of 16 loops, 16 shards: each worker's loops 0-7 hold one, its loops 8-15 none.
    alive = [f"h:{pid}:worker/{i}" for pid in (1, 2) for i in range(16)]
    held = {name: ownership.share(16, name, alive) for name in alive}
    assert sum(held.values()) == 16
    assert sum(held[f"h:1:worker/{i}"] for i in range(16)) == 8
    assert [held[f"h:2:worker/{i}"] for i in (0, 7, 8, 15)] == [1, 1, 0, 0]
    assert ownership.share(16, "h:perdura-dev", ["h:perdura-dev"]) == 16


def test_a_second_worker_gets_its_part_when_loops_outnumber_shards(settings):
    settings.PERDURA_SHARD_LEASE_SECONDS = 30
    shards = range(4)

    def worker(pid: int) -> list[ownership.Ownership]:
        # As platform/perdura/shard_loops.py: every loop says it is alive before any takes shards.
        owners = [ownership.Ownership(f"h:{pid}:worker/{i}", shards) for i in range(4)]
        for owner in owners:
            ownership.heartbeat(owner.owner, 30)
        return owners

    first = worker(1)
    for owner in first:
        owner.refresh(0.0)
    assert [len(owner.held) for owner in first] == [1, 1, 1, 1]
    second = worker(2)
    for at in (11.0, 12.0, 13.0):  # past a round of the loops at their share, then a second each
        for owner in first + second:
            owner.refresh(at)
    assert [len(owner.held) for owner in first] == [1, 1, 0, 0]
    assert [len(owner.held) for owner in second] == [1, 1, 0, 0]
    # The second worker stops: the first one's standby loops take its shards at their next short round.
    for owner in second:
        owner.release_all()
    for owner in first:
        owner.refresh(14.0)
    assert [len(owner.held) for owner in first] == [1, 1, 1, 1]
