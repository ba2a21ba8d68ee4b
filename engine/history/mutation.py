"""Mutation: one input applied to a run's state, collecting the events, tasks and timers it implies."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from temporalio.api.enums.v1 import EventType, TimeoutType
from temporalio.api.history.v1 import HistoryEvent

from engine.history.events import set_time
from engine.history.query_consistency import holds_queries
from engine.history.sources import IdSource
from engine.history.state import MutableState


class TaskKind(enum.IntEnum):
    WORKFLOW = 1
    ACTIVITY = 2
    QUERY = 3


ACTIVITY_TIMEOUT_MIN_DELAY = timedelta(seconds=1)


class TimerKind(enum.IntEnum):
    USER_TIMER = 1
    WORKFLOW_TASK_TIMEOUT = 2
    ACTIVITY_TIMEOUT = 3
    WORKFLOW_RUN_TIMEOUT = 4
    WORKFLOW_TASK_SCHEDULE_TO_START = 5
    WORKFLOW_BACKOFF = 6


@dataclass(frozen=True, slots=True)
class NewTask:
    """A task-queue row to create: a workflow or activity task for a poller."""

    kind: TaskKind
    task_queue: str
    scheduled_event_id: int
    attempt: int
    visible_at: datetime


class TransferKind(enum.IntEnum):
    """Work on another run, done by the shard processors after this transaction commits (rule 3)."""

    START_CHILD = 1
    CHILD_CLOSED = 2
    SIGNAL_EXTERNAL = 3
    CANCEL_EXTERNAL = 4
    PARENT_CLOSE_POLICY = 5
    SCHEDULE_RUN_CLOSED = 6
    VISIBILITY = 7
    """Index the run's visibility record in OpenSearch (only when that backend is configured)."""


@dataclass(frozen=True, slots=True)
class NewTransfer:
    kind: TransferKind
    event_id: int
    details: bytes = b""


@dataclass(frozen=True, slots=True)
class DeadTimer:
    """Timer rows that no longer matter (their task or activity was resolved): deleted with the change.

    `attempt` None means every attempt. Leaving them would only cost a no-op fire later.
    """

    kind: TimerKind
    event_id: int
    attempt: int | None = None


@dataclass(frozen=True, slots=True)
class NewTimer:
    """A timer row to create. `detail` carries the timeout type for activity timeouts."""

    kind: TimerKind
    fire_at: datetime
    event_id: int = 0
    attempt: int = 0
    detail: int = 0


# Events that originate outside the run's workflow task. While a workflow task is in flight they wait
# in the buffer and are written after its completion, so a worker never sees history change under it.
BUFFERED_TYPES = frozenset(
    {
        EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED,
        EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
        EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
        EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
        EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED,
        EventType.EVENT_TYPE_TIMER_FIRED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED,
        EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED,
        EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_FAILED,
        EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED,
        EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED,
        EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED,
        EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TIMED_OUT,
        EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED,
        EventType.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_SIGNALED,
        EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED,
        EventType.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_CANCEL_REQUESTED,
        EventType.EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_FAILED,
        # Operator changes: buffered too, so a task in flight completes as the worker saw the run.
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_PAUSED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UNPAUSED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED,
    }
)


_ACTIVITY_CLOSE_FIELDS = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: "activity_task_completed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: "activity_task_failed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: "activity_task_timed_out_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED: "activity_task_canceled_event_attributes",
}
_CHILD_CLOSE_FIELDS = {
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED: "child_workflow_execution_completed_event_attributes",
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED: "child_workflow_execution_failed_event_attributes",
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED: "child_workflow_execution_canceled_event_attributes",
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TIMED_OUT: "child_workflow_execution_timed_out_event_attributes",
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED: "child_workflow_execution_terminated_event_attributes",
}
_LAST_IN_BUFFER = {*_ACTIVITY_CLOSE_FIELDS, *_CHILD_CLOSE_FIELDS}


@dataclass(slots=True)
class Mutation:
    """The working copy of one transition: the state being changed and what the change implies.

    Transition functions take a Mutation and change it; the service persists `events`, `tasks` and
    `timers` together with the state in one transaction (DESIGN.md rule 1).
    """

    state: MutableState
    now: datetime
    ids: IdSource
    """New ids (run ids, request ids): the caller's choice, so the rules stay deterministic."""
    events: list[HistoryEvent] = field(default_factory=list)
    tasks: list[NewTask] = field(default_factory=list)
    timers: list[NewTimer] = field(default_factory=list)
    dead_timers: list[DeadTimer] = field(default_factory=list)
    transfers: list[NewTransfer] = field(default_factory=list)
    closed: bool = False
    """True when this mutation closed the run (its pending task and timer rows can go)."""
    continued: Mutation | None = None
    """The next run's first mutation, when this one continued as new (persisted in the same transaction)."""
    retry_jitter: float = 0.0
    """The namespace's default retry jitter fraction (retry_jitter.py; 0: off), read by the service."""
    park_on_exhausted: bool = False
    """The namespace's default for activities whose retries are exhausted (parking.py): park, not fail."""
    search_attributes_changed: bool = False
    """Set when a change without an event (parking an activity) changed the run's search attributes."""
    update_settled_without_event: bool = False
    """Set when an update got its outcome without an event (rejected in a speculative task that leaves no
    trace): its callers, waiting on the run's new events, are woken all the same."""
    queries_held: bool = field(init=False, default=False)
    """Whether the run held queries for its workflow task before this change: if it stops, they go out."""

    def __post_init__(self) -> None:
        self.queries_held = holds_queries(self.state)

    def wft_in_flight(self) -> bool:
        wft = self.state.workflow_task
        return wft is not None and wft.started_event_id != 0

    def add(self, event: HistoryEvent, at: datetime | None = None) -> HistoryEvent:
        """Append an event now (or with the time it happened), giving it the next id."""
        event.event_id = self.state.next_event_id
        set_time(event.event_time, at or self.now)
        self.state.next_event_id += 1
        self.state.history_size += event.ByteSize()
        self.events.append(event)
        return event

    def add_external(self, event: HistoryEvent, at: datetime | None = None) -> HistoryEvent | None:
        """Append an event from outside the workflow task, buffering it while one is in flight.

        Returns the event if written now, None if buffered.
        """
        if event.event_type in BUFFERED_TYPES and self.wft_in_flight():
            set_time(event.event_time, at or self.now)
            self.state.buffered.append(event.SerializeToString())
            return None
        return self.add(event, at=at)

    def take_buffered(self, match: Callable[[HistoryEvent], bool]) -> HistoryEvent | None:
        """Remove and return the first buffered event `match` accepts (a fire superseded by a cancel)."""
        for index, data in enumerate(self.state.buffered):
            event = HistoryEvent.FromString(data)
            if match(event):
                del self.state.buffered[index]
                return event
        return None

    def buffered_events(self) -> list[HistoryEvent]:
        return [HistoryEvent.FromString(data) for data in self.state.buffered]

    def flush_buffer(self) -> bool:
        """Write the buffered events; True if there were any."""
        if not self.state.buffered:
            return False
        started_ids: dict[int, int] = {}
        events = [HistoryEvent.FromString(data) for data in self.state.buffered]
        # Temporal writes activity results after every other buffered event (EventStore.reorderBuffer).
        events = [e for e in events if e.event_type not in _LAST_IN_BUFFER] + [
            e for e in events if e.event_type in _LAST_IN_BUFFER
        ]
        child_started_ids: dict[int, int] = {}
        for event in events:
            event.event_id = self.state.next_event_id
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                started_ids[event.activity_task_started_event_attributes.scheduled_event_id] = event.event_id
            elif event.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED:
                initiated = event.child_workflow_execution_started_event_attributes.initiated_event_id
                child_started_ids[initiated] = event.event_id
                child = self.state.children.get(initiated)
                if child is not None:
                    child.started_event_id = event.event_id
            elif event.event_type in _CHILD_CLOSE_FIELDS:
                attrs = getattr(event, _CHILD_CLOSE_FIELDS[event.event_type])
                attrs.started_event_id = child_started_ids.get(
                    attrs.initiated_event_id, attrs.started_event_id
                )
            elif event.event_type in _ACTIVITY_CLOSE_FIELDS:
                # The started event these refer to was buffered too: its id is known only now.
                attrs = getattr(event, _ACTIVITY_CLOSE_FIELDS[event.event_type])
                attrs.started_event_id = started_ids.get(attrs.scheduled_event_id, attrs.started_event_id)
            self.state.next_event_id += 1
            self.state.history_size += event.ByteSize()
            self.events.append(event)
        self.state.buffered = []
        return True

    def task(
        self, kind: TaskKind, task_queue: str, scheduled_event_id: int, attempt: int, delay: float = 0.0
    ) -> None:
        self.tasks.append(
            NewTask(
                kind, task_queue, scheduled_event_id, attempt, self.now + timedelta(seconds=max(delay, 0.0))
            )
        )

    def timer(
        self, kind: TimerKind, fire_at: datetime, event_id: int = 0, attempt: int = 0, detail: int = 0
    ) -> None:
        if (
            kind == TimerKind.ACTIVITY_TIMEOUT
            and detail == TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE
            and self.now < fire_at < self.now + ACTIVITY_TIMEOUT_MIN_DELAY
        ):
            # Temporal's timer queue fires no new task sooner than about a second after it is created
            # (TimerProcessorMaxTimeShift), so a sub-second start-to-close timeout lands at about 1 s there.
            # SDK workers time such activities out locally a fixed buffer after that; matching the server
            # keeps their local cancellations in step with the server's. An overdue timer fires at once.
            fire_at = self.now + ACTIVITY_TIMEOUT_MIN_DELAY
        self.timers.append(NewTimer(kind, fire_at, event_id, attempt, detail))

    def transfer(self, kind: TransferKind, event_id: int, details: bytes = b"") -> None:
        self.transfers.append(NewTransfer(kind, event_id, details))

    def drop_timers(self, kind: TimerKind, event_id: int, attempt: int | None = None) -> None:
        """Timers of `kind` for `event_id` (and `attempt`) are not to fire: their rows are deleted, and those
        this mutation made so far are not written (a task started in the mutation that scheduled it)."""
        self.dead_timers.append(DeadTimer(kind, event_id, attempt))
        self.timers = [
            t
            for t in self.timers
            if not (t.kind == kind and t.event_id == event_id and (attempt is None or t.attempt == attempt))
        ]

    def drop_task(self, kind: TaskKind, scheduled_event_id: int) -> None:
        """Forget a task row this mutation was about to create (it is being handed out directly)."""
        self.tasks = [
            t for t in self.tasks if not (t.kind == kind and t.scheduled_event_id == scheduled_event_id)
        ]
