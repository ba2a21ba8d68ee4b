"""Completing a workflow task: the WorkflowTaskCompleted event, then one group of events per command."""

from __future__ import annotations

from temporalio.api.history.v1 import WorkflowTaskCompletedEventAttributes
from temporalio.api.workflowservice.v1 import RespondWorkflowTaskCompletedRequest

from engine.history import commands, workflow_task
from engine.history.errors import StaleTask
from engine.history.events import new_event
from engine.history.mutation import Mutation


def complete(
    m: Mutation,
    *,
    scheduled_event_id: int,
    started_event_id: int,
    request: RespondWorkflowTaskCompletedRequest,
) -> None:
    """Apply a completed workflow task and its commands.

    Raises:
        StaleTask: the token does not name the run's started workflow task.
        CommandFailure: a command is invalid; the caller fails the task on a fresh state instead.
    """
    state = m.state
    if not state.running:
        raise StaleTask("workflow task not found")
    wft = workflow_task.started_task(state, scheduled_event_id, started_event_id)
    if wft.attempt > 1:
        workflow_task.write_transient(m, wft)
    completed = m.add(
        new_event(
            WorkflowTaskCompletedEventAttributes(
                scheduled_event_id=wft.scheduled_event_id,
                started_event_id=wft.started_event_id,
                identity=request.identity,
                binary_checksum=request.binary_checksum,
                worker_version=request.worker_version_stamp
                if request.HasField("worker_version_stamp")
                else None,
                sdk_metadata=request.sdk_metadata if request.HasField("sdk_metadata") else None,
                metering_metadata=request.metering_metadata
                if request.HasField("metering_metadata")
                else None,
            )
        )
    )
    state.workflow_task = None
    state.wft_attempt = 1
    state.last_completed_wft_started_event_id = wft.started_event_id
    outcome = commands.apply_all(m, completed_event_id=completed.event_id, request=request)
    if state.running and (
        request.force_create_new_workflow_task or outcome.needs_workflow_task or state.buffered
    ):
        workflow_task.schedule(m)
