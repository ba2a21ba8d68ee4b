"""Completing a workflow task: the WorkflowTaskCompleted event, then one group of events per command."""

from __future__ import annotations

from dataclasses import dataclass, field

from temporalio.api.history.v1 import WorkflowTaskCompletedEventAttributes
from temporalio.api.update.v1 import Rejection
from temporalio.api.workflowservice.v1 import RespondWorkflowTaskCompletedRequest

from engine.errors import FailedPrecondition
from engine.history import (
    activity,
    commands,
    lifecycle,
    limits,
    pause,
    updates,
    versioning,
    versioning_attributes,
    workflow_task,
)
from engine.history.errors import StaleTask
from engine.history.events import new_event, seconds
from engine.history.mutation import Mutation, TaskKind, TimerKind
from engine.history.state import ActivityInfo, MutableState, WorkflowTaskInfo

DEFAULT_STICKY_TIMEOUT = 10.0


@dataclass(slots=True)
class Completed:
    """Work handed back in the completion response: eagerly started activities and the next workflow task."""

    activities: list[ActivityInfo] = field(default_factory=list)
    workflow_task: WorkflowTaskInfo | None = None
    reset_history_event_id: int = 0
    """Set when a speculative task was dropped: the worker rewinds its view of history to this started event."""


def _history_limit_exceeded(state: MutableState) -> str:
    if state.next_event_id - 1 > limits.HISTORY_COUNT_LIMIT:
        return limits.HISTORY_COUNT_EXCEEDED
    if state.history_size > limits.HISTORY_SIZE_LIMIT:
        return limits.HISTORY_SIZE_EXCEEDED
    return ""


def _keep_sticky(state: MutableState, request: RespondWorkflowTaskCompletedRequest) -> None:
    sticky = request.sticky_attributes if request.HasField("sticky_attributes") else None
    if sticky is not None and sticky.worker_task_queue.name:
        state.sticky_queue = sticky.worker_task_queue.name
        state.sticky_timeout = seconds(sticky.schedule_to_start_timeout) or DEFAULT_STICKY_TIMEOUT
    else:
        state.sticky_queue = ""
        state.sticky_timeout = 0.0


def complete(
    m: Mutation,
    *,
    scheduled_event_id: int,
    started_event_id: int,
    attempt: int,
    request: RespondWorkflowTaskCompletedRequest,
) -> Completed:
    """Apply a completed workflow task and its commands; returns what is handed back to the worker at once.

    Raises:
        StaleTask: the token does not name the run's started workflow task.
        CommandFailure: a command is invalid; the caller fails the task on a fresh state instead.
    """
    state = m.state
    if not state.running:
        raise StaleTask("workflow task not found")
    wft = workflow_task.started_task(state, scheduled_event_id, started_event_id, attempt)
    if state.paused and request.force_create_new_workflow_task:
        raise FailedPrecondition(pause.FORCE_TASK_WHILE_PAUSED)
    if wft.speculative and _only_rejects(state, request):
        return _drop_speculative(m, wft, request)
    if wft.deferred:
        workflow_task.write_transient(m, wft)
    versioned = versioning.declared(request)
    completed = m.add(
        new_event(
            WorkflowTaskCompletedEventAttributes(
                scheduled_event_id=wft.scheduled_event_id,
                started_event_id=wft.started_event_id,
                identity=request.identity,
                binary_checksum=request.binary_checksum,
                worker_version=versioned.stamp,
                sdk_metadata=request.sdk_metadata if request.HasField("sdk_metadata") else None,
                metering_metadata=request.metering_metadata
                if request.HasField("metering_metadata")
                else None,
                worker_deployment_name=versioned.deployment_name,
                deployment_version=versioned.version,
                versioning_behavior=versioned.behavior,  # type: ignore[arg-type]
            )
        )
    )
    versioning.record(state, versioned)
    if versioning_attributes.index(state, versioned.stamp, versioned.version):
        m.search_attributes_changed = True
    state.workflow_task = None
    state.wft_attempt = 1
    state.last_completed_wft_started_event_id = wft.started_event_id
    m.drop_timers(TimerKind.WORKFLOW_TASK_TIMEOUT, wft.scheduled_event_id)
    _keep_sticky(state, request)
    over = _history_limit_exceeded(state)
    if over:
        # Temporal ends a run whose history outgrew its limits rather than let it grow further.
        lifecycle.terminate(m, reason=over, details=None, identity=workflow_task.HISTORY_SERVICE_IDENTITY)
        return Completed()
    outcome = commands.apply_all(m, completed_event_id=completed.event_id, request=request)
    result = Completed()
    for scheduled_event_id in outcome.eager_activities:
        info = state.activities.get(scheduled_event_id)
        if not state.running or info is None:
            continue
        if info.cancel_requested or state.paused:  # a paused run starts no activity, eagerly or not
            m.task(TaskKind.ACTIVITY, info.task_queue, scheduled_event_id, info.attempt)
            continue
        activity.start(
            m,
            scheduled_event_id=scheduled_event_id,
            attempt=1,
            identity=request.identity,
            request_id=m.ids.request_id(),
            build_id=versioned.stamp.build_id if versioned.stamp is not None else "",
        )
        result.activities.append(info)
    if not state.running:
        return result
    if request.force_create_new_workflow_task or outcome.needs_workflow_task or state.buffered:
        workflow_task.schedule(m)
    elif updates.undelivered(state):
        # Only updates that arrived while this task ran are waiting: as in Temporal, the task that delivers
        # them is speculative, and leaves no trace if the worker only rejects them.
        workflow_task.schedule(m, speculative=True)
    else:
        return result
    new = state.workflow_task
    if request.return_new_workflow_task and new is not None:
        # Handed straight back to the worker that is still holding the run, as Temporal does.
        m.drop_task(TaskKind.WORKFLOW, new.scheduled_event_id)
        m.drop_timers(TimerKind.WORKFLOW_TASK_SCHEDULE_TO_START, new.scheduled_event_id)
        result.workflow_task = workflow_task.start(
            m,
            scheduled_event_id=new.scheduled_event_id,
            attempt=new.attempt,
            request_id="request-from-RespondWorkflowTaskCompleted",
            identity=request.identity,
        )
    return result


def _only_rejects(state: MutableState, request: RespondWorkflowTaskCompletedRequest) -> bool:
    """The worker did nothing but reject updates: no commands, no other message, nothing new to deliver."""
    return (
        not request.commands
        and not request.force_create_new_workflow_task
        and not state.buffered
        and all(message.body.Is(Rejection.DESCRIPTOR) for message in request.messages)
    )


def _drop_speculative(
    m: Mutation, wft: WorkflowTaskInfo, request: RespondWorkflowTaskCompletedRequest
) -> Completed:
    """Temporal's speculative task: when it only rejected updates, it leaves no trace in history."""
    state = m.state
    state.workflow_task = None
    state.wft_attempt = 1
    m.drop_timers(TimerKind.WORKFLOW_TASK_TIMEOUT, wft.scheduled_event_id)
    _keep_sticky(state, request)
    for message in request.messages:
        updates.handle_message(m, message, completed_event_id=0)
    if updates.undelivered(state):
        workflow_task.schedule(m, speculative=True)  # an update admitted meanwhile still needs delivering
    return Completed(reset_history_event_id=state.last_completed_wft_started_event_id)
