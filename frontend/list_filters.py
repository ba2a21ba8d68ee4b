"""The workflows list's time ranges and columns: pure rules from the page's parameters to a list filter.

A time range is one more condition on StartTime or CloseTime, joined to the person's filter with AND
(before any ORDER BY), so the list, the status counts and a batch started from the list all read the
same runs. A relative range ("last 24 hours") is measured from `at`: the moment the first page was
read, carried by the paging links, so later pages keep the bounds the first page had.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

RANGES: dict[str, tuple[str, timedelta | None]] = {
    "": ("All time", None),
    "15m": ("Last 15 minutes", timedelta(minutes=15)),
    "1h": ("Last hour", timedelta(hours=1)),
    "24h": ("Last 24 hours", timedelta(hours=24)),
    "7d": ("Last 7 days", timedelta(days=7)),
    "30d": ("Last 30 days", timedelta(days=30)),
    "custom": ("Custom range", None),
}
TIME_FIELDS = {"StartTime": "Start time", "CloseTime": "Close time"}
_INPUT_FORMAT = "%Y-%m-%dT%H:%M"
"""An `<input type="datetime-local">` value (read as UTC: the console shows UTC everywhere)."""

COLUMNS: dict[str, str] = {
    "status": "Status",
    "workflow_id": "Workflow ID",
    "run_id": "Run ID",
    "type": "Type",
    "task_queue": "Task queue",
    "start": "Start",
    "close": "End",
    "duration": "Duration",
    "execution_time": "Execution time",
    "history_length": "History length",
}
"""The system columns a person may pick, in the order shown."""
DEFAULT_COLUMNS = ("status", "workflow_id", "run_id", "type", "task_queue", "start", "close", "duration")
ALWAYS = ("status", "workflow_id")
"""Shown whatever is picked: the status, and the run's link."""
CUSTOM_PREFIX = "sa:"
"""A custom search attribute's column: `sa:<name>`."""
MAX_COLUMNS = 30


class RangeError(ValueError):
    """A custom range whose bounds are not times, or end before they start."""


@dataclass(frozen=True, slots=True)
class TimeRange:
    key: str
    """A key of RANGES ('' for none)."""
    field: str
    """StartTime or CloseTime."""
    start: str = ""
    """A custom range's bounds, as the datetime-local inputs hold them (UTC)."""
    end: str = ""

    @property
    def label(self) -> str:
        return RANGES[self.key][0]

    @property
    def active(self) -> bool:
        return self.key != "" and (self.key != "custom" or bool(self.start or self.end))

    def params(self) -> dict[str, str]:
        """The page parameters that carry this range (none when it is off)."""
        if not self.active:
            return {}
        out = {"range": self.key, "time_field": self.field}
        if self.key == "custom":
            out |= {k: v for k, v in (("from", self.start), ("to", self.end)) if v}
        return out


def time_range(params: Mapping[str, str]) -> TimeRange:
    """The range the page's parameters ask for; unknown values mean none (a hand-edited URL)."""
    key = params.get("range", "")
    field = params.get("time_field", "StartTime")
    return TimeRange(
        key=key if key in RANGES else "",
        field=field if field in TIME_FIELDS else "StartTime",
        start=params.get("from", "")[:16] if key == "custom" else "",
        end=params.get("to", "")[:16] if key == "custom" else "",
    )


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _input_time(value: str) -> datetime:
    try:
        return datetime.strptime(value, _INPUT_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        raise RangeError(f"{value!r} is not a time (YYYY-MM-DDTHH:MM, UTC)") from None


def range_condition(shown: TimeRange, *, now: datetime) -> str:
    """The range as a list-filter condition ('' when off).

    Raises:
        RangeError: a custom bound is not a time, or the range ends before it starts.
    """
    if not shown.active:
        return ""
    span = RANGES[shown.key][1]
    if span is not None:
        return f'{shown.field} >= "{_iso(now - span)}"'
    start = _input_time(shown.start) if shown.start else None
    end = _input_time(shown.end) if shown.end else None
    if start and end:
        if end < start:
            raise RangeError("the range ends before it starts")
        return f'{shown.field} BETWEEN "{_iso(start)}" AND "{_iso(end)}"'
    if start:
        return f'{shown.field} >= "{_iso(start)}"'
    assert end is not None
    return f'{shown.field} <= "{_iso(end)}"'


def _order_by_at(query: str) -> int:
    """Where a trailing ORDER BY starts in `query` (outside quoted values), or len(query)."""
    quote = ""
    lowered = query.lower()
    i = 0
    while i < len(query):
        ch = query[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'`":
            quote = ch
        elif lowered.startswith("order", i) and (i == 0 or not query[i - 1].isalnum()):
            rest = lowered[i + 5 :].lstrip()
            if rest.startswith("by") and (len(rest) == 2 or not rest[2].isalnum()):
                return i
        i += 1
    return len(query)


def compose(query: str, condition: str) -> str:
    """`query` AND `condition`, keeping the query's ORDER BY last."""
    if not condition:
        return query
    cut = _order_by_at(query)
    where, order = query[:cut].strip(), query[cut:].strip()
    joined = f"({where}) AND {condition}" if where else condition
    return f"{joined} {order}" if order else joined


def columns_picked(picked: Iterable[str], custom: Iterable[str]) -> list[str]:
    """The columns to show, in the catalog's order then the custom attributes' (unknown ones dropped:
    an attribute removed from the namespace, a forged form)."""
    chosen = set(picked)
    custom_names = sorted(custom)
    shown = [c for c in COLUMNS if c in chosen or c in ALWAYS]
    shown += [CUSTOM_PREFIX + n for n in custom_names if CUSTOM_PREFIX + n in chosen]
    return shown[:MAX_COLUMNS]


def column_label(key: str) -> str:
    return key.removeprefix(CUSTOM_PREFIX) if key.startswith(CUSTOM_PREFIX) else COLUMNS.get(key, key)
