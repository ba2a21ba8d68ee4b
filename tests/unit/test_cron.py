"""Cron schedule arithmetic."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engine.history import cron

NOW = datetime(2026, 11, 29, 23, 11, 7, 500000, tzinfo=UTC)


@pytest.mark.parametrize(
    ("schedule", "seconds"),
    [
        ("*/5 * * * *", 232.5),
        ("@hourly", 2932.5),
        ("@every 90s", 90.0),
        ("@every 1h30m", 5400.0),
        ("CRON_TZ=America/New_York 0 9 * * *", 53332.5),
    ],
)
def test_next_backoff(schedule, seconds):
    assert cron.next_backoff(schedule, NOW) == seconds


@pytest.mark.parametrize("schedule", ["nope", "* * *", "@every x", "61 * * * *", "TZ=Nowhere/Land * * * * *"])
def test_invalid_schedules(schedule):
    with pytest.raises(cron.CronError):
        cron.validate(schedule)
