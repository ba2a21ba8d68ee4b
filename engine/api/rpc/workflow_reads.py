"""Reading a run: DescribeWorkflowExecution and its history, forwards (with the long poll `handle.result()`
waits on) and in reverse. A run deleted by retention is described and its history read, both ways, from
its archive when it was archived (engine/archival/history.py); Temporal reads the archive only for the
forward history (README, Archival)."""

from __future__ import annotations

import asyncio

import grpc
from temporalio.api.enums.v1 import HistoryEventFilterType
from temporalio.api.history.v1 import History, HistoryEvent
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from engine import dbthreads, notify, page_tokens, validation
from engine.api.rpc import resolve, waits
from engine.errors import NotFound
from engine.history.state import OPEN_STATUSES, RUNNING
from engine.models import Execution
from engine.services import archived_runs, reads, recent_events, run_descriptions
from tenants.models import Namespace

HISTORY_WAIT_SECONDS = 20.0
DEFAULT_HISTORY_PAGE = 1000
CLOSE_EVENT = HistoryEventFilterType.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT


async def _snapshot(namespace: Namespace, workflow_id: str, run_id: str) -> reads.RunSnapshot:
    return await dbthreads.run(
        reads.run_snapshot, namespace_id=namespace.id, workflow_id=workflow_id, run_id=run_id
    )


async def _run(namespace: Namespace, workflow_id: str, run_id: str) -> Execution:
    """The run's row, its state left sealed: history reads need only its ids and counters."""
    return await dbthreads.run(
        reads.run_row, namespace_id=namespace.id, workflow_id=workflow_id, run_id=run_id
    )


async def describe_workflow_execution(
    request: rr.DescribeWorkflowExecutionRequest, context: grpc.aio.ServicerContext
) -> rr.DescribeWorkflowExecutionResponse:
    namespace = await resolve.namespace(request.namespace)
    validation.require_id(request.execution.workflow_id, "WorkflowId")
    validation.run_id(request.execution.run_id)
    try:
        snap = await _snapshot(namespace, request.execution.workflow_id, request.execution.run_id)
    except NotFound:
        described = await dbthreads.run(
            reads.archived_description,
            namespace_id=namespace.id,
            workflow_id=request.execution.workflow_id,
            run_id=request.execution.run_id,
        )
        if described is None:
            raise
        return described
    return run_descriptions.describe_execution(snap)


async def get_workflow_execution_history(
    request: rr.GetWorkflowExecutionHistoryRequest, context: grpc.aio.ServicerContext
) -> rr.GetWorkflowExecutionHistoryResponse:
    namespace = await resolve.namespace(request.namespace)
    validation.require_id(request.execution.workflow_id, "WorkflowId")
    validation.run_id(request.execution.run_id)
    run_id = request.execution.run_id
    first_event_id = 1
    if request.next_page_token:
        run_id, first_event_id = page_tokens.history_decode(request.next_page_token)
    close_only = request.history_event_filter_type == CLOSE_EVENT
    try:
        execution = await _run(namespace, request.execution.workflow_id, run_id)
    except NotFound:
        # Deleted by retention, perhaps archived first: then the archive answers (closed: nothing to wait for).
        archived = await dbthreads.run(
            reads.archived_history,
            namespace_id=namespace.id,
            workflow_id=request.execution.workflow_id,
            run_id=run_id,
        )
        if archived is None:
            raise
        return _archived_page(archived, first_event_id, close_only, request.maximum_page_size)
    if request.wait_new_event:
        execution = await _wait_for_history(context, execution, first_event_id, close_only)

    def token(next_event_id: int) -> bytes:
        return page_tokens.history_encode(run_id=execution.run_id, next_event_id=next_event_id)

    if close_only:
        # A paused run is open: a waiting reader (an SDK's result()) waits on for its close. Temporal
        # answers it the Paused event at once, which the SDKs fail on ("No completion event found").
        if execution.status == RUNNING or (execution.status in OPEN_STATUSES and request.wait_new_event):
            return rr.GetWorkflowExecutionHistoryResponse(
                history=History(), next_page_token=token(first_event_id)
            )
        # Not waiting, a paused run answers its last event (the `temporal` CLI's describe shows it).
        closed = execution.status not in OPEN_STATUSES
        event = recent_events.close_event(execution) if closed else None
        if event is None:
            event = await dbthreads.run(reads.close_event if closed else reads.last_event, execution)
        return rr.GetWorkflowExecutionHistoryResponse(history=History(events=[event] if event else []))
    page_size = request.maximum_page_size or DEFAULT_HISTORY_PAGE
    events = await dbthreads.run(
        reads.history_page, execution, first_event_id=first_event_id, page_size=page_size
    )
    next_id = events[-1].event_id + 1 if events else first_event_id
    more = next_id < execution.next_event_id or (request.wait_new_event and execution.status in OPEN_STATUSES)
    return rr.GetWorkflowExecutionHistoryResponse(
        history=History(events=events), next_page_token=token(next_id) if more else b""
    )


def _archived_page(
    archived: tuple[str, list[HistoryEvent]], first_event_id: int, close_only: bool, page_size: int
) -> rr.GetWorkflowExecutionHistoryResponse:
    run_id, events = archived
    if close_only:
        return rr.GetWorkflowExecutionHistoryResponse(history=History(events=events[-1:]))
    page = [e for e in events if e.event_id >= first_event_id][: page_size or DEFAULT_HISTORY_PAGE]
    more = bool(page) and page[-1].event_id < events[-1].event_id
    token = page_tokens.history_encode(run_id=run_id, next_event_id=page[-1].event_id + 1) if more else b""
    return rr.GetWorkflowExecutionHistoryResponse(
        history=History(events=page), next_page_token=token, archived=True
    )


async def _wait_for_history(
    context: grpc.aio.ServicerContext, execution: Execution, first_event_id: int, close_only: bool
) -> Execution:
    """Long-poll until the run has events from `first_event_id` (or has closed), or the wait runs out."""
    loop = asyncio.get_running_loop()
    deadline = waits.deadline(context, HISTORY_WAIT_SECONDS)
    key = notify.closed_key(execution.pk) if close_only else notify.run_key(execution.pk)

    def arrived(execution: Execution) -> bool:
        return execution.status not in OPEN_STATUSES or (
            not close_only and execution.next_event_id > first_event_id
        )

    with notify.hub.waiter(key) as waiter:
        if not arrived(execution):
            # Read again now that the waiter is armed: a change committed between the caller's read and
            # the arming woke no one, and would have waited for the recheck (5 s for an SDK's result()).
            execution = await dbthreads.run(reads.reload, execution)
        while True:
            if arrived(execution):
                return execution
            remaining = deadline - loop.time()
            if remaining <= 0:
                return execution
            await waiter.wait(min(remaining, waits.RECHECK_SECONDS))
            waiter.rearm()
            execution = await dbthreads.run(reads.reload, execution)


async def get_workflow_execution_history_reverse(
    request: rr.GetWorkflowExecutionHistoryReverseRequest, context: grpc.aio.ServicerContext
) -> rr.GetWorkflowExecutionHistoryReverseResponse:
    namespace = await resolve.namespace(request.namespace)
    validation.require_id(request.execution.workflow_id, "WorkflowId")
    validation.run_id(request.execution.run_id)
    page_size = request.maximum_page_size or DEFAULT_HISTORY_PAGE
    try:
        execution = await _run(namespace, request.execution.workflow_id, request.execution.run_id)
    except NotFound:
        archived = await dbthreads.run(
            reads.archived_history,
            namespace_id=namespace.id,
            workflow_id=request.execution.workflow_id,
            run_id=request.execution.run_id,
        )
        if archived is None:
            raise
        _, all_events = archived
        before = all_events[-1].event_id + 1 if all_events else 1
        if request.next_page_token:
            before = page_tokens.reverse_decode(request.next_page_token)
        return _reverse_response(
            archived_runs.reverse_page(all_events, before_event_id=before, page_size=page_size)
        )
    before = execution.next_event_id
    if request.next_page_token:
        before = page_tokens.reverse_decode(request.next_page_token)
    events = await dbthreads.run(
        reads.history_reverse_page, execution, before_event_id=before, page_size=page_size
    )
    return _reverse_response(events)


def _reverse_response(events: list[HistoryEvent]) -> rr.GetWorkflowExecutionHistoryReverseResponse:
    """A reverse page, newest first; its token names the oldest event it holds, until event 1 is in."""
    oldest = events[-1].event_id if events else 1
    return rr.GetWorkflowExecutionHistoryReverseResponse(
        history=History(events=events), next_page_token=str(oldest).encode() if oldest > 1 else b""
    )
