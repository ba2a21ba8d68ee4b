"""Pausing and unpausing a whole run (PauseWorkflowExecution / UnpauseWorkflowExecution), as Server 1.32 does.

A paused run stays open: signals, cancel requests, timer fires and the results of attempts already
running are written to its history, and it can be terminated. What stops is progress: no workflow task
is scheduled (workflow_task.schedule), no activity attempt is handed out (activity.start), no update is
admitted, and queries are rejected with the PAUSED status. Unpausing schedules a workflow task and
dispatches the activities that were waiting (Temporal's service/history/api/{pause,unpause}workflow and
MutableStateImpl.ApplyWorkflowExecution{Paused,Unpaused}Event).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.api.history.v1 import (
    WorkflowExecutionPausedEventAttributes,
    WorkflowExecutionUnpausedEventAttributes,
)

from engine.errors import FailedPrecondition
from engine.history import parking, pause_info, workflow_task
from engine.history.errors import require_running
from engine.history.events import new_event
from engine.history.mutation import Mutation, TaskKind
from engine.history.state import PAUSED, RUNNING, PauseInfo

ALREADY_PAUSED = "workflow is already paused."
NOT_PAUSED = "workflow is not paused."
UPDATE_WHILE_PAUSED = "Workflow is paused. Cannot update the workflow."
FORCE_TASK_WHILE_PAUSED = "Workflow is paused and force create new workflow task is not allowed."


def pause(m: Mutation, *, identity: str, reason: str, request_id: str) -> None:
    """Pause the run: write WorkflowExecutionPaused and stop its progress until it is unpaused.

    A workflow task already started is left to finish (its completion is accepted; no next task is
    scheduled). One scheduled but not started stays scheduled and is not handed out until the unpause.
    Server 1.32 fails such a task instead (WorkflowTaskFailed, cause
    WORKFLOW_PAUSE_REQUESTED_BEFORE_TASK_STARTED, before the Paused event), but a WorkflowTaskFailed that
    follows a WorkflowTaskScheduled with no WorkflowTaskStarted is a history the Core-based SDKs cannot
    replay ("WorkflowTaskMachine in state Scheduled says the transition is invalid"), which leaves the run
    failing its workflow tasks for good; Perdura keeps the run's history replayable instead.

    Raises:
        RunClosed: the run is closed.
        FailedPrecondition: the run is already paused by another request.
    """
    state = m.state
    require_running(state)
    if state.pause is not None:
        if request_id and state.pause.request_id == request_id:
            return  # the same request again: nothing to do
        raise FailedPrecondition(ALREADY_PAUSED)
    event = new_event(
        WorkflowExecutionPausedEventAttributes(identity=identity, reason=reason, request_id=request_id)
    )
    event.worker_may_ignore = True
    state.status = PAUSED
    state.pause = PauseInfo(pause_time=m.now, identity=identity, reason=reason, request_id=request_id)
    m.add_external(event)
    pause_info.index(state)


def unpause(m: Mutation, *, identity: str, reason: str, request_id: str) -> None:
    """Resume a paused run: write WorkflowExecutionUnpaused, schedule a workflow task, dispatch activities.

    Raises:
        RunClosed: the run is closed.
        FailedPrecondition: the run is not paused.
    """
    state = m.state
    require_running(state)
    if state.pause is None:
        raise FailedPrecondition(NOT_PAUSED)
    event = new_event(
        WorkflowExecutionUnpausedEventAttributes(identity=identity, reason=reason, request_id=request_id)
    )
    event.worker_may_ignore = True
    state.status = RUNNING
    state.pause = None
    m.add_external(event)
    pause_info.index(state)
    parking.index(state)  # a parked run is redriven by its unpause
    for info in state.activities.values():
        if info.started_time is not None or info.paused:
            continue  # running attempts go on; an activity paused on its own waits for its own unpause
        # Rows handed out while paused were discarded: queue the attempt again, at its scheduled time.
        at = max(m.now, info.attempt_scheduled_time)
        info.task_visible_at = at
        m.task(
            TaskKind.ACTIVITY,
            info.task_queue,
            info.scheduled_event_id,
            info.attempt,
            delay=(at - m.now) / timedelta(seconds=1),
        )
    wft = state.workflow_task
    if wft is not None and not wft.started_event_id:
        # Its rows polled while paused were dropped: hand it out again (a row left over is stale once started).
        m.task(TaskKind.WORKFLOW, wft.task_queue, wft.scheduled_event_id, wft.attempt)
    workflow_task.schedule(m)
