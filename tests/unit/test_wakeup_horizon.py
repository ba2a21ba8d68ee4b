"""Which new timers get a Celery wake-up when they are created (engine/persistence/wakeups.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engine.history.mutation import NewTimer, TimerKind
from engine.persistence.wakeups import first_hint

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
HORIZON = timedelta(seconds=4)


def at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def test_the_earliest_precise_timer_within_the_horizon_is_hinted():
    timers = [NewTimer(TimerKind.USER_TIMER, at(3)), NewTimer(TimerKind.USER_TIMER, at(1))]
    assert first_hint(NOW, timers, HORIZON) == at(1)


def test_a_timer_beyond_the_horizon_is_left_to_the_sweep():
    """A day-long sleep, a century-long run timeout: a message held that long would be redelivered by
    Redis every visibility timeout."""
    timers = [
        NewTimer(TimerKind.USER_TIMER, at(86_400)),
        NewTimer(TimerKind.WORKFLOW_RUN_TIMEOUT, at(100 * 365 * 86_400)),
    ]
    assert first_hint(NOW, timers, HORIZON) is None


def test_the_horizon_itself_is_within():
    assert first_hint(NOW, [NewTimer(TimerKind.WORKFLOW_BACKOFF, at(4))], HORIZON) == at(4)


def test_timeouts_are_never_hinted_they_wait_for_the_sweep():
    timers = [NewTimer(TimerKind.ACTIVITY_TIMEOUT, at(1)), NewTimer(TimerKind.USER_TIMER, at(10))]
    assert first_hint(NOW, timers, HORIZON) is None
