"""Schedules: create, describe, update, patch, delete, list, count, and the times a spec matches."""

from __future__ import annotations

from typing import Any

import grpc
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from engine import dbthreads
from engine.api.rpc import resolve
from engine.api.rpc.visibility import check_search_attributes
from engine.services import schedule_lists, schedules
from tenants.models import Namespace


async def _check_search_attributes(namespace: Namespace, request: Any) -> None:
    """A schedule's own attributes and those its runs will start with are checked, and typed, like a start's."""
    if request.HasField("search_attributes"):
        await check_search_attributes(namespace, request.search_attributes)
    action = request.schedule.action
    if action.HasField("start_workflow") and action.start_workflow.HasField("search_attributes"):
        await check_search_attributes(namespace, action.start_workflow.search_attributes)


async def create_schedule(
    request: rr.CreateScheduleRequest, context: grpc.aio.ServicerContext
) -> rr.CreateScheduleResponse:
    namespace = await resolve.namespace(request.namespace)
    await _check_search_attributes(namespace, request)
    token = await dbthreads.run(schedules.schedule_create, namespace=namespace, request=request)
    return rr.CreateScheduleResponse(conflict_token=token.to_bytes(8, "big"))


async def describe_schedule(
    request: rr.DescribeScheduleRequest, context: grpc.aio.ServicerContext
) -> rr.DescribeScheduleResponse:
    namespace = await resolve.namespace(request.namespace)
    return await dbthreads.run(
        schedules.schedule_describe, namespace=namespace, schedule_id=request.schedule_id
    )


async def update_schedule(
    request: rr.UpdateScheduleRequest, context: grpc.aio.ServicerContext
) -> rr.UpdateScheduleResponse:
    namespace = await resolve.namespace(request.namespace)
    await _check_search_attributes(namespace, request)
    await dbthreads.run(schedules.schedule_update, namespace=namespace, request=request)
    return rr.UpdateScheduleResponse()


async def patch_schedule(
    request: rr.PatchScheduleRequest, context: grpc.aio.ServicerContext
) -> rr.PatchScheduleResponse:
    namespace = await resolve.namespace(request.namespace)
    await dbthreads.run(schedules.schedule_patch, namespace=namespace, request=request)
    return rr.PatchScheduleResponse()


async def delete_schedule(
    request: rr.DeleteScheduleRequest, context: grpc.aio.ServicerContext
) -> rr.DeleteScheduleResponse:
    namespace = await resolve.namespace(request.namespace)
    await dbthreads.run(schedules.schedule_delete, namespace=namespace, schedule_id=request.schedule_id)
    return rr.DeleteScheduleResponse()


async def list_schedules(
    request: rr.ListSchedulesRequest, context: grpc.aio.ServicerContext
) -> rr.ListSchedulesResponse:
    namespace = await resolve.namespace(request.namespace)
    return await dbthreads.run(
        schedule_lists.schedule_list,
        namespace=namespace,
        page_size=request.maximum_page_size,
        page_token=request.next_page_token,
        query=request.query,
    )


async def count_schedules(
    request: rr.CountSchedulesRequest, context: grpc.aio.ServicerContext
) -> rr.CountSchedulesResponse:
    namespace = await resolve.namespace(request.namespace)
    count = await dbthreads.run(schedule_lists.schedule_count, namespace=namespace, query=request.query)
    return rr.CountSchedulesResponse(count=count)


async def list_schedule_matching_times(
    request: rr.ListScheduleMatchingTimesRequest, context: grpc.aio.ServicerContext
) -> rr.ListScheduleMatchingTimesResponse:
    namespace = await resolve.namespace(request.namespace)
    times = await dbthreads.run(schedules.schedule_matching_times, namespace=namespace, request=request)
    return rr.ListScheduleMatchingTimesResponse(start_time=times)
