"""The run page's timeline: a run's activities, timers, children, signals and updates as bars over time.

`bars` is a pure function from the history events (and DescribeWorkflowExecution's pending activities)
to bars; `layout` places a page of them on a time axis as percentages, which the template draws as SVG
(no inline script or style: positions are SVG attributes, colours come from classes).

Retries are visible although the history does not list attempts (the server retries an activity in its
mutable state and writes ActivityTaskStarted only for the last attempt, carrying its number and the
previous attempt's failure): an activity retried before its last attempt gets a "retries" segment from
its scheduling to the last attempt's start. A pending activity's bar runs to `now`, with its attempt,
last failure and the backoff before its next attempt.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflow.v1 import PendingActivityInfo

from frontend.history import subject

E = EventType

OPENS: dict[int, str] = {
    E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED: "workflow",
    E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: "activity",
    E.EVENT_TYPE_TIMER_STARTED: "timer",
    E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED: "child",
    E.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED: "signal",
    E.EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED: "external",
    E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED: "update",
}
"""Events that open a bar, and the bar's kind."""

STARTS = {E.EVENT_TYPE_ACTIVITY_TASK_STARTED, E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED}
"""Events that mark the bar's work as begun (the end of its wait on a queue)."""

CLOSES: dict[int, str] = {
    E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: "Completed",
    E.EVENT_TYPE_ACTIVITY_TASK_FAILED: "Failed",
    E.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: "TimedOut",
    E.EVENT_TYPE_ACTIVITY_TASK_CANCELED: "Canceled",
    E.EVENT_TYPE_TIMER_FIRED: "Fired",
    E.EVENT_TYPE_TIMER_CANCELED: "Canceled",
    E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_FAILED: "Failed",
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED: "Completed",
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED: "Failed",
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED: "Canceled",
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TIMED_OUT: "TimedOut",
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED: "Terminated",
    E.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_SIGNALED: "Completed",
    E.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED: "Failed",
    E.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_CANCEL_REQUESTED: "Completed",
    E.EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_FAILED: "Failed",
    E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED: "Completed",
    E.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED: "Completed",
    E.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED: "Failed",
    E.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT: "TimedOut",
    E.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED: "Canceled",
    E.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED: "Terminated",
    E.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW: "ContinuedAsNew",
}
"""Events that close a bar, and the state they leave it in."""

WORKFLOW_CLOSES = {
    E.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
    E.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
    E.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
    E.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
    E.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
    E.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
}

POINTS: dict[int, tuple[str, str]] = {
    E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED: ("signal", "Received"),
    E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ADMITTED: ("update", "Admitted"),
    E.EVENT_TYPE_MARKER_RECORDED: ("marker", "Recorded"),
    E.EVENT_TYPE_WORKFLOW_TASK_FAILED: ("task", "Failed"),
    E.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT: ("task", "TimedOut"),
}
"""Events that are an instant of their own (a row with a mark, not a bar)."""

NOTES: dict[int, str] = {
    E.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED: "CancelRequested",
    E.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED: "CancelRequested",
}
"""Events that change an open bar's state without closing it."""

_LINKS = ("scheduled_event_id", "initiated_event_id", "accepted_event_id", "started_event_id")
_POINT_LABELS = {"task": "Workflow task"}

PENDING_STATES = {
    PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED: "Scheduled",
    PendingActivityState.PENDING_ACTIVITY_STATE_STARTED: "Running",
    PendingActivityState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED: "CancelRequested",
    PendingActivityState.PENDING_ACTIVITY_STATE_PAUSED: "Paused",
    PendingActivityState.PENDING_ACTIVITY_STATE_PAUSE_REQUESTED: "Paused",
}


@dataclass(frozen=True, slots=True)
class Segment:
    """A stretch of a bar: waiting on its queue, earlier attempts, the backoff before the next one, the
    (last) attempt itself."""

    kind: str
    """`wait`, `retries`, `backoff` or `run`."""
    start: datetime
    end: datetime | None
    """None: still going (drawn to now)."""
    label: str


def _dt(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _seconds(event: HistoryEvent) -> float:
    stamp = event.event_time
    return stamp.seconds + stamp.nanos * 1e-9


@dataclass(slots=True, eq=False)
class Bar:
    """One row of the timeline. Cheap to make: it holds the events that shape it, and its times, label,
    failure message and child link are read from them only when asked (only the rows shown are)."""

    event_id: int
    """The event that opened it (the compact history's group id)."""
    kind: str
    """`workflow`, `activity`, `timer`, `child`, `signal`, `external`, `update`, `marker` or `task`."""
    opening: HistoryEvent
    state: str = "Scheduled"
    attempt: int = 1
    point: bool = False
    said: HistoryEvent | None = None
    """The closing event (or the point's own), whose failure says what went wrong."""
    started_event: HistoryEvent | None = None
    pending_detail: str = ""
    """The pending activity's last failure (newer than any event's)."""
    pending_started: float | None = None
    """When the pending activity's running attempt started (epoch seconds)."""
    backoff: tuple[float, str] | None = None
    """A pending activity between attempts: when its last attempt ended, and what comes next."""

    @property
    def label(self) -> str:
        return _label(self.opening, self.kind)

    @property
    def start(self) -> datetime:
        return _dt(_seconds(self.opening))

    @property
    def end(self) -> datetime | None:
        return _dt(_seconds(self.said)) if self.said is not None else None

    @property
    def started(self) -> datetime | None:
        if self.backoff is not None:
            return None
        if self.pending_started is not None:
            return _dt(self.pending_started)
        return _dt(_seconds(self.started_event)) if self.started_event is not None else None

    @property
    def open(self) -> bool:
        return self.said is None and not self.point

    @property
    def detail(self) -> str:
        """A failure message: the pending attempt's, the closing event's, or the last attempt's."""
        if self.pending_detail:
            return self.pending_detail
        if self.said is not None:
            message = _failure_message(_attrs(self.said))
            if message:
                return message
        if self.started_event is not None and self.kind == "activity":
            return _failure_message(_attrs(self.started_event), "last_failure")
        return ""

    @property
    def link(self) -> tuple[str, str] | None:
        """A started child's (workflow id, run id)."""
        if self.started_event is None or self.kind != "child":
            return None
        run = self.started_event.child_workflow_execution_started_event_attributes.workflow_execution
        return (run.workflow_id, run.run_id)

    @property
    def activity_id(self) -> str:
        if self.kind != "activity":
            return ""
        return self.opening.activity_task_scheduled_event_attributes.activity_id


def _attrs(event: HistoryEvent) -> Any:
    return getattr(event, event.WhichOneof("attributes") or "", None)


_LINK_FIELDS: dict[str, str] = {}


def _link_field(attributes: str, attrs: Message) -> str:
    """The field of an attributes message naming the event it follows ('' when none), found once."""
    found = _LINK_FIELDS.get(attributes)
    if found is None:
        fields = attrs.DESCRIPTOR.fields_by_name
        found = next((name for name in _LINKS if name in fields), "")
        _LINK_FIELDS[attributes] = found
    return found


_RUN_EVENTS = WORKFLOW_CLOSES | {E.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED}
_ACTIVITY_STARTED = E.EVENT_TYPE_ACTIVITY_TASK_STARTED
_SIGNALED = E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED


def _link(event: HistoryEvent) -> int:
    """The id of the event that opened the bar `event` belongs to (the run's own: its first event)."""
    if event.event_type in _RUN_EVENTS:
        return 1
    attributes = event.WhichOneof("attributes")
    if not attributes:
        return 0
    attrs = getattr(event, attributes)
    name = _link_field(attributes, attrs)
    return int(getattr(attrs, name)) if name else 0


def _failure_message(attrs: Message, name: str = "failure") -> str:
    fields = attrs.DESCRIPTOR.fields_by_name
    if name in fields and attrs.HasField(name):
        return getattr(attrs, name).message
    return ""


def _label(event: HistoryEvent, kind: str) -> str:
    if kind == "workflow":
        return f"Workflow: {event.workflow_execution_started_event_attributes.workflow_type.name}"
    if kind == "external":
        attrs = event.request_cancel_external_workflow_execution_initiated_event_attributes
        return f"Cancel external: {attrs.workflow_execution.workflow_id}"
    if kind == "signal" and event.event_type != _SIGNALED:
        signal = event.signal_external_workflow_execution_initiated_event_attributes
        return f"Signal external: {signal.signal_name}"
    return subject(event) or _POINT_LABELS.get(kind, kind.title())


_OPEN_STATES = {"workflow": "Running", "activity": "Scheduled", "child": "Scheduled"}


def bars(events: Iterable[HistoryEvent], *, pending: Sequence[PendingActivityInfo] = ()) -> list[Bar]:
    """The run's bars in the order they opened (the workflow's own first).

    One pass of dictionary lookups per event (nothing is converted or formatted): a 10,000-event history
    takes a few tens of milliseconds.

    Args:
        events: the history, in order (any prefix of it: a live run's history so far).
        pending: DescribeWorkflowExecution's pending activities (attempt, last failure, backoff).
    """
    shown: list[Bar] = []
    by_opening: dict[int, Bar] = {}
    for event in events:
        event_type = event.event_type
        kind = OPENS.get(event_type)
        if kind is not None:
            bar = Bar(event.event_id, kind, event, state=_OPEN_STATES.get(kind, "Started"))
            by_opening[event.event_id] = bar
            shown.append(bar)
            continue
        point = POINTS.get(event_type)
        if point is not None:
            shown.append(Bar(event.event_id, point[0], event, state=point[1], point=True, said=event))
            continue
        if event_type in STARTS:
            bar = by_opening.get(_link(event))  # type: ignore[assignment]  # None is checked next
            if bar is not None:
                bar.state, bar.started_event = "Running", event
                if event_type == _ACTIVITY_STARTED:
                    bar.attempt = max(event.activity_task_started_event_attributes.attempt, 1)
        elif event_type in CLOSES:
            bar = by_opening.get(_link(event))  # type: ignore[assignment]  # None is checked next
            if bar is not None:
                bar.state, bar.said = CLOSES[event_type], event
        elif event_type in NOTES:
            bar = by_opening.get(_link(event))  # type: ignore[assignment]  # None is checked next
            if bar is not None and bar.said is None:
                bar.state = NOTES[event_type]
    _apply_pending(shown, pending)
    return shown


def _stamp(value: Timestamp) -> float:
    return value.seconds + value.nanos * 1e-9


def _apply_pending(shown: list[Bar], pending: Sequence[PendingActivityInfo]) -> None:
    """What the history does not say of open activities: the attempt running or waiting, its last
    failure, when the last attempt started and ended."""
    if not pending:
        return
    open_activities = {b.activity_id: b for b in shown if b.kind == "activity" and b.said is None}
    for info in pending:
        bar = open_activities.get(info.activity_id)
        if bar is None:
            continue
        bar.attempt = max(info.attempt, 1)
        bar.state = PENDING_STATES.get(info.state, bar.state)
        if info.HasField("last_failure"):
            bar.pending_detail = info.last_failure.message
        if info.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED and info.HasField(
            "last_started_time"
        ):
            bar.pending_started = _stamp(info.last_started_time)
        elif info.attempt > 1 and info.HasField("last_attempt_complete_time"):
            # Between attempts: the retries end where the last attempt failed, then the backoff runs.
            label = "waiting for the next attempt"
            if info.HasField("next_attempt_schedule_time"):
                label = "next attempt at " + _dt(_stamp(info.next_attempt_schedule_time)).strftime("%H:%M:%S")
            bar.backoff = (_stamp(info.last_attempt_complete_time), label)


def _earlier(attempt: int) -> str:
    return f"attempts 1–{attempt - 1}" if attempt > 2 else "attempt 1"


def segments(bar: Bar) -> list[Segment]:
    """The bar's stretches, in order (none for a point; an open one's last ends at None: now)."""
    if bar.point:
        return []
    start, end = bar.start, bar.end
    if bar.backoff is not None:
        # A pending activity between attempts: attempts 1..n-1 ran from scheduling to the last failure.
        failed = _dt(bar.backoff[0])
        return [
            Segment("retries", start, failed, _earlier(bar.attempt)),
            Segment("backoff", failed, None, bar.backoff[1]),
        ]
    started = bar.started
    if started is None:
        waiting = {"activity": "scheduled, waiting for a worker", "child": "starting"}.get(bar.kind, "")
        return [Segment("wait" if waiting else "run", start, end, waiting or bar.state.lower())]
    if bar.kind == "activity" and bar.attempt > 1:
        first = Segment("retries", start, started, _earlier(bar.attempt) + " (retried)")
    else:
        first = Segment(
            "wait", start, started, "waiting for a worker" if bar.kind == "activity" else "starting"
        )
    last = Segment("run", started, end, f"attempt {bar.attempt}" if bar.kind == "activity" else "running")
    return [first, last]


# --- layout ------------------------------------------------------------------------------------------

PAGE_ROWS = 100
MIN_WIDTH = 0.4
"""Percent: a bar of no length is still seen and hovered."""
_STEPS = (
    [timedelta(milliseconds=n) for n in (1, 2, 5, 10, 20, 50, 100, 200, 500)]
    + [timedelta(seconds=n) for n in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200)]
    + [timedelta(hours=n) for n in (3, 6, 12, 24, 48, 168, 336, 720)]
)


@dataclass(frozen=True, slots=True)
class Drawn:
    """A segment placed on the axis: `x` and `width` in percent of the track."""

    kind: str
    x: float
    width: float
    label: str
    open: bool


@dataclass(frozen=True, slots=True)
class Row:
    bar: Bar
    drawn: list[Drawn]
    mark: float | None
    """A point's place (percent), or the open end's."""
    title: str
    """What a pointer over the row reads (and a screen reader): label, state, times, attempt, failure."""


@dataclass(frozen=True, slots=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True, slots=True)
class Page:
    rows: list[Row]
    ticks: list[Tick]
    start: datetime
    end: datetime
    page: int
    pages: int
    total: int
    first_row: int
    """1-based number of the first row shown."""


def _span_text(delta: timedelta) -> str:
    seconds = delta.total_seconds()
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    if seconds < 60:
        return f"{seconds:.3g}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s" if secs else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m" if minutes else f"{hours}h"
    return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"


def _tick_text(offset: timedelta) -> str:
    return "0" if not offset else "+" + _span_text(offset)


def _title(bar: Bar, now: datetime) -> str:
    end = bar.end or now
    parts = [bar.label, bar.state]
    if bar.point:
        parts.append(bar.start.strftime("%H:%M:%S.%f")[:12])
    else:
        parts.append(f"{_span_text(end - bar.start)}{' so far' if bar.end is None else ''}")
    if bar.kind == "activity" and bar.attempt > 1:
        parts.append(f"attempt {bar.attempt}")
    if bar.detail:
        parts.append(bar.detail)
    return " · ".join(parts)


def layout(all_bars: Sequence[Bar], *, now: datetime, page: int = 0, page_rows: int = PAGE_ROWS) -> Page:
    """A page of rows placed on a time axis that spans them (page 0: the last, the newest rows).

    The axis runs from the earliest start to the latest end of the rows shown (open bars end at `now`),
    so a long run's later pages are not squeezed into the whole run's width.
    """
    total = len(all_bars)
    pages = max((total + page_rows - 1) // page_rows, 1)
    page = pages if page <= 0 or page > pages else page
    shown = list(all_bars[(page - 1) * page_rows : page * page_rows])
    if not shown:
        return Page([], [], now, now, page, pages, total, 0)
    start = min(b.start for b in shown)
    end = max(max((b.end or now) for b in shown), start)
    span = (end - start).total_seconds() or 1.0

    def at(moment: datetime) -> float:
        return min(max((moment - start).total_seconds() / span * 100, 0.0), 100.0)

    rows = []
    for bar in shown:
        drawn = []
        for segment in segments(bar):
            x = at(segment.start)
            right = at(segment.end or now)
            drawn.append(
                Drawn(
                    kind=segment.kind,
                    x=round(min(x, 100 - MIN_WIDTH), 3),
                    width=round(max(right - x, MIN_WIDTH), 3),
                    label=segment.label,
                    open=segment.end is None,
                )
            )
        mark = at(bar.start) if bar.point else (at(now) if bar.open else None)
        rows.append(
            Row(
                bar=bar,
                drawn=drawn,
                mark=round(mark, 3) if mark is not None else None,
                title=_title(bar, now),
            )
        )
    total_span = end - start
    step = next((s for s in _STEPS if total_span / s <= 6), _STEPS[-1])
    ticks = []
    offset = timedelta(0)
    while offset <= total_span:
        ticks.append(Tick(x=round(at(start + offset), 3), label=_tick_text(offset)))
        offset += step
    return Page(
        rows=rows,
        ticks=ticks,
        start=start,
        end=end,
        page=page,
        pages=pages,
        total=total,
        first_row=(page - 1) * page_rows + 1,
    )
