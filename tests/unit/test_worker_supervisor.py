"""`perdura worker` starts its Celery worker again after it dies: quickly after a healthy run, with a growing
wait while it keeps dying young (the end-to-end proof is tests/chaos/test_timer_storm.py, where Celery's
Redis transport exits on the broker's loss and the timers still fire)."""

from __future__ import annotations

import pytest
from perdura import supervise


@pytest.mark.parametrize(
    ("previous", "ran_for", "expected"),
    [
        (0.0, 0.5, supervise.FIRST_DELAY),
        (1.0, 0.5, 2.0),
        (2.0, 3.0, 4.0),
        (16.0, 1.0, supervise.MAX_DELAY),
        (supervise.MAX_DELAY, 1.0, supervise.MAX_DELAY),
        (supervise.MAX_DELAY, supervise.HEALTHY_SECONDS, supervise.FIRST_DELAY),
    ],
)
def test_restart_delay(previous, ran_for, expected):
    assert supervise.restart_delay(previous, ran_for) == expected
