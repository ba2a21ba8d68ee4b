"""Workflow updates: admission, delivery to the worker as protocol messages, and the worker's answers.

An admitted update lives in the run's mutable state (so it survives worker restarts and server
restarts) and is sent with every workflow task until the worker accepts or rejects it. Acceptance
and completion are written to history; a rejection is not, as in Temporal.
"""

from __future__ import annotations

from typing import TypeVar

from google.protobuf import any_pb2
from google.protobuf.message import DecodeError
from google.protobuf.message import Message as ProtoMessage
from temporalio.api.enums.v1 import UpdateWorkflowExecutionLifecycleStage, WorkflowTaskFailedCause
from temporalio.api.failure.v1 import ApplicationFailureInfo, Failure
from temporalio.api.history.v1 import (
    WorkflowExecutionUpdateAcceptedEventAttributes,
    WorkflowExecutionUpdateCompletedEventAttributes,
)
from temporalio.api.protocol.v1 import Message
from temporalio.api.update.v1 import Acceptance, Outcome, Rejection, Request, Response

from engine import bounds
from engine.errors import InvalidArgument
from engine.history import workflow_task
from engine.history.errors import CommandFailure
from engine.history.events import new_event
from engine.history.mutation import Mutation
from engine.history.state import MutableState, UpdateInfo

ADMITTED = UpdateWorkflowExecutionLifecycleStage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ADMITTED
ACCEPTED = UpdateWorkflowExecutionLifecycleStage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ACCEPTED
COMPLETED = UpdateWorkflowExecutionLifecycleStage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_COMPLETED
MAX_REMEMBERED = 1000
"""Finished updates kept for deduplication and late polls."""
_M = TypeVar("_M", bound=ProtoMessage)
_BAD_MESSAGE = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_BAD_UPDATE_WORKFLOW_EXECUTION_MESSAGE


def admit(m: Mutation, request: Request) -> UpdateInfo:
    """Admit an update (or find the one with the same id) and make sure a workflow task will carry it."""
    state = m.state
    existing = state.updates.get(request.meta.update_id)
    if existing is not None:
        return existing
    info = UpdateInfo(update_id=request.meta.update_id, request=request.SerializeToString(), stage=ADMITTED)
    state.updates[info.update_id] = info
    workflow_task.schedule(m, speculative=True)
    return info


def undelivered(state: MutableState) -> bool:
    """Updates wait that the worker has neither accepted nor rejected: a workflow task must carry them."""
    return any(info.stage == ADMITTED for info in state.updates.values())


def messages(state: MutableState, started_event_id: int) -> list[Message]:
    """The requests of admitted updates, for the workflow task being handed out."""
    out = []
    for info in state.updates.values():
        if info.stage != ADMITTED or info.admitted_event_id:
            continue
        body = any_pb2.Any()
        body.Pack(Request.FromString(info.request))
        out.append(
            Message(
                id=f"{info.update_id}/request",
                protocol_instance_id=info.update_id,
                event_id=max(started_event_id - 1, 0),
                body=body,
            )
        )
    return out


def _finish(state: MutableState, info: UpdateInfo, outcome: Outcome) -> None:
    info.stage = COMPLETED
    info.outcome = outcome.SerializeToString()
    finished = [u for u in state.updates.values() if u.stage == COMPLETED]
    for old in finished[: max(len(finished) - MAX_REMEMBERED, 0)]:
        del state.updates[old.update_id]


def handle_message(m: Mutation, message: Message, *, completed_event_id: int) -> None:
    """Apply one protocol message from a completed workflow task (acceptance, rejection, response)."""
    state = m.state
    info = state.updates.get(message.protocol_instance_id)
    if info is None:
        raise CommandFailure(_BAD_MESSAGE, f"update {message.protocol_instance_id!r} is not in flight")
    body = message.body
    if body.Is(Acceptance.DESCRIPTOR):
        acceptance = _unpacked(body, Acceptance())
        if info.stage != ADMITTED:
            raise CommandFailure(_BAD_MESSAGE, f"update {info.update_id!r} was already accepted or rejected")
        event = m.add(
            new_event(
                WorkflowExecutionUpdateAcceptedEventAttributes(
                    protocol_instance_id=info.update_id,
                    accepted_request_message_id=acceptance.accepted_request_message_id,
                    accepted_request_sequencing_event_id=acceptance.accepted_request_sequencing_event_id,
                    # A request already in history (an UpdateAdmitted event) is not repeated, as in Temporal.
                    accepted_request=None
                    if info.admitted_event_id
                    else acceptance.accepted_request
                    if acceptance.HasField("accepted_request")
                    else Request.FromString(info.request),
                )
            )
        )
        info.stage = ACCEPTED
        info.accepted_event_id = event.event_id
    elif body.Is(Rejection.DESCRIPTOR):
        rejection = _unpacked(body, Rejection())
        if info.stage != ADMITTED:
            raise CommandFailure(_BAD_MESSAGE, f"update {info.update_id!r} was already accepted")
        _finish(state, info, Outcome(failure=rejection.failure))
        m.update_settled_without_event = True
    elif body.Is(Response.DESCRIPTOR):
        response = _unpacked(body, Response())
        if info.stage != ACCEPTED:
            raise CommandFailure(_BAD_MESSAGE, f"update {info.update_id!r} completed before it was accepted")
        m.add(
            new_event(
                WorkflowExecutionUpdateCompletedEventAttributes(
                    meta=response.meta, accepted_event_id=info.accepted_event_id, outcome=response.outcome
                )
            )
        )
        _finish(state, info, response.outcome)
    else:
        raise CommandFailure(_BAD_MESSAGE, f"unknown protocol message body {body.type_url}")
    del completed_event_id


def _unpacked(body: any_pb2.Any, into: _M) -> _M:
    """A message body, decoded and bounded as a request is (engine/bounds.py): a body is bytes to the edge's
    walk, so a failure nested too deep or an undecodable one is caught here, failing the task."""
    try:
        body.Unpack(into)
        bounds.check_request(into)
    except DecodeError:
        raise CommandFailure(
            _BAD_MESSAGE, f"the {into.DESCRIPTOR.name} message body could not be decoded"
        ) from None
    except InvalidArgument as e:
        raise CommandFailure(_BAD_MESSAGE, e.message) from None
    return into


ACCEPTED_UPDATE_COMPLETED_WORKFLOW = Failure(
    message="Workflow Update failed because the Workflow completed before the Update completed.",
    source="Server",
    application_failure_info=ApplicationFailureInfo(
        type="AcceptedUpdateCompletedWorkflow", non_retryable=True
    ),
)
ABORTED_BY_CLOSE = "workflow update was aborted by closing workflow"
CLOSING = "workflow operation can not be applied because workflow is closing"
"""Temporal's ErrWorkflowClosing: a retryable answer (RESOURCE_EXHAUSTED, cause BUSY_WORKFLOW)."""


def on_close(state: MutableState, *, continuing: bool = False) -> None:
    """Updates in flight when the run closes: accepted ones fail (their callers expect an outcome),
    the others are aborted, as Temporal does. An aborted caller gets NotFound, unless a new run continues
    this one (`continuing`): then it is told to send the update again, to the new run."""
    for info in state.updates.values():
        if info.stage == ACCEPTED:
            info.ended_by_close = True
            _finish(state, info, Outcome(failure=ACCEPTED_UPDATE_COMPLETED_WORKFLOW))
        elif info.stage == ADMITTED:
            info.aborted = info.ended_by_close = True
            info.continuing = continuing
            _finish(state, info, Outcome())
