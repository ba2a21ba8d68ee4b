"""What a reset would do, before it is done: the points a run can be reset to and a preview of one.

The preview runs the reset's own pure rules (engine.history.reset.reset_run) on the same history the
reset reads (engine.services.reset), and writes nothing: what it shows dropped and re-applied is what
ResetWorkflowExecution would write for the same point and exclusions, read at the same moment.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime

from perdura import clock
from temporalio.api.enums.v1 import EventType, ResetReapplyExcludeType
from temporalio.api.history.v1 import HistoryEvent

from engine import ids
from engine.errors import InvalidArgument
from engine.history import reset
from engine.history.errors import ResetRejected
from engine.history.events import attributes
from engine.models import CurrentRun
from engine.persistence import store
from engine.services.reset import later_events
from tenants.models import Namespace

E = EventType
REAPPLIED_TYPES = frozenset(
    {E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ADMITTED}
)
"""The events a reset writes again after its point: signals and update requests (reset._reapply)."""
EXCLUDE_SIGNALS = ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL
EXCLUDE_UPDATES = ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_UPDATE


@dataclass(frozen=True, slots=True)
class ResetPoint:
    """A point a run can be reset to: the end of one of its completed workflow tasks."""

    event_id: int
    """The WorkflowTaskCompleted event's id: ResetWorkflowExecution's `workflow_task_finish_event_id`."""
    time: datetime
    """When that workflow task completed."""


@dataclass(frozen=True, slots=True)
class ResetPreview:
    """What resetting to a point would write: the events dropped and the new run's events after it."""

    finish_event_id: int
    dropped: list[HistoryEvent]
    """The base run's events from the point on (and those of the runs that continued it, in order)."""
    added: list[HistoryEvent]
    """The new run's events after the kept prefix: the failed workflow task, the re-applied signals and
    updates, the new workflow task."""
    reapplied: list[HistoryEvent]
    """The signals and update requests among `added`."""
    excluded: list[HistoryEvent]
    """The signals and update requests the exclusions leave out (as the new run would have had them)."""


def reset_points(*, namespace: Namespace, workflow_id: str, run_id: str) -> list[ResetPoint]:
    """Every completed workflow task of the run, oldest first.

    Raises:
        NotFound: no such run.
    """
    execution = store.find_execution(namespace.id, workflow_id, run_id, lock=False)
    return [
        ResetPoint(event_id=e.event_id, time=e.event_time.ToDatetime(tzinfo=clock.now().tzinfo))
        for e in store.history_events(execution)
        if e.event_type == E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
    ]


def reset_preview(
    *,
    namespace: Namespace,
    workflow_id: str,
    run_id: str,
    finish_event_id: int,
    exclude_types: AbstractSet[int],
    reason: str = "",
) -> ResetPreview:
    """What `workflow_reset` would write for this point and these exclusions, writing nothing.

    Raises:
        NotFound: no such run.
        InvalidArgument: the point is not the end of a workflow task, or children are pending there
            (the reset's own refusal, with its message).
    """
    base = store.find_execution(namespace.id, workflow_id, run_id, lock=False)
    current = CurrentRun.objects.filter(namespace=namespace, workflow_id=workflow_id).values("run_id").first()
    try:
        reset.check_point(finish_event_id, base.next_event_id)
        base_events = list(store.history_events(base, last_event_id=finish_event_id - 1))
        later = later_events(namespace, base, finish_event_id, current["run_id"] if current else base.run_id)
        now = clock.now()

        def new_run(excluded: set[int]) -> list[HistoryEvent]:
            m = reset.reset_run(
                base_events=base_events,
                later_events=later,
                finish_event_id=finish_event_id,
                namespace_id=str(namespace.id),
                namespace=namespace.name,
                base_run_id=base.run_id,
                new_run_id="preview",
                reason=reason,
                request_id="",
                excluded=excluded,
                now=now,
                ids=ids.SYSTEM,
            )
            return m.events[len(base_events) :]

        added = new_run(set(exclude_types))
        everything = new_run(set())
    except ResetRejected as e:
        raise InvalidArgument(str(e)) from None
    reapplied = [e for e in added if e.event_type in REAPPLIED_TYPES]
    # Whatever the full re-application has beyond the chosen one is what the exclusions leave out.
    kept = Counter(_identity(e) for e in reapplied)
    excluded = []
    for event in (e for e in everything if e.event_type in REAPPLIED_TYPES):
        if kept[_identity(event)]:
            kept[_identity(event)] -= 1
        else:
            excluded.append(event)
    return ResetPreview(
        finish_event_id=finish_event_id, dropped=later, added=added, reapplied=reapplied, excluded=excluded
    )


def _identity(event: HistoryEvent) -> tuple[int, bytes]:
    return event.event_type, attributes(event).SerializeToString(deterministic=True)
