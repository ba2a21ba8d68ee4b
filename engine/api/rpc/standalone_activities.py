"""Standalone activities: StartActivityExecution, Describe-, Poll-, List-, Count-, RequestCancel-,
Terminate- and DeleteActivityExecution. Workers run their attempts through the activity task RPCs."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import grpc
from temporalio.api.activity.v1 import ActivityExecutionListInfo
from temporalio.api.common.v1 import ActivityType, Payload, SearchAttributes
from temporalio.api.enums.v1 import ActivityExecutionStatus
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from engine import dbthreads, notify, validation
from engine.api.rpc import resolve, waits
from engine.api.rpc.visibility import DEFAULT_PAGE_SIZE, _guarded, check_search_attributes
from engine.errors import InvalidArgument
from engine.history import activity, standalone
from engine.history.state import MutableState
from engine.proto_values import ts_micros
from engine.services import search_attributes, standalone_activities
from engine.services.standalone_activities import ActivitySnapshot
from tenants.models import Namespace
from visibility import registry, selectors
from visibility.backends.base import Record
from visibility.divisions import activity_id_of
from visibility.search_attributes import STATUS_BY_VALUE, SaType

_TOKEN_PREFIX = b"perdura-activity-transitions:"


async def start_activity_execution(
    request: rr.StartActivityExecutionRequest, context: grpc.aio.ServicerContext
) -> rr.StartActivityExecutionResponse:
    namespace = await resolve.namespace(request.namespace)
    validation.activity_start_request(request)
    await check_search_attributes(namespace, request.search_attributes)
    started = await dbthreads.run(standalone_activities.activity_start, namespace=namespace, request=request)
    return rr.StartActivityExecutionResponse(run_id=started.run_id, started=started.started)


def _ids(request: rr.DescribeActivityExecutionRequest | rr.PollActivityExecutionRequest) -> None:
    validation.activity_id(request.activity_id)
    if request.run_id:
        try:
            validation.run_id(request.run_id)
        except InvalidArgument:
            raise InvalidArgument("invalid run id: must be a valid UUID") from None


async def _snapshot(namespace: Namespace, activity_id: str, run_id: str) -> ActivitySnapshot:
    return await dbthreads.run(
        standalone_activities.activity_snapshot, namespace=namespace, activity_id=activity_id, run_id=run_id
    )


def _transitions_token(count: int) -> bytes:
    return _TOKEN_PREFIX + str(count).encode()


def _token_transitions(token: bytes) -> int:
    if not token.startswith(_TOKEN_PREFIX):
        raise InvalidArgument("invalid long poll token")
    try:
        return int(token[len(_TOKEN_PREFIX) :])
    except ValueError:
        raise InvalidArgument("invalid long poll token") from None


async def _wait(
    context: grpc.aio.ServicerContext,
    namespace: Namespace,
    snap: ActivitySnapshot,
    done: Callable[[MutableState], bool],
) -> ActivitySnapshot:
    """Re-read the activity until `done(state)` or the long poll's time runs out (then as it is).

    Wake-ups of the run's changes and close are hints: it re-reads at least every RECHECK_SECONDS."""
    activity_id = standalone.hosted(snap.state).activity_id
    loop = asyncio.get_running_loop()
    until = waits.deadline(context, waits.LONG_POLL_SECONDS)
    with notify.hub.waiter(notify.run_key(snap.execution.pk), notify.closed_key(snap.execution.pk)) as waiter:
        armed = False  # the first re-read comes right after arming: a change before it woke no one
        while not done(snap.state):
            remaining = until - loop.time()
            if remaining <= 0:
                break
            if armed:
                await waiter.wait(min(remaining, waits.RECHECK_SECONDS))
                waiter.rearm()
            armed = True
            snap = await _snapshot(namespace, activity_id, snap.state.run_id)
    return snap


async def describe_activity_execution(
    request: rr.DescribeActivityExecutionRequest, context: grpc.aio.ServicerContext
) -> rr.DescribeActivityExecutionResponse:
    namespace = await resolve.namespace(request.namespace)
    _ids(request)
    if request.long_poll_token and not request.run_id:
        raise InvalidArgument("run id is required when long poll token is provided")
    snap = await _snapshot(namespace, request.activity_id, request.run_id)
    if request.long_poll_token:
        seen = _token_transitions(request.long_poll_token)
        snap = await _wait(context, namespace, snap, lambda s: s.state_transitions != seen or not s.running)
    state = snap.state
    response = rr.DescribeActivityExecutionResponse(
        run_id=state.run_id,
        info=standalone.describe(
            state,
            include_heartbeat_details=request.include_heartbeat_details,
            include_last_failure=request.include_last_failure,
        ),
    )
    custom = await dbthreads.run(registry.custom_types, namespace.id)
    if response.info.HasField("search_attributes"):
        search_attributes.apply_types(response.info.search_attributes, custom)
    info = standalone.current(state)
    if request.include_input and info is not None:
        scheduled = activity.scheduled_attributes(info)
        if scheduled.HasField("input"):
            response.input.CopyFrom(scheduled.input)
    outcome = standalone.outcome(state)
    if request.include_outcome and outcome is not None:
        response.outcome.CopyFrom(outcome)
    # The real server hands a token for a closed activity too (a poll with it answers at once).
    response.long_poll_token = _transitions_token(state.state_transitions)
    return response


async def poll_activity_execution(
    request: rr.PollActivityExecutionRequest, context: grpc.aio.ServicerContext
) -> rr.PollActivityExecutionResponse:
    """The activity's outcome once it has one; an answer without one when the long poll's time runs out."""
    namespace = await resolve.namespace(request.namespace)
    _ids(request)
    snap = await _snapshot(namespace, request.activity_id, request.run_id)
    snap = await _wait(context, namespace, snap, lambda s: not s.running)
    response = rr.PollActivityExecutionResponse(run_id=snap.state.run_id)
    outcome = standalone.outcome(snap.state)
    if outcome is not None:
        response.outcome.CopyFrom(outcome)
    return response


def _list_info(record: Record, custom: dict[str, SaType]) -> ActivityExecutionListInfo:
    closed = record.close_time is not None
    info = ActivityExecutionListInfo(
        activity_id=activity_id_of(record.workflow_id),
        run_id=record.run_id,
        activity_type=ActivityType(name=record.workflow_type),
        schedule_time=ts_micros(record.start_time),
        close_time=ts_micros(record.close_time),
        status=standalone.STATUS.get(
            record.status, ActivityExecutionStatus.ACTIVITY_EXECUTION_STATUS_UNSPECIFIED
        ),
        task_queue=record.task_queue,
        execution_time=ts_micros(record.execution_time),
    )
    if closed:
        info.state_transition_count = record.state_transition_count  # Temporal's is set once closed
    if record.execution_duration is not None:
        info.execution_duration.FromNanoseconds(record.execution_duration)
    if record.search_attributes:
        attrs = SearchAttributes.FromString(record.search_attributes)
        search_attributes.apply_types(attrs, custom)
        info.search_attributes.CopyFrom(attrs)
    return info


def _list_page(
    namespace: Namespace, query: str, page_size: int, page_token: bytes
) -> rr.ListActivityExecutionsResponse:
    records, token = selectors.activity_list(
        namespace_id=namespace.id, query=query, page_size=page_size, page_token=page_token
    )
    custom = registry.custom_types(namespace.id)
    return rr.ListActivityExecutionsResponse(
        executions=[_list_info(r, custom) for r in records],
        next_page_token=token,
    )


async def list_activity_executions(
    request: rr.ListActivityExecutionsRequest, context: grpc.aio.ServicerContext
) -> rr.ListActivityExecutionsResponse:
    namespace = await resolve.namespace(request.namespace)
    return await _guarded(
        _list_page,
        namespace=namespace,
        query=request.query,
        page_size=request.page_size or DEFAULT_PAGE_SIZE,
        page_token=request.next_page_token,
    )


def _status_payload(status: int) -> Payload:
    name = STATUS_BY_VALUE.get(status, str(status))
    return Payload(metadata={"encoding": b"json/plain", "type": b"Keyword"}, data=f'"{name}"'.encode())


async def count_activity_executions(
    request: rr.CountActivityExecutionsRequest, context: grpc.aio.ServicerContext
) -> rr.CountActivityExecutionsResponse:
    namespace = await resolve.namespace(request.namespace)
    total, groups = await _guarded(selectors.activity_count, namespace_id=namespace.id, query=request.query)
    return rr.CountActivityExecutionsResponse(
        count=total,
        groups=[
            rr.CountActivityExecutionsResponse.AggregationGroup(group_values=[_status_payload(s)], count=n)
            for s, n in groups
        ],
    )


def _target(
    request: rr.RequestCancelActivityExecutionRequest
    | rr.TerminateActivityExecutionRequest
    | rr.DeleteActivityExecutionRequest,
) -> None:
    validation.activity_id(request.activity_id)
    if request.run_id:
        try:
            validation.run_id(request.run_id)
        except InvalidArgument:
            raise InvalidArgument("invalid run id: must be a valid UUID") from None


async def request_cancel_activity_execution(
    request: rr.RequestCancelActivityExecutionRequest, context: grpc.aio.ServicerContext
) -> rr.RequestCancelActivityExecutionResponse:
    namespace = await resolve.namespace(request.namespace)
    _target(request)
    await dbthreads.run(
        standalone_activities.activity_request_cancel,
        namespace=namespace,
        activity_id=request.activity_id,
        run_id=request.run_id,
        reason=request.reason,
        identity=request.identity,
        request_id=request.request_id or str(uuid.uuid4()),  # Temporal's frontend fills it in too
    )
    return rr.RequestCancelActivityExecutionResponse()


async def terminate_activity_execution(
    request: rr.TerminateActivityExecutionRequest, context: grpc.aio.ServicerContext
) -> rr.TerminateActivityExecutionResponse:
    namespace = await resolve.namespace(request.namespace)
    _target(request)
    await dbthreads.run(
        standalone_activities.activity_terminate,
        namespace=namespace,
        activity_id=request.activity_id,
        run_id=request.run_id,
        reason=request.reason,
        identity=request.identity,
        request_id=request.request_id or str(uuid.uuid4()),  # Temporal's frontend fills it in too
    )
    return rr.TerminateActivityExecutionResponse()


async def delete_activity_execution(
    request: rr.DeleteActivityExecutionRequest, context: grpc.aio.ServicerContext
) -> rr.DeleteActivityExecutionResponse:
    namespace = await resolve.namespace(request.namespace)
    _target(request)
    await dbthreads.run(
        standalone_activities.activity_delete,
        namespace=namespace,
        activity_id=request.activity_id,
        run_id=request.run_id,
    )
    return rr.DeleteActivityExecutionResponse()
