"""Calendar specs: parsing range strings and cron strings to structured calendars, and matching times.

The parsing follows Temporal's scheduler (service/worker/scheduler/calendar.go), and so does matching
away from daylight-saving transitions: a calendar matches a second when every field matches it in the
spec's time zone. At a transition Perdura's rule differs: a wall time that a spring-forward jump skips
fires once, at the first instant after the gap (several skipped times fire together, once), and a wall
time that a fall-back repeats fires once, at its first occurrence. Temporal never fires a skipped time,
and fires a repeated one twice or once depending on the zone (README, Schedules).
"""

from __future__ import annotations

import calendar as _calendar
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from temporalio.api.schedule.v1 import CalendarSpec, IntervalSpec, Range, StructuredCalendarSpec

MIN_YEAR = 2000
MAX_YEAR = 2100
MAX_COMMENT = 200

_MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_DAYS = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]
_PREDEFINED = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


class SpecError(ValueError):
    """A schedule spec that cannot be compiled; the message is Temporal's wording."""


# --- parsing --------------------------------------------------------------------------------------


def _parse_value(text: str, lo: int, hi: int, mode: str) -> int:
    lowered = text.lower()
    names = _MONTHS if mode == "month" else _DAYS if mode == "dow" else None
    if names is not None and len(text) >= (3 if mode == "month" else 2):
        for i, name in enumerate(names):
            if name.startswith(lowered):
                value = i + 1 if mode == "month" else i
                if value < lo or value > hi:
                    raise SpecError("out of range")
                return value
    if not re.fullmatch(r"[+-]?\d+", text):
        raise SpecError(f'strconv.Atoi: parsing "{text}": invalid syntax')
    value = int(text)
    if value < lo or value > hi:
        raise SpecError("out of range")
    return value


def make_ranges(text: str, field: str, default: str, lo: int, hi: int, mode: str = "int") -> list[Range]:
    """Parse `*`, `x`, `x-z`, `x-z/y`, `x/y` and comma lists of them into ranges (names per `mode`).

    Raises:
        SpecError: the text does not parse or a value is out of [lo, hi].
    """
    text = text.strip() or default
    if text == "*" and mode == "year":
        return []  # every year is the empty list
    ranges: list[Range] = []
    for part in text.split(","):
        step, has_step = 1, False
        slashes = part.count("/")
        if slashes > 1:
            raise SpecError(f"{field} has too many slashes")
        if slashes == 1:
            part, step_text = part.split("/", 1)
            if step_text == "":
                raise SpecError(f"{field} missing step value")
            if not re.fullmatch(r"[+-]?\d+", step_text):
                raise SpecError(f'strconv.Atoi: parsing "{step_text}": invalid syntax')
            step = int(step_text)
            if step < 1:
                raise SpecError(f"{field} has invalid Step")
            has_step = True
        start, end = lo, hi
        if part != "*":
            if "-" in part:
                if part.count("-") > 1:
                    raise SpecError(f"{field} has too many dashes")
                first, last = part.split("-", 1)
                try:
                    start = _parse_value(first, lo, hi, mode)
                except SpecError:
                    raise SpecError(f"{field} Start is not in range [{lo}-{hi}]") from None
                try:
                    end = _parse_value(last, start, hi, mode)
                except SpecError:
                    raise SpecError(f"{field} End is before Start or not in range [{lo}-{hi}]") from None
            else:
                try:
                    start = _parse_value(part, lo, hi, mode)
                except SpecError:
                    raise SpecError(f"{field} is not in range [{lo}-{hi}]") from None
                if not has_step:
                    end = start  # x/y runs to the end; a bare x is just x
        if mode == "dow" and end == 7:
            # 7 is Sunday too: fold it into 0, adding a separate 0 when the range cannot absorb it.
            if (7 - start) % step == 0 and (step > 1 or start > 1):
                ranges.append(Range(start=0))
                if start == 7:
                    continue
            end = 6
        ranges.append(Range(start=start, end=0 if start == end else end, step=0 if step == 1 else step))
    return ranges


def structured_from_calendar(cal: CalendarSpec) -> StructuredCalendarSpec:
    """A CalendarSpec (strings) as a StructuredCalendarSpec, with Temporal's defaults for empty fields.

    Raises:
        SpecError: every field's problem, joined by commas.
    """
    errors: list[str] = []

    def ranges(text: str, field: str, default: str, lo: int, hi: int, mode: str = "int") -> list[Range]:
        try:
            return make_ranges(text, field, default, lo, hi, mode)
        except SpecError as e:
            errors.append(str(e))
            return []

    out = StructuredCalendarSpec(
        second=ranges(cal.second, "Second", "0", 0, 59),
        minute=ranges(cal.minute, "Minute", "0", 0, 59),
        hour=ranges(cal.hour, "Hour", "0", 0, 23),
        day_of_week=ranges(cal.day_of_week, "DayOfWeek", "*", 0, 7, "dow"),
        day_of_month=ranges(cal.day_of_month, "DayOfMonth", "*", 1, 31),
        month=ranges(cal.month, "Month", "*", 1, 12, "month"),
        year=ranges(cal.year, "Year", "*", MIN_YEAR, MAX_YEAR, "year"),
        comment=cal.comment,
    )
    if errors:
        raise SpecError(", ".join(errors))
    return out


_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d)")


def parse_duration(text: str) -> timedelta:
    """Go's duration syntax plus days (`90m`, `1h30m`, `2d`), as Temporal's timestamp.ParseDuration.

    Raises:
        SpecError: not a duration.
    """
    rest = text.strip()
    if rest in ("0", ""):
        if rest == "":
            raise SpecError(f'time: invalid duration "{text}"')
        return timedelta(0)
    seconds = 0.0
    pos = 0
    while pos < len(rest):
        match = _DURATION.match(rest, pos)
        if match is None:
            raise SpecError(f'time: invalid duration "{text}"')
        seconds += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    return timedelta(seconds=seconds)


@dataclass(frozen=True, slots=True)
class CronParts:
    calendar: StructuredCalendarSpec | None
    interval: IntervalSpec | None
    timezone: str


def parse_cron(text: str) -> CronParts:
    """A cron string (5-7 fields, `@daily`-style macros, `@every 1h/15m`, `CRON_TZ=`, `# comment`).

    Raises:
        SpecError: Temporal's message for the problem.
    """
    text = text.strip()
    tz = ""
    if text.startswith(("TZ=", "CRON_TZ=")):
        if " " not in text:
            raise SpecError("CronString has time zone but missing fields")
        tz_part, text = text.split(" ", 1)
        tz = tz_part.split("=", 1)[1]
    text, _, comment = text.partition("#")
    text, comment = text.strip(), comment.strip()
    if text.startswith("@every"):
        if " " not in text:
            raise SpecError("CronString does not have interval after @every")
        every, _, phase = text.split(" ", 1)[1].partition("/")
        interval = IntervalSpec()
        interval.interval.FromTimedelta(parse_duration(every))
        if phase:
            interval.phase.FromTimedelta(parse_duration(phase))
        return CronParts(None, interval, "")
    fields = _PREDEFINED.get(text, text).split()
    cal = CalendarSpec(comment=comment)
    if len(fields) == 5:
        cal.minute, cal.hour, cal.day_of_month, cal.month, cal.day_of_week = fields
    elif len(fields) == 6:
        cal.minute, cal.hour, cal.day_of_month, cal.month, cal.day_of_week, cal.year = fields
    elif len(fields) == 7:
        (cal.second, cal.minute, cal.hour, cal.day_of_month, cal.month, cal.day_of_week, cal.year) = fields
    else:
        raise SpecError("CronString does not have 5-7 fields")
    return CronParts(structured_from_calendar(cal), None, tz)


def validate_structured(cal: StructuredCalendarSpec) -> None:
    """Raises SpecError when a structured calendar has values out of their field's range."""
    errors: list[str] = []

    def check(ranges: Iterable[Range], field: str, lo: int, hi: int) -> None:
        for r in ranges:
            if r.start < lo or r.start > hi:
                errors.append(f"{field} Start is not in range [{lo}-{hi}]")
            if r.end != 0 and (r.end < r.start or r.end > hi):
                errors.append(f"{field} End is before Start or not in range [{lo}-{hi}]")
            if r.step < 0:
                errors.append(f"{field} has invalid Step")

    check(cal.second, "Second", 0, 59)
    check(cal.minute, "Minute", 0, 59)
    check(cal.hour, "Hour", 0, 23)
    check(cal.day_of_month, "DayOfMonth", 1, 31)
    check(cal.month, "Month", 1, 12)
    check(cal.year, "Year", MIN_YEAR, MAX_YEAR)
    check(cal.day_of_week, "DayOfWeek", 0, 6)
    if len(cal.comment) > MAX_COMMENT:
        errors.append("comment is too long")
    if errors:
        raise SpecError("invalid calendar spec: " + ", ".join(errors))


# --- matching -------------------------------------------------------------------------------------


def _values(ranges: Sequence[Range]) -> frozenset[int]:
    out: set[int] = set()
    for r in ranges:
        step = r.step or 1
        end = max(r.end, r.start)
        out.update(range(r.start, end + 1, step))
    return frozenset(out)


def _instant(local: datetime, fold: int) -> datetime | None:
    """The UTC instant of a wall time, or None if the zone skips that wall time."""
    candidate = local.replace(fold=fold)
    utc = candidate.astimezone(UTC)
    back = utc.astimezone(local.tzinfo)
    if back.replace(tzinfo=None) != local.replace(tzinfo=None, fold=0):
        return None
    return utc


def _gap_end(local: datetime) -> datetime:
    """The first instant after the daylight-saving gap that skips the wall time `local`."""
    # fold=1 reads a skipped time with the offset after the jump (an instant before it), fold=0 with the
    # offset before it (an instant after it): the transition lies between, found to the second.
    lo = local.replace(fold=1).astimezone(UTC)
    hi = local.replace(fold=0).astimezone(UTC)
    if hi < lo:
        lo, hi = hi, lo
    before = lo.astimezone(local.tzinfo).utcoffset()
    while hi - lo > timedelta(seconds=1):
        mid = lo + (hi - lo) / 2
        mid = mid.replace(microsecond=0)
        if mid.astimezone(local.tzinfo).utcoffset() == before:
            lo = mid
        else:
            hi = mid
    return hi


def _instant_once(local: datetime) -> datetime:
    """The one instant Perdura's rule gives a wall time: its first occurrence, or the end of its gap."""
    utc = _instant(local, 0)
    return utc if utc is not None else _gap_end(local)


@dataclass(frozen=True, slots=True)
class CompiledCalendar:
    """A structured calendar with its field sets, in one time zone."""

    tz: ZoneInfo
    years: frozenset[int] | None
    months: frozenset[int]
    days: frozenset[int]
    weekdays: frozenset[int]
    hours: tuple[int, ...]
    minutes: tuple[int, ...]
    seconds: tuple[int, ...]

    @classmethod
    def compile(cls, cal: StructuredCalendarSpec, tz: ZoneInfo) -> CompiledCalendar:
        return cls(
            tz=tz,
            years=_values(cal.year) if len(cal.year) else None,
            months=_values(cal.month),
            days=_values(cal.day_of_month),
            weekdays=_values(cal.day_of_week),
            hours=tuple(sorted(_values(cal.hour))),
            minutes=tuple(sorted(_values(cal.minute))),
            seconds=tuple(sorted(_values(cal.second))),
        )

    def _date_matches(self, d: date) -> bool:
        return (
            (self.years is None or d.year in self.years)
            and d.month in self.months
            and d.day in self.days
            and (d.isoweekday() % 7) in self.weekdays
        )

    def _wall_matches(self, local: datetime) -> bool:
        return (
            self._date_matches(local.date())
            and local.hour in self.hours
            and local.minute in self.minutes
            and local.second in self.seconds
        )

    def matches(self, when: datetime) -> bool:
        """Whether `when` (a whole second) is one of this calendar's times (exclusions use this)."""
        local = when.astimezone(self.tz)
        if local.fold == 1:
            return False  # the second pass of a repeated hour: its wall times fired on the first
        if self._wall_matches(local):
            return True
        # The first instant after a gap stands for every skipped wall time before it.
        prev_wall = (when - timedelta(seconds=1)).astimezone(self.tz).replace(tzinfo=None, fold=0)
        wall = local.replace(tzinfo=None, fold=0)
        skipped = wall - prev_wall - timedelta(seconds=1)
        if skipped <= timedelta(0):
            return False
        return any(
            self._wall_matches((prev_wall + timedelta(seconds=i)).replace(tzinfo=self.tz))
            for i in range(1, int(skipped.total_seconds()) + 1)
        )

    def _first_in_hour(self, d: date, hour: int, after: datetime) -> datetime | None:
        # Wall times map to instants in order (a repeated time to its first pass, a skipped one to the
        # gap's end), so the first wall time whose instant is after `after` is the answer.
        for minute in self.minutes:
            for second in self.seconds:
                instant = _instant_once(
                    datetime(d.year, d.month, d.day, hour, minute, second, tzinfo=self.tz)
                )
                if instant > after:
                    return instant
        return None

    def next(self, after: datetime) -> datetime | None:
        """The first matching whole second strictly after `after` (UTC), or None before MAX_YEAR ends."""
        if not (self.hours and self.minutes and self.seconds and self.months and self.days):
            return None
        after = after.replace(microsecond=0)
        local_after = after.astimezone(self.tz)
        day = local_after.date() - timedelta(days=1)  # a fold can put the previous wall date after `after`
        while day.year <= MAX_YEAR:
            if self.years is not None and day.year not in self.years:
                day = date(day.year + 1, 1, 1)
                continue
            if day.month not in self.months:
                last = _calendar.monthrange(day.year, day.month)[1]
                day = date(day.year, day.month, last) + timedelta(days=1)
                continue
            if self._date_matches(day):
                for hour in self.hours:
                    if day == local_after.date() and hour < local_after.hour - 1:
                        continue
                    found = self._first_in_hour(day, hour, after)
                    if found is not None:
                        return found
            day += timedelta(days=1)
        return None
