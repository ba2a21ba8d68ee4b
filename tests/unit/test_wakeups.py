"""Which new shard rows wake their shard's loop (engine/persistence/wakeups.py): it sleeps a second at most,
so only rows due sooner than that need a wake-up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engine import notify
from engine.history.mutation import NewTimer, TimerKind
from engine.persistence import wakeups

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def test_a_timer_due_before_the_loops_next_look_wakes_its_shard():
    keys: dict[str, int] = {}
    wakeups.timers_created(
        5, NOW, [NewTimer(TimerKind.USER_TIMER, at(30)), NewTimer(TimerKind.USER_TIMER, at(0.2))], keys
    )
    assert keys == {notify.shard_key(5): 1}


def test_timers_due_later_are_left_to_the_loops_next_look():
    """A day-long sleep, a century-long run timeout, even a two-second timer: the loop, which looks again at
    least every second, finds them and sleeps until they are due."""
    keys: dict[str, int] = {}
    timers = [NewTimer(TimerKind.USER_TIMER, at(2)), NewTimer(TimerKind.WORKFLOW_RUN_TIMEOUT, at(3e9))]
    wakeups.timers_created(5, NOW, timers, keys)
    assert keys == {}


def test_a_transfer_always_wakes_its_shard():
    keys: dict[str, int] = {}
    wakeups.transfers_created(9, keys)
    assert keys == {notify.shard_key(9): 1}


def test_shard_keys_name_their_shard_and_nothing_else_does():
    assert notify.shard_of(notify.shard_key(12)) == 12
    assert notify.shard_of("shard/") is None
    assert notify.shard_of(notify.run_key(12)) is None
    assert notify.shard_of(notify.task_queue_key("ns", 1, "shard/3")) is None
