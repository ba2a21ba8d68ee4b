"""Perdura's daylight-saving rule for schedules: a skipped local time fires once, at the first instant after
the gap; a repeated local time fires once, at its first occurrence. Europe/Berlin and America/New_York, both
transitions, cron strings and calendar specs, hourly and daily. (What Temporal does instead is shown
against the real server in tests/reference/test_schedule_dst_differential.py.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import islice
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from temporalio.api.schedule.v1 import CalendarSpec, ScheduleSpec

from engine.schedules.spec import compile_spec

BERLIN = "Europe/Berlin"  # 2026: forward 03-29 02:00 -> 03:00, back 10-25 03:00 -> 02:00
NEW_YORK = "America/New_York"  # 2026: forward 03-08 02:00 -> 03:00, back 11-01 02:00 -> 01:00


def _local(spec: ScheduleSpec, after: datetime, n: int) -> list[str]:
    """The next n nominal times as local wall times with their offsets."""
    compiled = compile_spec(spec)
    zone = ZoneInfo(spec.timezone_name or "UTC")
    return [t.nominal.astimezone(zone).strftime("%m-%d %H:%M%z") for t in islice(compiled.times(after), n)]


def _cron(text: str, zone: str) -> ScheduleSpec:
    return ScheduleSpec(cron_string=[text], timezone_name=zone)


def _calendar(zone: str, hour: str, minute: str) -> ScheduleSpec:
    return ScheduleSpec(calendar=[CalendarSpec(hour=hour, minute=minute, second="0")], timezone_name=zone)


@pytest.mark.parametrize("make", [lambda z: _cron("30 2 * * *", z), lambda z: _calendar(z, "2", "30")])
def test_daily_skipped_time_fires_once_at_the_end_of_the_gap(make):
    berlin = make(BERLIN)
    assert _local(berlin, datetime(2026, 3, 27, tzinfo=UTC), 4) == [
        "03-27 02:30+0100",
        "03-28 02:30+0100",
        "03-29 03:00+0200",  # 02:30 does not exist: fired at 03:00, the first instant after the gap
        "03-30 02:30+0200",
    ]
    new_york = make(NEW_YORK)
    assert _local(new_york, datetime(2026, 3, 7, 12, tzinfo=UTC), 2) == [
        "03-08 03:00-0400",
        "03-09 02:30-0400",
    ]


@pytest.mark.parametrize("make", [lambda z, h: _cron(f"30 {h} * * *", z), lambda z, h: _calendar(z, h, "30")])
def test_daily_repeated_time_fires_once_at_its_first_occurrence(make):
    assert _local(make(BERLIN, "2"), datetime(2026, 10, 24, 12, tzinfo=UTC), 2) == [
        "10-25 02:30+0200",  # summer time's 02:30; winter time's 02:30 an hour later does not fire
        "10-26 02:30+0100",
    ]
    assert _local(make(NEW_YORK, "1"), datetime(2026, 10, 31, 12, tzinfo=UTC), 2) == [
        "11-01 01:30-0400",
        "11-02 01:30-0500",
    ]


@pytest.mark.parametrize("make", [lambda z: _cron("0 * * * *", z), lambda z: _calendar(z, "*", "0")])
def test_hourly_across_both_transitions(make):
    # Spring: the skipped 02:00 and the real 03:00 are the same instant, fired once.
    assert _local(make(BERLIN), datetime(2026, 3, 28, 23, 30, tzinfo=UTC), 3) == [
        "03-29 01:00+0100",
        "03-29 03:00+0200",
        "03-29 04:00+0200",
    ]
    assert _local(make(NEW_YORK), datetime(2026, 3, 8, 5, 30, tzinfo=UTC), 3) == [
        "03-08 01:00-0500",
        "03-08 03:00-0400",
        "03-08 04:00-0400",
    ]
    # Fall: each wall hour fires once, so the repeated hour is not fired a second time (two hours pass
    # from 02:00 summer time to 03:00 winter time; an `@every 1h` interval fires every real hour).
    assert _local(make(BERLIN), datetime(2026, 10, 24, 23, 30, tzinfo=UTC), 3) == [
        "10-25 02:00+0200",
        "10-25 03:00+0100",
        "10-25 04:00+0100",
    ]
    assert _local(make(NEW_YORK), datetime(2026, 11, 1, 4, 30, tzinfo=UTC), 3) == [
        "11-01 01:00-0400",
        "11-01 02:00-0500",
        "11-01 03:00-0500",
    ]


def test_several_skipped_times_fire_once_together():
    spec = _cron("*/15 2-3 * * *", BERLIN)
    assert _local(spec, datetime(2026, 3, 28, 23, tzinfo=UTC), 4) == [
        "03-29 03:00+0200",  # 02:00, 02:15, 02:30, 02:45 and 03:00 itself: one action
        "03-29 03:15+0200",
        "03-29 03:30+0200",
        "03-29 03:45+0200",
    ]


def test_a_start_inside_the_second_pass_does_not_fire_the_repeated_time():
    # The matching times are a fixed set of instants, whatever the search starts from.
    spec = _cron("30 2 * * *", BERLIN)
    inside = datetime(2026, 10, 25, 1, 10, tzinfo=UTC)  # 02:10 winter time, the second pass
    assert _local(spec, inside, 1) == ["10-26 02:30+0100"]


def test_exclusions_follow_the_same_rule():
    spec = _cron("*/30 * * * *", BERLIN)
    spec.exclude_calendar.append(CalendarSpec(hour="2", minute="30", second="0"))
    # An exclusion removes the instants it would fire at: the skipped 02:30 fires at the gap's end, so
    # the gap's end (which 02:00, 02:30 and 03:00 share) is excluded.
    assert _local(spec, datetime(2026, 3, 28, 23, 50, tzinfo=UTC), 3) == [
        "03-29 01:00+0100",
        "03-29 01:30+0100",
        "03-29 03:30+0200",
    ]
    only_skipped = _cron("*/30 * * * *", BERLIN)
    only_skipped.exclude_calendar.append(CalendarSpec(hour="2", minute="*", second="0"))
    only_skipped.exclude_calendar.append(CalendarSpec(hour="3", minute="0", second="0"))
    assert _local(only_skipped, datetime(2026, 3, 29, 0, 10, tzinfo=UTC), 2) == [
        "03-29 01:30+0100",
        "03-29 03:30+0200",
    ]
    fall = _cron("*/30 * * * *", BERLIN)
    fall.exclude_calendar.append(CalendarSpec(hour="2", minute="30", second="0"))
    assert _local(fall, datetime(2026, 10, 24, 23, 50, tzinfo=UTC), 3) == [
        "10-25 02:00+0200",
        "10-25 03:00+0100",  # the second pass fires nothing, excluded or not
        "10-25 03:30+0100",
    ]


@settings(max_examples=40, deadline=None)
@given(
    zone=st.sampled_from([BERLIN, NEW_YORK, "Australia/Lord_Howe", "Asia/Tehran", "UTC"]),
    minute=st.sampled_from(["0", "30", "*/20", "15,45"]),
    hour=st.sampled_from(["*", "1", "2", "1-3", "0"]),
    start=st.integers(min_value=0, max_value=400 * 24),
)
def test_each_wall_time_fires_at_most_once_and_times_increase(zone, minute, hour, start):
    spec = _cron(f"{minute} {hour} * * *", zone)
    after = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=start)
    times = [t.nominal for t in islice(compile_spec(spec).times(after), 30)]
    assert all(a < b for a, b in zip(times, times[1:], strict=False))
    walls = [t.astimezone(ZoneInfo(zone)).replace(tzinfo=None) for t in times]
    assert len(set(walls)) == len(walls)
    # Every time it fires is a matching wall time or the end of a gap that skipped one.
    compiled = compile_spec(spec)
    assert all(compiled.calendars[0].matches(t) for t in times)
