"""Schedule specs: parsing, canonical form and next matching times (Temporal's calendar and interval rules)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from temporalio.api.schedule.v1 import CalendarSpec, IntervalSpec, Range, ScheduleSpec, StructuredCalendarSpec

from engine.schedules.calendar import SpecError, make_ranges, parse_cron
from engine.schedules.spec import clean, compile_spec, jitter

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _times(spec: ScheduleSpec, after: datetime, n: int) -> list[str]:
    compiled = compile_spec(spec)
    out = []
    for found in compiled.times(after):
        out.append(found.nominal.strftime("%Y-%m-%dT%H:%M:%S%z"))
        if len(out) == n:
            break
    return out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("*", [Range(start=0, end=59)]),
        ("5", [Range(start=5)]),
        ("1-5/2,8", [Range(start=1, end=5, step=2), Range(start=8)]),
        ("3/5", [Range(start=3, end=59, step=5)]),
    ],
)
def test_ranges(text, expected):
    assert make_ranges(text, "Minute", "0", 0, 59) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mon-fri", [Range(start=1, end=5)]),
        ("3-7", [Range(start=0), Range(start=3, end=6)]),
        ("1-7", [Range(start=1, end=6)]),
        ("7", [Range(start=0)]),
        ("Su", [Range(start=0)]),
    ],
)
def test_day_of_week_names_and_seven_is_sunday(text, expected):
    assert make_ranges(text, "DayOfWeek", "*", 0, 7, "dow") == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1/2/3", "Minute has too many slashes"),
        ("1-2-3", "Minute has too many dashes"),
        ("5/", "Minute missing step value"),
        ("5/0", "Minute has invalid Step"),
        ("70", "Minute is not in range [0-59]"),
        ("50-10", "Minute End is before Start or not in range [0-59]"),
    ],
)
def test_range_errors(text, message):
    with pytest.raises(SpecError) as info:
        make_ranges(text, "Minute", "0", 0, 59)
    assert str(info.value) == message


def test_cron_compiles_to_a_calendar_like_temporal():
    parts = parse_cron("0 12 * * MON # noon")
    assert parts.calendar == StructuredCalendarSpec(
        second=[Range(start=0)],
        minute=[Range(start=0)],
        hour=[Range(start=12)],
        day_of_month=[Range(start=1, end=31)],
        month=[Range(start=1, end=12)],
        day_of_week=[Range(start=1)],
        comment="noon",
    )
    every = parse_cron("@every 2h/30m")
    assert every.interval is not None
    assert every.interval.interval.ToTimedelta() == timedelta(hours=2)
    assert every.interval.phase.ToTimedelta() == timedelta(minutes=30)
    assert parse_cron("CRON_TZ=Asia/Tokyo @daily").timezone == "Asia/Tokyo"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (ScheduleSpec(cron_string=["* * *"]), "CronString does not have 5-7 fields"),
        (ScheduleSpec(cron_string=["TZ=UTC"]), "CronString has time zone but missing fields"),
        (ScheduleSpec(cron_string=["TZ=UTC * * * * *", "* * * * *"]), "conflicting timezone names"),
        (
            ScheduleSpec(interval=[IntervalSpec(interval={"seconds": 10}, phase={"seconds": 10})]),
            "phase cannot",
        ),
        (ScheduleSpec(structured_calendar=[StructuredCalendarSpec(hour=[Range(start=24)])]), "Hour Start"),
        (ScheduleSpec(timezone_name="Nowhere/Land"), "unknown time zone Nowhere/Land"),
    ],
)
def test_invalid_specs(spec, message):
    with pytest.raises(SpecError, match=message):
        compile_spec(spec)


def test_canonical_form_is_idempotent_and_clean_fills_defaults():
    spec = compile_spec(
        ScheduleSpec(calendar=[CalendarSpec(hour="4-5", comment="c")], cron_string=["@hourly"])
    ).spec
    assert not spec.calendar
    assert not spec.cron_string
    assert compile_spec(spec).spec == spec
    clean(spec)
    assert spec.structured_calendar[0].second[0] == Range(start=0, end=0, step=1)


def test_interval_with_phase():
    spec = ScheduleSpec(interval=[IntervalSpec(interval={"seconds": 3600}, phase={"seconds": 300})])
    assert _times(spec, T0, 2) == ["2026-01-01T00:05:00+0000", "2026-01-01T01:05:00+0000"]


def test_calendar_in_a_time_zone_across_daylight_saving():
    # New York falls back on 2026-11-01: 01:30 happens twice and fires once; springs forward on
    # 2026-03-08: 02:30 never happens and fires at 03:00 (tests/unit/test_schedule_dst.py has the rule).
    fall = ScheduleSpec(cron_string=["30 1 * * *"], timezone_name="America/New_York")
    assert _times(fall, datetime(2026, 11, 1, tzinfo=UTC), 2) == [
        "2026-11-01T05:30:00+0000",
        "2026-11-02T06:30:00+0000",
    ]
    spring = ScheduleSpec(cron_string=["CRON_TZ=America/New_York 30 2 * * *"])
    assert _times(spring, datetime(2026, 3, 7, tzinfo=UTC), 3) == [
        "2026-03-07T07:30:00+0000",
        "2026-03-08T07:00:00+0000",
        "2026-03-09T06:30:00+0000",
    ]


def test_exclusions_start_and_end():
    spec = ScheduleSpec(
        cron_string=["0 0 * * *"],
        exclude_calendar=[CalendarSpec(day_of_week="sat,sun", hour="*", minute="*", second="*")],
    )
    spec.start_time.FromDatetime(datetime(2026, 1, 2, tzinfo=UTC))
    spec.end_time.FromDatetime(datetime(2026, 1, 7, tzinfo=UTC))
    # 2026-01-03 and 04 are a weekend; the start time itself matches (inclusive), the end bounds it.
    assert _times(spec, T0, 10) == [
        "2026-01-02T00:00:00+0000",
        "2026-01-05T00:00:00+0000",
        "2026-01-06T00:00:00+0000",
        "2026-01-07T00:00:00+0000",
    ]


def test_jitter_stays_before_the_next_time():
    spec = ScheduleSpec(interval=[IntervalSpec(interval={"seconds": 60})], jitter={"seconds": 3600})
    compiled = compile_spec(spec)
    for found in list(zip(range(20), compiled.times(T0, seed="ns-sched"), strict=False)):
        _, t = found
        assert t.nominal <= t.actual < t.nominal + timedelta(seconds=60)
    assert jitter("a", T0, timedelta(seconds=10)) == jitter("a", T0, timedelta(seconds=10))


def _brute_next(cal: StructuredCalendarSpec, after: datetime) -> datetime | None:
    compiled = compile_spec(ScheduleSpec(structured_calendar=[cal])).calendars[0]
    t = after.replace(microsecond=0) + timedelta(seconds=1)
    for _ in range(3 * 86400):
        if compiled.matches(t):
            return t
        t += timedelta(seconds=1)
    return None


_small = st.lists(st.integers(0, 59), min_size=1, max_size=3)


@settings(max_examples=40, deadline=None)
@given(
    seconds=_small,
    minutes=_small,
    hours=st.lists(st.integers(0, 23), min_size=1, max_size=3),
    offset=st.integers(0, 2 * 86400),
)
def test_next_calendar_time_is_the_first_match(seconds, minutes, hours, offset):
    """The computed next time matches the calendar and no earlier second after `after` does."""
    cal = StructuredCalendarSpec(
        second=[Range(start=s) for s in seconds],
        minute=[Range(start=m) for m in minutes],
        hour=[Range(start=h) for h in hours],
        day_of_month=[Range(start=1, end=31)],
        month=[Range(start=1, end=12)],
        day_of_week=[Range(start=0, end=6)],
    )
    after = T0 + timedelta(seconds=offset)
    found = compile_spec(ScheduleSpec(structured_calendar=[cal])).next_time(after)
    assert found is not None
    assert found.nominal == _brute_next(cal, after)


@settings(max_examples=50, deadline=None)
@given(every=st.integers(1, 100_000), phase_ratio=st.floats(0, 0.99), offset=st.integers(0, 10**7))
def test_interval_times_are_aligned_and_strictly_after(every, phase_ratio, offset):
    phase = int(every * phase_ratio)
    spec = ScheduleSpec(interval=[IntervalSpec(interval={"seconds": every}, phase={"seconds": phase})])
    after = T0 + timedelta(seconds=offset)
    found = compile_spec(spec).next_time(after)
    assert found is not None
    assert after < found.nominal <= after + timedelta(seconds=every)
    assert (int(found.nominal.timestamp()) - phase) % every == 0


def test_specs_at_the_calendars_edges_have_no_time_rather_than_an_overflow():
    """A 100-year interval (the cap of every duration) from a start near 9999, and a start on 0001-01-01,
    overflowed datetime in CreateSchedule (INTERNAL); the real server accepts both."""
    from google.protobuf.duration_pb2 import Duration
    from google.protobuf.timestamp_pb2 import Timestamp

    century = Duration(seconds=3_153_600_000)
    late = ScheduleSpec(
        interval=[IntervalSpec(interval=century)], start_time=Timestamp(seconds=253402300799 - 1000)
    )
    assert compile_spec(late).next_time(datetime(2026, 1, 1, tzinfo=UTC)) is None
    early = ScheduleSpec(
        interval=[IntervalSpec(interval=Duration(seconds=1))], start_time=Timestamp(seconds=-62135596800)
    )
    found = compile_spec(early).next_time(datetime(2026, 1, 1, tzinfo=UTC))
    assert found is not None
    assert found.nominal == datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert compile_spec(early).next_time(datetime(1, 1, 1, tzinfo=UTC)).nominal.year == 1
