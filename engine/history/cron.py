"""Cron schedules on workflow starts: when the next run of a cron chain begins (parsing by cronsim)."""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_EVERY = re.compile(r"^@every\s+((?:\d+(?:\.\d+)?(?:h|m|s|ms))+)$")
_UNIT = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


class CronError(ValueError):
    """A cron schedule that cannot be understood."""


def _parse(schedule: str) -> tuple[str, ZoneInfo | None]:
    spec = schedule.strip()
    zone = None
    match = re.match(r"^(?:CRON_TZ|TZ)=(\S+)\s+(.*)$", spec)
    if match:
        try:
            zone = ZoneInfo(match.group(1))
        except (ZoneInfoNotFoundError, ValueError):
            raise CronError(f"unknown time zone {match.group(1)!r} in cron schedule") from None
        spec = match.group(2).strip()
    return _MACROS.get(spec, spec), zone


def validate(schedule: str) -> None:
    """Raises CronError when `schedule` is not a cron expression Temporal would take."""
    next_backoff(schedule, datetime(2000, 1, 1, tzinfo=ZoneInfo("UTC")))


def next_backoff(schedule: str, now: datetime) -> float:
    """Seconds from `now` to the schedule's next time (whole seconds, as Temporal schedules them)."""
    spec, zone = _parse(schedule)
    every = _EVERY.match(spec)
    if every:
        seconds = sum(float(n) * _SECONDS[u] for n, u in _UNIT.findall(every.group(1)))
        if seconds <= 0:
            raise CronError("@every needs a positive interval")
        return seconds
    if len(spec.split()) != 5:
        raise CronError(
            f"invalid cron schedule {schedule!r}: expected five fields or a macro such as @hourly"
        )
    start = now.astimezone(zone) if zone else now
    try:
        upcoming = next(CronSim(spec, start.replace(microsecond=0)))
    except (CronSimError, StopIteration) as e:
        raise CronError(f"invalid cron schedule {schedule!r}: {e}") from None
    return max((upcoming - now).total_seconds(), 0.0)
