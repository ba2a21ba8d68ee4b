"""Small formatting rules the pages share: statuses, times, durations, search attributes and memo."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.common.v1 import Memo, SearchAttributes

from frontend.payloads import decode
from visibility.search_attributes import STATUS_BY_VALUE, STATUS_NAMES

STATUSES = [name for name in STATUS_NAMES if name != "Paused"]
"""The status chips of the list, in Temporal's order."""


def status_name(value: int) -> str:
    return STATUS_BY_VALUE.get(value, "Unspecified")


def when(stamp: Timestamp, present: bool = True) -> datetime | None:
    """A protobuf timestamp as an aware datetime; None when unset (`present` is the message's HasField)."""
    if not present or (stamp.seconds == 0 and stamp.nanos == 0):
        return None
    return stamp.ToDatetime(tzinfo=UTC)


def span(delta: timedelta | None) -> str:
    """'1h 2m 3s', '4.2s', '12ms': how the Temporal UI writes durations."""
    if delta is None:
        return ""
    total = delta.total_seconds()
    if total < 1:
        return f"{round(total * 1000)}ms"
    if total < 60:
        return f"{total:.1f}s".replace(".0s", "s")
    seconds = int(total)
    days, seconds = divmod(seconds, 86400)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    parts = [f"{days}d" if days else "", f"{hours}h" if hours else "", f"{minutes}m" if minutes else ""]
    parts.append(f"{seconds}s" if seconds else "")
    return " ".join(p for p in parts if p)


def duration(value: Duration) -> str:
    return span(value.ToTimedelta()) if value.seconds or value.nanos else ""


def search_attributes(attrs: SearchAttributes) -> list[tuple[str, str]]:
    """Each attribute's name and value as text (JSON values shown compactly), by name."""
    shown = []
    for name in sorted(attrs.indexed_fields):
        decoded = decode(attrs.indexed_fields[name])
        text = decoded.text
        if decoded.kind == "json":
            text = json.dumps(json.loads(text), ensure_ascii=False)
        shown.append((name, text))
    return shown


def memo(value: Memo) -> list[tuple[str, str]]:
    """Each memo field's name and decoded value (JSON pretty-printed, binary as base64), by name."""
    return [(name, decode(value.fields[name]).text) for name in sorted(value.fields)]


def pending_state(value: int) -> str:
    """`PENDING_ACTIVITY_STATE_STARTED` -> `Started`."""
    from temporalio.api.enums.v1 import PendingActivityState

    try:
        return (
            PendingActivityState.Name(PendingActivityState.ValueType(value))
            .removeprefix("PENDING_ACTIVITY_STATE_")
            .replace("_", " ")
            .title()
        )
    except ValueError:
        return str(value)
