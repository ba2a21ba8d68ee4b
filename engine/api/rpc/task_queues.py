"""Task queues over gRPC: DescribeTaskQueue (pollers and backlog), ShutdownWorker, and noting the pollers of
every poll."""

from __future__ import annotations

from datetime import timedelta

import grpc
from google.protobuf.duration_pb2 import Duration
from perdura import clock
from temporalio.api.enums.v1 import (
    BuildIdTaskReachability,
    DescribeTaskQueueMode,
    TaskQueueKind,
    TaskQueueType,
)
from temporalio.api.taskqueue.v1 import (
    PollerInfo,
    TaskQueueStats,
    TaskQueueStatus,
    TaskQueueTypeInfo,
    TaskQueueVersionInfo,
)
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from engine import dbthreads, validation
from engine.api.rpc import resolve
from engine.errors import InvalidArgument
from engine.history.mutation import TaskKind
from engine.matching import pollers, queue
from engine.proto_values import ts
from engine.services import workflow_tasks
from tenants.models import Namespace

WORKFLOW = TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW
ACTIVITY = TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY
ENHANCED = DescribeTaskQueueMode.DESCRIBE_TASK_QUEUE_MODE_ENHANCED
DEFAULT_PRIORITY_KEY = 3
"""The priority key tasks without a priority get (Temporal's default of 5 levels)."""
_TASK_KINDS: dict[int, TaskKind] = {WORKFLOW: TaskKind.WORKFLOW, ACTIVITY: TaskKind.ACTIVITY}


def poller_seen(
    namespace: Namespace,
    queue_type: int,
    request: rr.PollWorkflowTaskQueueRequest | rr.PollActivityTaskQueueRequest,
) -> None:
    """A Poll*TaskQueue call arrived: note its worker as a poller of the queue (cheap; never fails)."""
    if not request.identity:
        return
    rate = pollers.DEFAULT_RATE_PER_SECOND
    metadata = getattr(request, "task_queue_metadata", None)
    if metadata is not None and metadata.HasField("max_tasks_per_second"):
        rate = metadata.max_tasks_per_second.value
    info = PollerInfo(identity=request.identity, last_access_time=ts(clock.now()), rate_per_second=rate)
    if request.HasField("worker_version_capabilities"):
        info.worker_version_capabilities.CopyFrom(request.worker_version_capabilities)
    if request.HasField("deployment_options"):
        info.deployment_options.CopyFrom(request.deployment_options)
    pollers.store().seen(pollers.QueueKey(str(namespace.id), request.task_queue.name, queue_type), info)


async def shutdown_worker(
    request: rr.ShutdownWorkerRequest, context: grpc.aio.ServicerContext
) -> rr.ShutdownWorkerResponse:
    """A worker stops polling: describe stops listing it at once (as Temporal), and its sticky queue's
    runs go back to their normal queue."""
    namespace = await resolve.namespace(request.namespace)
    await _pollers_gone(namespace, request)
    if request.sticky_task_queue:
        await dbthreads.run(
            workflow_tasks.sticky_queue_shutdown, namespace=namespace, sticky_queue=request.sticky_task_queue
        )
    return rr.ShutdownWorkerResponse()


async def _pollers_gone(namespace: Namespace, request: rr.ShutdownWorkerRequest) -> None:
    if not request.identity:
        return
    keys = []
    if request.task_queue:
        types = list(request.task_queue_types) or [WORKFLOW, ACTIVITY]
        keys += [pollers.QueueKey(str(namespace.id), request.task_queue, t) for t in types]
    if request.sticky_task_queue:
        keys.append(pollers.QueueKey(str(namespace.id), request.sticky_task_queue, WORKFLOW))
    for key in keys:
        await pollers.store().remove(key, request.identity)


def _validate(request: rr.DescribeTaskQueueRequest) -> None:
    if not request.HasField("task_queue"):
        raise InvalidArgument("taskQueue is not set")
    name = request.task_queue.name
    if not name:
        raise InvalidArgument("missing task queue name")
    if len(name) > validation.MAX_ID_LENGTH:
        raise InvalidArgument("taskQueue length exceeds limit")
    if request.api_mode == ENHANCED and request.task_queue.kind == TaskQueueKind.TASK_QUEUE_KIND_STICKY:
        raise InvalidArgument(
            "Enhanced DescribeTaskQueue is not valid for a sticky queue, use api_mode=UNSPECIFIED or a normal queue."
        )


def _stats(namespace: Namespace, task_queue: str, queue_type: int) -> TaskQueueStats:
    kind = _TASK_KINDS.get(queue_type)
    stats = TaskQueueStats(approximate_backlog_age=Duration())
    if kind is None:
        return stats
    backlog = queue.backlog(namespace.id, kind, task_queue)
    stats.approximate_backlog_count = backlog.count
    if backlog.oldest_visible_at is not None:
        stats.approximate_backlog_age.FromTimedelta(
            max(clock.now() - backlog.oldest_visible_at, timedelta(0))
        )
    return stats


async def describe_task_queue(
    request: rr.DescribeTaskQueueRequest, context: grpc.aio.ServicerContext
) -> rr.DescribeTaskQueueResponse:
    """DescribeTaskQueue, as Temporal answers it for an unversioned queue without partitions.

    Default mode: the pollers of one type (workflow when unset), plus backlog stats (`report_stats`) and
    the deprecated status (`include_task_queue_status`). Enhanced mode (deprecated): per requested type
    (both when none), pollers (`report_pollers`) and stats (`report_stats`) under the unversioned
    build id "". Add and dispatch rates are not tracked and report 0.

    Raises:
        InvalidArgument: no task queue, an empty or too long name, enhanced mode on a sticky queue.
        Unavailable: the poller registry cannot be read.
    """
    namespace = await resolve.namespace(request.namespace)
    _validate(request)
    name = request.task_queue.name
    namespace_id = str(namespace.id)
    if request.api_mode == ENHANCED:
        types_info = {}
        for queue_type in list(request.task_queue_types) or [WORKFLOW, ACTIVITY]:
            info = TaskQueueTypeInfo()
            if request.report_pollers:
                info.pollers.extend(
                    await pollers.store().list(pollers.QueueKey(namespace_id, name, queue_type))
                )
            if request.report_stats:
                info.stats.CopyFrom(await dbthreads.run(_stats, namespace, name, queue_type))
            types_info[int(queue_type)] = info
        version = TaskQueueVersionInfo(types_info=types_info)
        if request.report_task_reachability:
            # Without worker versioning every task goes to the unversioned pollers.
            version.task_reachability = BuildIdTaskReachability.BUILD_ID_TASK_REACHABILITY_REACHABLE
        return rr.DescribeTaskQueueResponse(versions_info={"": version})
    queue_type = request.task_queue_type or WORKFLOW
    response = rr.DescribeTaskQueueResponse(
        pollers=await pollers.store().list(pollers.QueueKey(namespace_id, name, queue_type))
    )
    if request.report_stats or request.include_task_queue_status:
        stats = await dbthreads.run(_stats, namespace, name, queue_type)
        if request.report_stats:
            response.stats.CopyFrom(stats)
            response.stats_by_priority_key[DEFAULT_PRIORITY_KEY].CopyFrom(stats)
        if request.include_task_queue_status:
            response.task_queue_status.CopyFrom(
                TaskQueueStatus(
                    backlog_count_hint=stats.approximate_backlog_count,
                    rate_per_second=pollers.DEFAULT_RATE_PER_SECOND,
                )
            )
    return response
