"""Schedule specs: canonical form (cron and calendar strings compiled to structured calendars) and the
next matching times, with start/end bounds, exclusions and deterministic jitter (Temporal's spec.go).
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from temporalio.api.schedule.v1 import IntervalSpec, ScheduleSpec, StructuredCalendarSpec

from engine.schedules.calendar import (
    MAX_YEAR,
    CompiledCalendar,
    SpecError,
    parse_cron,
    structured_from_calendar,
    validate_structured,
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_UNSET = "\0unset"


def _validate_interval(interval: IntervalSpec) -> None:
    every = interval.interval.ToTimedelta()
    phase = interval.phase.ToTimedelta()
    if every < timedelta(seconds=1):
        raise SpecError("interval is too small")
    if phase < timedelta(0):
        raise SpecError("phase is negative")
    if phase >= every:
        raise SpecError("phase cannot be greater than Interval")


def canonicalize(spec: ScheduleSpec) -> ScheduleSpec:
    """The spec with calendars, exclusions and cron strings as structured calendars and intervals.

    Idempotent. Raises:
        SpecError: an unparseable field, a bad range, a too small interval or conflicting time zones.
    """
    out = ScheduleSpec()
    out.CopyFrom(spec)
    for cal in spec.calendar:
        out.structured_calendar.append(structured_from_calendar(cal))
    del out.calendar[:]
    for cal in spec.exclude_calendar:
        out.exclude_structured_calendar.append(structured_from_calendar(cal))
    del out.exclude_calendar[:]
    cron_tz = _UNSET
    for text in spec.cron_string:
        parts = parse_cron(text)
        if cron_tz != _UNSET and parts.timezone != cron_tz:
            raise SpecError("conflicting timezone names")
        cron_tz = parts.timezone
        if parts.calendar is not None:
            out.structured_calendar.append(parts.calendar)
        if parts.interval is not None:
            out.interval.append(parts.interval)
    del out.cron_string[:]
    if cron_tz not in (_UNSET, ""):
        if (out.timezone_name and out.timezone_name != cron_tz) or out.timezone_data:
            raise SpecError("conflicting timezone names")
        out.timezone_name = cron_tz
    for structured in out.structured_calendar:
        validate_structured(structured)
    for interval in out.interval:
        _validate_interval(interval)
    return out


def clean(spec: ScheduleSpec) -> None:
    """Fill range defaults in place (end at least start, step at least 1), as Temporal's describe shows them."""

    def fix(cal: StructuredCalendarSpec) -> None:
        for ranges in (
            cal.second,
            cal.minute,
            cal.hour,
            cal.day_of_month,
            cal.month,
            cal.year,
            cal.day_of_week,
        ):
            for r in ranges:
                if r.end < r.start:
                    r.end = r.start
                if r.step == 0:
                    r.step = 1

    for cal in spec.structured_calendar:
        fix(cal)
    for cal in spec.exclude_structured_calendar:
        fix(cal)


def load_zone(spec: ScheduleSpec) -> ZoneInfo:
    """The spec's time zone (UTC when unnamed).

    Raises:
        SpecError: an unknown zone name or unreadable zone data.
    """
    name = spec.timezone_name
    try:
        if spec.timezone_data:
            return ZoneInfo.from_file(io.BytesIO(spec.timezone_data), key=name or "custom")
        if name in ("", "UTC", "Local"):
            return ZoneInfo("UTC")
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise SpecError(f"unknown time zone {name}") from None


@dataclass(frozen=True, slots=True)
class NextTime:
    nominal: datetime
    """The matching time before jitter: the one named in the started workflow's id."""
    actual: datetime
    """The nominal time plus jitter: when the action happens."""


class CompiledSpec:
    """A canonical spec ready to answer "what is the next time after t"."""

    def __init__(self, spec: ScheduleSpec) -> None:
        self.spec = canonicalize(spec)
        tz = load_zone(self.spec)
        self.calendars = [CompiledCalendar.compile(c, tz) for c in self.spec.structured_calendar]
        self.excludes = [CompiledCalendar.compile(c, tz) for c in self.spec.exclude_structured_calendar]
        self.intervals = [
            (
                max(int(i.interval.ToTimedelta().total_seconds()), 1),
                max(int(i.phase.ToTimedelta().total_seconds()), 0),
            )
            for i in self.spec.interval
        ]
        self.start = self.spec.start_time.ToDatetime(UTC) if self.spec.HasField("start_time") else None
        self.end = self.spec.end_time.ToDatetime(UTC) if self.spec.HasField("end_time") else None
        self.jitter = self.spec.jitter.ToTimedelta() if self.spec.HasField("jitter") else timedelta(0)

    def _raw_next(self, after: datetime) -> datetime | None:
        best: datetime | None = None
        for cal in self.calendars:
            found = cal.next(after)
            if found is not None and (best is None or found < best):
                best = found
        ts = int((after - _EPOCH).total_seconds() // 1)
        for every, phase in self.intervals:
            try:
                found = _EPOCH + timedelta(seconds=((ts - phase) // every + 1) * every + phase)
            except OverflowError:
                continue  # past the calendar's end (a start time near 9999 and a 100-year interval): no time
            if best is None or found < best:
                best = found
        return best

    def _excluded(self, when: datetime) -> bool:
        return any(cal.matches(when) for cal in self.excludes)

    def next_time(self, after: datetime, *, seed: str = "") -> NextTime | None:
        """The first action time strictly after `after`, or None when the schedule has no more."""
        if self.start is not None and self.start - after > timedelta(seconds=1):
            # Compared first: a start time at the calendar's very beginning has no second before it.
            after = self.start - timedelta(seconds=1)
        nominal: datetime | None = None
        for _ in range(100_000):
            nominal = self._raw_next(after)
            if nominal is None or (self.end is not None and nominal > self.end) or nominal.year > MAX_YEAR:
                return None
            if not self._excluded(nominal):
                break
            after = nominal
        else:
            raise SpecError("the schedule calendar specification has too many exclusions")
        assert nominal is not None
        max_jitter = self.jitter
        following = self._raw_next(nominal)
        if following is not None:
            max_jitter = min(max_jitter, following - nominal)
        return NextTime(nominal=nominal, actual=nominal + jitter(seed, nominal, max_jitter))

    def times(self, after: datetime, *, seed: str = "") -> Iterator[NextTime]:
        """Successive action times after `after` (each search starts from the previous actual time)."""
        while True:
            found = self.next_time(after, seed=seed)
            if found is None:
                return
            yield found
            after = found.actual


def jitter(seed: str, nominal: datetime, max_jitter: timedelta) -> timedelta:
    """A deterministic offset in [0, max_jitter), whole milliseconds, from the nominal time and a seed."""
    ms = int(max_jitter.total_seconds() * 1000)
    if ms <= 0:
        return timedelta(0)
    digest = hashlib.blake2b(f"{nominal.isoformat()}|{seed}".encode(), digest_size=4).digest()
    fp = int.from_bytes(digest, "big")
    return timedelta(milliseconds=(fp * min(ms, 2**32 - 1)) >> 32)


def compile_spec(spec: ScheduleSpec) -> CompiledSpec:
    """Raises SpecError with Temporal's wording when the spec is invalid."""
    return CompiledSpec(spec)
