"""Visibility RPCs (list, count, scan, search attributes): resolve, call a visibility selector, convert."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC
from typing import TypeVar

from temporalio.api.common.v1 import Memo, Payload, SearchAttributes, WorkflowExecution, WorkflowType
from temporalio.api.enums.v1 import (
    CommandType,
    IndexedValueType,
    WorkflowExecutionStatus,
    WorkflowTaskFailedCause,
)
from temporalio.api.failure.v1 import Failure
from temporalio.api.workflow.v1 import WorkflowExecutionInfo
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from engine import dbthreads
from engine.errors import InvalidArgument, Unavailable
from engine.persistence import visibility as visibility_store
from engine.services import workflow_tasks
from engine.tokens import TaskToken
from tenants.models import Namespace
from visibility import registry, selectors
from visibility.backends.base import BackendUnavailable, Record
from visibility.models import CustomSearchAttribute
from visibility.query.parser import QueryError
from visibility.search_attributes import (
    STATUS_BY_VALUE,
    SYSTEM,
    SaType,
    SearchAttributeError,
    format_datetime,
    from_micros,
    validate,
)

T = TypeVar("T")
DEFAULT_PAGE_SIZE = 1000


async def _namespace(name: str) -> Namespace:
    from engine.api.servicer import _namespace as resolve

    return await resolve(name)


async def _guarded(fn: Callable[..., T], **kwargs: object) -> T:
    try:
        return await dbthreads.run(fn, **kwargs)
    except (QueryError, SearchAttributeError) as e:
        raise InvalidArgument(str(e)) from None
    except BackendUnavailable as e:
        raise Unavailable(str(e)) from None


def _ts_micros(value: int | None):  # type: ignore[no-untyped-def]
    from engine.api.convert import ts

    return ts(from_micros(value)) if value is not None else None


def execution_info(record: Record, custom: dict[str, SaType]) -> WorkflowExecutionInfo:
    """A run's WorkflowExecutionInfo as list and scan return it."""
    info = WorkflowExecutionInfo(
        execution=WorkflowExecution(workflow_id=record.workflow_id, run_id=record.run_id),
        type=WorkflowType(name=record.workflow_type),
        start_time=_ts_micros(record.start_time),
        close_time=_ts_micros(record.close_time),
        status=WorkflowExecutionStatus.ValueType(record.status),
        history_length=record.history_length,
        execution_time=_ts_micros(record.execution_time),
        task_queue=record.task_queue,
        state_transition_count=record.state_transition_count,
        history_size_bytes=record.history_size_bytes,
        first_run_id=record.first_run_id,
        root_execution=WorkflowExecution(workflow_id=record.root_workflow_id, run_id=record.root_run_id),
    )
    if record.execution_duration is not None:
        info.execution_duration.FromNanoseconds(record.execution_duration)
    if record.parent_workflow_id is not None:
        info.parent_execution.CopyFrom(
            WorkflowExecution(workflow_id=record.parent_workflow_id, run_id=record.parent_run_id or "")
        )
    memo = visibility_store.memo_open(record.namespace_id, record.run_id, record.memo)
    if memo:
        info.memo.CopyFrom(Memo.FromString(memo))
    if record.search_attributes:
        attrs = SearchAttributes.FromString(record.search_attributes)
        for name, payload in attrs.indexed_fields.items():
            t = SYSTEM.get(name) or custom.get(name)
            if t is not None and "type" not in payload.metadata:
                # The SDK decodes typed attributes by this header; older clients may not have sent it.
                payload.metadata["type"] = t.name.encode()
        info.search_attributes.CopyFrom(attrs)
    return info


def _list_page(namespace: Namespace, query: str, page_size: int, page_token: bytes, scan: bool = False):  # type: ignore[no-untyped-def]
    select = selectors.execution_scan if scan else selectors.execution_list
    records, token = select(
        namespace_id=namespace.id, query=query, page_size=page_size, page_token=page_token
    )
    custom = registry.custom_types(namespace.id)
    return [execution_info(r, custom) for r in records], token


async def list_executions(request: rr.ListWorkflowExecutionsRequest) -> rr.ListWorkflowExecutionsResponse:
    namespace = await _namespace(request.namespace)
    executions, token = await _guarded(
        _list_page,
        namespace=namespace,
        query=request.query,
        page_size=request.page_size or DEFAULT_PAGE_SIZE,
        page_token=request.next_page_token,
    )
    return rr.ListWorkflowExecutionsResponse(executions=executions, next_page_token=token)


async def scan_executions(request: rr.ScanWorkflowExecutionsRequest) -> rr.ScanWorkflowExecutionsResponse:
    namespace = await _namespace(request.namespace)
    executions, token = await _guarded(
        _list_page,
        namespace=namespace,
        query=request.query,
        page_size=request.page_size or DEFAULT_PAGE_SIZE,
        page_token=request.next_page_token,
        scan=True,
    )
    return rr.ScanWorkflowExecutionsResponse(executions=executions, next_page_token=token)


def _quoted(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _legacy_query(request, *, closed: bool) -> str:  # type: ignore[no-untyped-def]
    """The filter the legacy open/closed listings mean, in the list-filter language."""
    terms = ["ExecutionStatus != 'Running'" if closed else "ExecutionStatus = 'Running'"]
    time_attr = "CloseTime" if closed else "StartTime"
    window = request.start_time_filter
    if window.HasField("earliest_time") and window.earliest_time.ToMicroseconds():
        terms.append(
            f"{time_attr} >= {_quoted(format_datetime(window.earliest_time.ToDatetime(tzinfo=UTC)))}"
        )
    if window.HasField("latest_time") and window.latest_time.ToMicroseconds():
        terms.append(f"{time_attr} <= {_quoted(format_datetime(window.latest_time.ToDatetime(tzinfo=UTC)))}")
    which = request.WhichOneof("filters")
    if which == "execution_filter":
        if request.execution_filter.workflow_id:
            terms.append(f"WorkflowId = {_quoted(request.execution_filter.workflow_id)}")
        if request.execution_filter.run_id:
            terms.append(f"RunId = {_quoted(request.execution_filter.run_id)}")
    elif which == "type_filter" and request.type_filter.name:
        terms.append(f"WorkflowType = {_quoted(request.type_filter.name)}")
    elif which == "status_filter" and request.status_filter.status:
        name = STATUS_BY_VALUE.get(int(request.status_filter.status))
        if name is None:
            raise InvalidArgument(f"unknown workflow execution status {request.status_filter.status}")
        terms[0] = f"ExecutionStatus = {_quoted(name)}"
    return " AND ".join(terms)


async def list_open(request: rr.ListOpenWorkflowExecutionsRequest) -> rr.ListOpenWorkflowExecutionsResponse:
    namespace = await _namespace(request.namespace)
    executions, token = await _guarded(
        _list_page,
        namespace=namespace,
        query=_legacy_query(request, closed=False),
        page_size=request.maximum_page_size or DEFAULT_PAGE_SIZE,
        page_token=request.next_page_token,
    )
    return rr.ListOpenWorkflowExecutionsResponse(executions=executions, next_page_token=token)


async def list_closed(
    request: rr.ListClosedWorkflowExecutionsRequest,
) -> rr.ListClosedWorkflowExecutionsResponse:
    namespace = await _namespace(request.namespace)
    executions, token = await _guarded(
        _list_page,
        namespace=namespace,
        query=_legacy_query(request, closed=True),
        page_size=request.maximum_page_size or DEFAULT_PAGE_SIZE,
        page_token=request.next_page_token,
    )
    return rr.ListClosedWorkflowExecutionsResponse(executions=executions, next_page_token=token)


def _status_payload(status: int) -> Payload:
    name = STATUS_BY_VALUE.get(status, str(status))
    return Payload(metadata={"encoding": b"json/plain", "type": b"Keyword"}, data=f'"{name}"'.encode())


async def count_executions(request: rr.CountWorkflowExecutionsRequest) -> rr.CountWorkflowExecutionsResponse:
    namespace = await _namespace(request.namespace)
    total, groups = await _guarded(selectors.execution_count, namespace_id=namespace.id, query=request.query)
    return rr.CountWorkflowExecutionsResponse(
        count=total,
        groups=[
            rr.CountWorkflowExecutionsResponse.AggregationGroup(group_values=[_status_payload(s)], count=n)
            for s, n in groups
        ],
    )


def _all_attributes() -> dict[str, int]:
    keys = {name: int(t) for name, t in SYSTEM.items()}
    for name, t in CustomSearchAttribute.objects.values_list("name", "type").distinct():
        keys.setdefault(name, t)
    return keys


async def get_search_attributes(_request: rr.GetSearchAttributesRequest) -> rr.GetSearchAttributesResponse:
    keys = await dbthreads.run(_all_attributes)
    return rr.GetSearchAttributesResponse(
        keys={name: IndexedValueType.ValueType(t) for name, t in keys.items()}
    )


def _check(namespace: Namespace, attrs: SearchAttributes) -> None:
    names = list(attrs.indexed_fields)
    custom = registry.custom_types(namespace.id, names=names)
    validate(attrs, custom, namespace=namespace.name)
    for name, payload in attrs.indexed_fields.items():
        # Temporal's ApplyTypeMap: the history records each value with its type, so workers decode
        # untyped (legacy) attributes as the registered type.
        t = SYSTEM.get(name) or custom.get(name)
        if t is not None and "type" not in payload.metadata:
            payload.metadata["type"] = t.name.encode()


async def check_search_attributes(namespace: Namespace, attrs: SearchAttributes | None) -> None:
    """Raise InvalidArgument when a start or upsert names an unknown attribute or a wrong-typed value.

    Values without a type header get their registered type (in place, so the history records it).
    """
    if attrs is None or not attrs.indexed_fields:
        return
    await _guarded(_check, namespace=namespace, attrs=attrs)


_SA_COMMANDS = {
    CommandType.COMMAND_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES: (
        "upsert_workflow_search_attributes_command_attributes"
    ),
    CommandType.COMMAND_TYPE_START_CHILD_WORKFLOW_EXECUTION: "start_child_workflow_execution_command_attributes",
    CommandType.COMMAND_TYPE_CONTINUE_AS_NEW_WORKFLOW_EXECUTION: (
        "continue_as_new_workflow_execution_command_attributes"
    ),
}


async def check_commands(
    namespace: Namespace, token: TaskToken, request: rr.RespondWorkflowTaskCompletedRequest
) -> None:
    """Reject a completion whose commands carry bad search attributes, as Temporal does: the workflow
    task fails with cause BadSearchAttributes (the worker retries it) and the call answers InvalidArgument.
    """
    for command in request.commands:
        field = _SA_COMMANDS.get(command.command_type)
        if field is None:
            continue
        attrs = getattr(command, field).search_attributes
        try:
            await check_search_attributes(namespace, attrs)
        except InvalidArgument as e:
            await dbthreads.run(
                workflow_tasks.workflow_task_fail,
                namespace=namespace,
                token=token,
                cause=WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SEARCH_ATTRIBUTES,
                failure=Failure(message=e.message),
                identity=request.identity,
                binary_checksum=request.binary_checksum,
            )
            raise
