"""Inputs a running run receives from outside: signals and cancel requests."""

from __future__ import annotations

from temporalio.api.common.v1 import Header, Payloads
from temporalio.api.history.v1 import (
    WorkflowExecutionCancelRequestedEventAttributes,
    WorkflowExecutionSignaledEventAttributes,
)

from engine.history import workflow_task
from engine.history.errors import require_running
from engine.history.events import new_event
from engine.history.mutation import Mutation

MAX_SIGNAL_REQUEST_IDS = 100


def signal(
    m: Mutation,
    *,
    signal_name: str,
    input: Payloads | None,
    identity: str,
    request_id: str,
    header: Header | None = None,
) -> None:
    """Deliver a signal (deduplicated by request id) and make sure a workflow task will see it."""
    state = m.state
    require_running(state)
    if request_id:
        if request_id in state.signal_request_ids:
            return
        state.signal_request_ids = [*state.signal_request_ids[-(MAX_SIGNAL_REQUEST_IDS - 1) :], request_id]
    attrs = WorkflowExecutionSignaledEventAttributes(
        signal_name=signal_name, identity=identity, request_id=request_id
    )
    if input is not None and input.payloads:
        attrs.input.CopyFrom(input)
    if header is not None:
        attrs.header.CopyFrom(header)
    m.add_external(new_event(attrs))
    workflow_task.schedule(m)


def request_cancel(m: Mutation, *, identity: str, reason: str) -> None:
    """Ask the workflow to cancel itself; a second request is a no-op, as in Temporal."""
    state = m.state
    if not state.running or state.cancel_requested:
        return  # Temporal answers OK and writes nothing for a closed or already cancel-requested run
    state.cancel_requested = True
    m.add_external(
        new_event(WorkflowExecutionCancelRequestedEventAttributes(cause=reason, identity=identity))
    )
    workflow_task.schedule(m)
