"""Visibility RPCs (list, count, scan, search attributes): resolve, call a visibility selector, convert."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC
from typing import TypeVar

import grpc
from temporalio.api.common.v1 import Payload, SearchAttributes
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.workflow.v1 import WorkflowExecutionInfo
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from engine import dbthreads
from engine.api.rpc import resolve
from engine.errors import InvalidArgument, Unavailable
from engine.services import run_descriptions, search_attributes
from tenants.models import Namespace
from visibility import registry, selectors
from visibility.backends.base import BackendUnavailable
from visibility.models import CustomSearchAttribute
from visibility.query.parser import QueryError
from visibility.search_attributes import STATUS_BY_VALUE, SYSTEM, SearchAttributeError, format_datetime

T = TypeVar("T")
DEFAULT_PAGE_SIZE = 1000
_Page = tuple[list[WorkflowExecutionInfo], bytes]


async def _guarded(fn: Callable[..., T], **kwargs: object) -> T:
    try:
        return await dbthreads.run(fn, **kwargs)
    except (QueryError, SearchAttributeError) as e:
        raise InvalidArgument(str(e)) from None
    except BackendUnavailable as e:
        raise Unavailable(str(e)) from None


def _list_page(
    namespace: Namespace, query: str, page_size: int, page_token: bytes, scan: bool, archived: bool = False
) -> _Page:
    select = (
        selectors.archived_execution_list
        if archived
        else selectors.execution_scan
        if scan
        else selectors.execution_list
    )
    records, token = select(
        namespace_id=namespace.id, query=query, page_size=page_size, page_token=page_token
    )
    custom = registry.custom_types(namespace.id)
    return [run_descriptions.execution_info(r, custom) for r in records], token


async def _page(
    namespace: Namespace,
    query: str,
    page_size: int,
    page_token: bytes,
    *,
    scan: bool = False,
    archived: bool = False,
) -> _Page:
    """A page of runs as list and scan return them (or of the archive index), and the next page's token."""
    return await _guarded(
        _list_page,
        namespace=namespace,
        query=query,
        page_size=page_size or DEFAULT_PAGE_SIZE,
        page_token=page_token,
        scan=scan,
        archived=archived,
    )


async def list_workflow_executions(
    request: rr.ListWorkflowExecutionsRequest, context: grpc.aio.ServicerContext
) -> rr.ListWorkflowExecutionsResponse:
    namespace = await resolve.namespace(request.namespace)
    executions, token = await _page(namespace, request.query, request.page_size, request.next_page_token)
    return rr.ListWorkflowExecutionsResponse(executions=executions, next_page_token=token)


async def list_archived_workflow_executions(
    request: rr.ListArchivedWorkflowExecutionsRequest, context: grpc.aio.ServicerContext
) -> rr.ListArchivedWorkflowExecutionsResponse:
    """The namespace's archive index (closed runs whose visibility was archived, kept after retention),
    with the whole list-filter language, paged as ListWorkflowExecutions."""
    namespace = await resolve.namespace(request.namespace)
    executions, token = await _page(
        namespace, request.query, request.page_size, request.next_page_token, archived=True
    )
    return rr.ListArchivedWorkflowExecutionsResponse(executions=executions, next_page_token=token)


async def scan_workflow_executions(
    request: rr.ScanWorkflowExecutionsRequest, context: grpc.aio.ServicerContext
) -> rr.ScanWorkflowExecutionsResponse:
    namespace = await resolve.namespace(request.namespace)
    executions, token = await _page(
        namespace, request.query, request.page_size, request.next_page_token, scan=True
    )
    return rr.ScanWorkflowExecutionsResponse(executions=executions, next_page_token=token)


def _quoted(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _legacy_query(
    request: rr.ListOpenWorkflowExecutionsRequest | rr.ListClosedWorkflowExecutionsRequest, *, closed: bool
) -> str:
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
    elif (
        which == "status_filter"
        and isinstance(request, rr.ListClosedWorkflowExecutionsRequest)  # the only one that has it
        and request.status_filter.status
    ):
        name = STATUS_BY_VALUE.get(int(request.status_filter.status))
        if name is None:
            raise InvalidArgument(f"unknown workflow execution status {request.status_filter.status}")
        terms[0] = f"ExecutionStatus = {_quoted(name)}"
    return " AND ".join(terms)


async def list_open_workflow_executions(
    request: rr.ListOpenWorkflowExecutionsRequest, context: grpc.aio.ServicerContext
) -> rr.ListOpenWorkflowExecutionsResponse:
    namespace = await resolve.namespace(request.namespace)
    executions, token = await _page(
        namespace, _legacy_query(request, closed=False), request.maximum_page_size, request.next_page_token
    )
    return rr.ListOpenWorkflowExecutionsResponse(executions=executions, next_page_token=token)


async def list_closed_workflow_executions(
    request: rr.ListClosedWorkflowExecutionsRequest, context: grpc.aio.ServicerContext
) -> rr.ListClosedWorkflowExecutionsResponse:
    namespace = await resolve.namespace(request.namespace)
    executions, token = await _page(
        namespace, _legacy_query(request, closed=True), request.maximum_page_size, request.next_page_token
    )
    return rr.ListClosedWorkflowExecutionsResponse(executions=executions, next_page_token=token)


def _status_payload(status: int) -> Payload:
    name = STATUS_BY_VALUE.get(status, str(status))
    return Payload(metadata={"encoding": b"json/plain", "type": b"Keyword"}, data=f'"{name}"'.encode())


async def count_workflow_executions(
    request: rr.CountWorkflowExecutionsRequest, context: grpc.aio.ServicerContext
) -> rr.CountWorkflowExecutionsResponse:
    namespace = await resolve.namespace(request.namespace)
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


async def get_search_attributes(
    request: rr.GetSearchAttributesRequest, context: grpc.aio.ServicerContext
) -> rr.GetSearchAttributesResponse:
    keys = await dbthreads.run(_all_attributes)
    return rr.GetSearchAttributesResponse(
        keys={name: IndexedValueType.ValueType(t) for name, t in keys.items()}
    )


async def check_search_attributes(namespace: Namespace, attrs: SearchAttributes | None) -> None:
    """Raise InvalidArgument when a start or upsert names an unknown attribute or a wrong-typed value.

    Values without a type header get their registered type (in place, so the history records it).
    """
    if attrs is None or not attrs.indexed_fields:
        return
    await dbthreads.run(search_attributes.search_attributes_check, namespace=namespace, attrs=attrs)
