"""History events as the console lists them: a readable name, a one-line summary, the raw JSON, and the
compact view's groups (an activity's or timer's events as one row, as the Temporal UI's compact view).

Pure functions over protobuf events: no I/O, no HTML. Every string they return is tenant data to escape.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from google.protobuf.message import Message
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from frontend.codec import Encoded, encoded_payloads
from frontend.payloads import message_json

_CAMEL = re.compile(r"(?:^|_)([a-z0-9])")

CATEGORIES = {
    "workflow_execution": "workflow",
    "workflow_task": "task",
    "activity_task": "activity",
    "timer": "timer",
    "workflow_execution_signaled": "signal",
    "signal_external": "signal",
    "external_workflow_execution_signaled": "signal",
    "child_workflow": "child",
    "start_child_workflow": "child",
    "workflow_execution_update": "update",
    "marker": "marker",
    "request_cancel_external": "external",
    "external_workflow_execution_cancel": "external",
    "upsert_workflow_search_attributes": "attributes",
    "workflow_properties_modified": "attributes",
    "nexus": "nexus",
}


def event_name(event_type: int) -> str:
    """`EVENT_TYPE_ACTIVITY_TASK_SCHEDULED` -> `ActivityTaskScheduled`."""
    try:
        raw = EventType.Name(EventType.ValueType(event_type))
    except ValueError:
        return f"EventType{event_type}"
    return _CAMEL.sub(lambda m: m.group(1).upper(), raw.removeprefix("EVENT_TYPE_").lower())


def _attributes_field(event: HistoryEvent) -> str:
    """The name of the event's attributes field, e.g. `activity_task_scheduled_event_attributes`."""
    return event.WhichOneof("attributes") or ""


_PREFIXES = sorted(CATEGORIES.items(), key=lambda item: -len(item[0]))


def category(event: HistoryEvent) -> str:
    """What the event concerns (the history's colour band): workflow, task, activity, timer, signal..."""
    return _category_of(_attributes_field(event))


@functools.cache
def _category_of(attributes_field: str) -> str:
    # Cached by attributes field (a few dozen): the compact view and the timeline ask it of every event.
    name = attributes_field.removesuffix("_event_attributes")
    for prefix, kind in _PREFIXES:
        if name.startswith(prefix):
            return kind
    return "other"


def summary(event: HistoryEvent) -> str:
    """The one line a person scans for: the activity or signal name, a timer, a failure message."""
    name = _attributes_field(event)
    if not name:
        return ""
    attrs = getattr(event, name)
    parts: list[str] = []
    for path in (
        "workflow_type.name",
        "activity_type.name",
        "activity_id",
        "timer_id",
        "signal_name",
        "marker_name",
        "workflow_id",
        "accepted_request.input.name",
        "request.input.name",
        "reason",
        "failure.message",
    ):
        value = _dig(attrs, path)
        if value:
            parts.append(f"{path.split('.')[0].replace('_', ' ')}: {value}")
        if len(parts) >= 3:
            break
    timeout = _dig(attrs, "start_to_fire_timeout")
    if timeout:
        parts.append(f"fires after {timeout}")
    preview = _input_preview(attrs)
    if preview:
        parts.append(f"input: {preview}")
    return " · ".join(parts)


def _input_preview(attrs: Any) -> str:
    """A signal's or start's input on one line, cut at 80 characters."""
    if not _is_message_field(attrs, "input") or not attrs.HasField("input"):
        return ""
    from frontend.payloads import decode

    texts = []
    for payload in attrs.input.payloads:
        decoded = decode(payload)
        if decoded.kind == "json":
            texts.append(json.dumps(json.loads(decoded.text), ensure_ascii=False))
        else:
            texts.append("(binary)" if decoded.kind == "base64" else decoded.text)
    line = ", ".join(texts)
    return line if len(line) <= 80 else line[:79] + "…"


def _dig(message: Any, path: str) -> str:
    """The text at a dotted path of a message ('' when a message on the way is unset)."""
    current = message
    for part in path.split("."):
        if _is_message_field(current, part) and not current.HasField(part):
            return ""
        current = getattr(current, part, None)
        if current is None:
            return ""
    if hasattr(current, "ToTimedelta"):
        seconds = current.ToTimedelta().total_seconds()
        return f"{seconds:g}s" if seconds else ""
    return current if isinstance(current, str) else ""


def _is_message_field(message: object, name: str) -> bool:
    descriptor = getattr(message, "DESCRIPTOR", None)
    fields = descriptor.fields_by_name if descriptor is not None else {}
    found = fields.get(name)
    return found is not None and found.message_type is not None


_SUBJECTS = {
    "activity": ("Activity", "activity_type.name"),
    "signal": ("Signal", "signal_name"),
    "timer": ("Timer", "timer_id"),
    "child": ("Child workflow", "workflow_type.name"),
    "update": ("Update", "accepted_request.input.name"),
    "marker": ("Marker", "marker_name"),
}


def subject(event: HistoryEvent) -> str:
    """What the compact view calls the thing an event opens: 'Activity: Charge', 'Signal: approve'."""
    kind = category(event)
    name = _attributes_field(event)
    if kind not in _SUBJECTS or not name:
        return ""
    label, path = _SUBJECTS[kind]
    value = _dig(getattr(event, name), path)
    return f"{label}: {value}" if value else label


@dataclass(frozen=True, slots=True)
class EventRow:
    event_id: int
    name: str
    category: str
    time: datetime | None
    summary: str
    subject: str
    raw: str
    """The event as pretty-printed JSON (payloads decoded)."""
    attributes: list[tuple[str, str]] = field(default_factory=list)
    """The event's attributes, each value as text (JSON for structures)."""
    encoded: list[Encoded] = field(default_factory=list)
    """Payloads in the event that only the namespace's codec server can decode (signal and update
    arguments, results, failure details a client's codec encoded)."""


def event_row(event: HistoryEvent) -> EventRow:
    as_json = message_json(event)
    name = _attributes_field(event)
    attributes = as_json.get(_json_name(name), {}) if name else {}
    return EventRow(
        event_id=event.event_id,
        name=event_name(event.event_type),
        category=category(event),
        time=event.event_time.ToDatetime(tzinfo=UTC) if event.HasField("event_time") else None,
        summary=summary(event),
        subject=subject(event),
        raw=json.dumps(as_json, indent=2, ensure_ascii=False),
        attributes=[
            (key, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
            for key, value in (attributes.items() if isinstance(attributes, dict) else [])
        ],
        encoded=encoded_payloads(getattr(event, name)) if name else [],
    )


def _json_name(field_name: str) -> str:
    head, *rest = field_name.split("_")
    return head + "".join(p.title() for p in rest)


# --- compact view ----------------------------------------------------------------------------------

_GROUP_LINKS = ("scheduled_event_id", "initiated_event_id", "accepted_event_id", "started_event_id")


def group_key(event: HistoryEvent) -> int:
    """The event that opened the thing this event belongs to: an activity's scheduled event, a
    timer's started event, a child's or external request's initiated event, an update's accepted event;
    the event itself otherwise."""
    name = _attributes_field(event)
    if not name:
        return event.event_id
    attrs = getattr(event, name)
    for link in _group_links(name, attrs):
        value = getattr(attrs, link)
        if value:
            return int(value)
    return event.event_id


_LINKS_OF: dict[str, tuple[str, ...]] = {}


def _group_links(name: str, attrs: Message) -> tuple[str, ...]:
    """The link fields an attributes message has, looked up once per message type."""
    found = _LINKS_OF.get(name)
    if found is None:
        fields = attrs.DESCRIPTOR.fields_by_name
        found = _LINKS_OF[name] = tuple(link for link in _GROUP_LINKS if link in fields)
    return found


@dataclass(slots=True)
class Group:
    """One row of the compact view: what happened to one activity, timer, child, signal or update."""

    first: EventRow
    last: EventRow
    events: list[EventRow]

    @property
    def title(self) -> str:
        return self.first.subject or self.first.name

    @property
    def detail(self) -> str:
        """The closing event's line when it says more (a failure message), else the opening one's, less
        what the title already says."""
        line = self.last.summary if self.last is not self.first and self.last.summary else self.first.summary
        named = self.first.subject.partition(": ")[2]
        parts = [p for p in line.split(" · ") if not (named and p.endswith(f": {named}"))]
        return " · ".join(parts)

    @property
    def state(self) -> str:
        """The last event's name without the thing's name: 'Completed', 'Fired', 'TimedOut'..."""
        for prefix in (
            "ActivityTask",
            "Timer",
            "ChildWorkflowExecution",
            "StartChildWorkflowExecution",
            "WorkflowExecutionUpdate",
            "WorkflowExecution",
            "SignalExternalWorkflowExecution",
            "ExternalWorkflowExecution",
            "RequestCancelExternalWorkflowExecution",
        ):
            if self.last.name.startswith(prefix):
                return self.last.name.removeprefix(prefix) or self.last.name
        return self.last.name


def compact_groups(events: Iterable[HistoryEvent]) -> list[list[HistoryEvent]]:
    """The run's history as the compact view's groups of events, in the order each group began; workflow
    tasks are left out (the SDK's bookkeeping; the full view still shows them). Cheap: nothing is
    rendered here, so a 10,000-event history is grouped quickly and only the page shown is rendered."""
    groups: dict[int, list[HistoryEvent]] = {}
    ordered: list[list[HistoryEvent]] = []
    for event in events:
        if category(event) == "task":
            continue
        group = groups.get(group_key(event))
        if group is None:
            group = [event]
            groups[event.event_id] = group
            ordered.append(group)
        else:
            group.append(event)
    return ordered


def group_rows(events: list[HistoryEvent]) -> Group:
    """One compact group, rendered."""
    rows = [event_row(e) for e in events]
    return Group(first=rows[0], last=rows[-1], events=rows)
