"""Worker deployments over gRPC: describe, list, route (current and ramping versions), delete, metadata.

The registry itself is engine/services/deployments.py; this module validates requests and builds the
Server 1.32 messages (both the deprecated version strings and the structured versions are filled, as
the SDKs of either age read one or the other).
"""

from __future__ import annotations

import struct

import grpc
from temporalio.api.deployment.v1 import (
    RoutingConfig,
    VersionMetadata,
    WorkerDeploymentInfo,
    WorkerDeploymentVersion,
    WorkerDeploymentVersionInfo,
)
from temporalio.api.enums.v1 import TaskQueueKind, WorkerVersioningMode
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from engine import dbthreads
from engine.api.rpc import resolve
from engine.errors import InvalidArgument, Unimplemented
from engine.models import WorkerDeployment
from engine.models import WorkerDeploymentVersion as VersionRow
from engine.proto_values import ts
from engine.services import deployments as registry
from engine.services import drainage, task_routing
from tenants.models import Namespace

Summary = WorkerDeploymentInfo.WorkerDeploymentVersionSummary
DEFAULT_PAGE_SIZE = 100
COMPUTE_UNSERVED = "Perdura does not start workers: worker deployment compute configs are not served."
VERSIONED = WorkerVersioningMode.WORKER_VERSIONING_MODE_VERSIONED


async def poll_seen(
    namespace: Namespace, request: rr.PollWorkflowTaskQueueRequest | rr.PollActivityTaskQueueRequest
) -> None:
    """Register the deployment version of a versioned poller (unversioned polls cost nothing here)."""
    options = request.deployment_options
    if options.worker_versioning_mode != VERSIONED or not options.deployment_name or not options.build_id:
        return
    if request.task_queue.kind == TaskQueueKind.TASK_QUEUE_KIND_STICKY:
        return  # a worker's own queue: its normal queue registered the version
    registry.validate_name(options.deployment_name)
    registry.validate_name(options.build_id, "build id")
    await dbthreads.run(
        registry.poll_seen, namespace.id, options.deployment_name, options.build_id, request.task_queue.name
    )


def poller_version(
    request: rr.PollWorkflowTaskQueueRequest | rr.PollActivityTaskQueueRequest,
) -> task_routing.PollerVersion | None:
    """The deployment version a poller serves (None: unversioned), for task routing."""
    options = request.deployment_options
    if options.worker_versioning_mode != VERSIONED or not options.deployment_name or not options.build_id:
        return None
    return task_routing.PollerVersion(options.deployment_name, options.build_id)


def waiter_group(version: task_routing.PollerVersion | None) -> str:
    """The notify.Hub group of a poller's waiter: its deployment version ("" unversioned)."""
    return f"{version.deployment_name}\x1f{version.build_id}" if version is not None else ""


def _deployment_version(deployment_name: str, build_id: str) -> WorkerDeploymentVersion | None:
    return WorkerDeploymentVersion(deployment_name=deployment_name, build_id=build_id) if build_id else None


def _routing(d: WorkerDeployment) -> RoutingConfig:
    return RoutingConfig(
        current_deployment_version=_deployment_version(d.name, d.current_build_id),
        current_version=registry.version_string(d.name, d.current_build_id),
        ramping_deployment_version=_deployment_version(d.name, d.ramping_build_id),
        ramping_version=registry.version_string(d.name, d.ramping_build_id) if d.ramping_build_id else "",
        ramping_version_percentage=d.ramping_percentage,
        current_version_changed_time=ts(d.current_changed_at),
        ramping_version_changed_time=ts(d.ramping_changed_at),
        ramping_version_percentage_changed_time=ts(d.ramping_percentage_changed_at),
        revision_number=d.revision,
    )


def _summary(d: WorkerDeployment, v: VersionRow) -> Summary:
    drained = drainage.info(d, v)
    return Summary(
        version=registry.version_string(d.name, v.build_id),
        status=registry.status(d, v),  # type: ignore[arg-type]
        drainage_status=drained.status if drained is not None else 0,  # type: ignore[arg-type]
        drainage_info=drained,
        deployment_version=_deployment_version(d.name, v.build_id),
        create_time=ts(v.created_at),
        current_since_time=ts(v.current_since),
        ramping_since_time=ts(v.ramping_since),
        routing_update_time=ts(v.routing_changed_at),
        first_activation_time=ts(v.first_activation_at),
        last_current_time=ts(v.last_current_at),
        last_deactivation_time=ts(v.last_deactivation_at),
    )


def _info(d: WorkerDeployment, versions: list[VersionRow]) -> WorkerDeploymentInfo:
    return WorkerDeploymentInfo(
        name=d.name,
        version_summaries=[_summary(d, v) for v in versions],
        create_time=ts(d.created_at),
        routing_config=_routing(d),
        last_modifier_identity=d.last_modifier_identity,
        manager_identity=d.manager_identity,
    )


def _ref(namespace_version: str, structured: WorkerDeploymentVersion | None) -> registry.Ref:
    if structured is not None and (structured.deployment_name or structured.build_id):
        registry.validate_name(structured.deployment_name)
        if not structured.build_id:
            raise InvalidArgument("build id cannot be empty")
        return registry.Ref(structured.deployment_name, structured.build_id)
    if not namespace_version:
        raise InvalidArgument("deployment version cannot be empty")
    return registry.parse_version(namespace_version)


def _target_build_id(name: str, version: str, build_id: str) -> str:
    """The build id a Set*Version request names: `build_id` (1.32) or the version string; empty: unversioned."""
    if build_id:
        return build_id
    if not version:
        return ""
    return registry.parse_version(version, deployment_name=name).build_id


async def create_worker_deployment(
    request: rr.CreateWorkerDeploymentRequest, context: grpc.aio.ServicerContext
) -> rr.CreateWorkerDeploymentResponse:
    namespace = await resolve.namespace(request.namespace)
    registry.validate_new_name(request.deployment_name)

    def create() -> rr.CreateWorkerDeploymentResponse:
        d = registry.create_deployment(
            namespace.id, request.deployment_name, identity=request.identity, request_id=request.request_id
        )
        return rr.CreateWorkerDeploymentResponse(conflict_token=registry.conflict_token(d))

    return await dbthreads.run(create)


async def create_worker_deployment_version(
    request: rr.CreateWorkerDeploymentVersionRequest, context: grpc.aio.ServicerContext
) -> rr.CreateWorkerDeploymentVersionResponse:
    namespace = await resolve.namespace(request.namespace)
    version = request.deployment_version
    registry.validate_new_name(version.deployment_name)
    registry.validate_name(version.build_id, "build ID")
    if request.HasField("compute_config") and request.compute_config.ByteSize():
        raise Unimplemented(COMPUTE_UNSERVED)
    ref = registry.Ref(version.deployment_name, version.build_id)
    await dbthreads.run(
        registry.create_version, namespace.id, ref, identity=request.identity, request_id=request.request_id
    )
    return rr.CreateWorkerDeploymentVersionResponse()


async def set_worker_deployment_manager(
    request: rr.SetWorkerDeploymentManagerRequest, context: grpc.aio.ServicerContext
) -> rr.SetWorkerDeploymentManagerResponse:
    namespace = await resolve.namespace(request.namespace)
    registry.validate_name(request.deployment_name)
    manager = request.identity if request.self else request.manager_identity

    def set_manager() -> rr.SetWorkerDeploymentManagerResponse:
        d, previous = registry.set_manager(
            namespace.id,
            request.deployment_name,
            manager,
            token=request.conflict_token,
            identity=request.identity,
        )
        return rr.SetWorkerDeploymentManagerResponse(
            conflict_token=registry.conflict_token(d), previous_manager_identity=previous
        )

    return await dbthreads.run(set_manager)


async def describe_worker_deployment(
    request: rr.DescribeWorkerDeploymentRequest, context: grpc.aio.ServicerContext
) -> rr.DescribeWorkerDeploymentResponse:
    namespace = await resolve.namespace(request.namespace)
    registry.validate_name(request.deployment_name)

    def read() -> rr.DescribeWorkerDeploymentResponse:
        d = registry.get_deployment(namespace.id, request.deployment_name)
        versions = registry.versions(d)
        for version in versions:
            drainage.refresh(d, version)
        return rr.DescribeWorkerDeploymentResponse(
            conflict_token=registry.conflict_token(d), worker_deployment_info=_info(d, versions)
        )

    return await dbthreads.run(read)


async def list_worker_deployments(
    request: rr.ListWorkerDeploymentsRequest, context: grpc.aio.ServicerContext
) -> rr.ListWorkerDeploymentsResponse:
    namespace = await resolve.namespace(request.namespace)
    if request.page_size < 0:
        raise InvalidArgument("page_size cannot be negative")
    after = _page_after(request.next_page_token)
    size = request.page_size or DEFAULT_PAGE_SIZE

    def read() -> rr.ListWorkerDeploymentsResponse:
        rows = registry.list_deployments(namespace.id, after_id=after, page_size=size)
        response = rr.ListWorkerDeploymentsResponse()
        for d in rows:
            versions = {v.build_id: v for v in registry.versions(d)}
            item = response.worker_deployments.add(name=d.name, create_time=ts(d.created_at))
            item.routing_config.CopyFrom(_routing(d))
            if versions:
                item.latest_version_summary.CopyFrom(_summary(d, list(versions.values())[-1]))
            if d.current_build_id in versions:
                item.current_version_summary.CopyFrom(_summary(d, versions[d.current_build_id]))
            if d.ramping_build_id in versions:
                item.ramping_version_summary.CopyFrom(_summary(d, versions[d.ramping_build_id]))
        if len(rows) == size:
            response.next_page_token = struct.pack(">q", rows[-1].id)
        return response

    return await dbthreads.run(read)


def _page_after(token: bytes) -> int:
    if not token:
        return 0
    if len(token) != 8:
        raise InvalidArgument("next_page_token is not a token of ListWorkerDeployments")
    (after,) = struct.unpack(">q", token)
    return int(after)


async def describe_worker_deployment_version(
    request: rr.DescribeWorkerDeploymentVersionRequest, context: grpc.aio.ServicerContext
) -> rr.DescribeWorkerDeploymentVersionResponse:
    namespace = await resolve.namespace(request.namespace)
    structured = request.deployment_version if request.HasField("deployment_version") else None
    ref = _ref(request.version, structured)

    def read() -> rr.DescribeWorkerDeploymentVersionResponse:
        v = registry.get_version(namespace.id, ref)
        d = v.deployment
        drainage.refresh(d, v)
        info = WorkerDeploymentVersionInfo(
            version=registry.version_string(d.name, v.build_id),
            status=registry.status(d, v),  # type: ignore[arg-type]
            deployment_version=_deployment_version(d.name, v.build_id),
            deployment_name=d.name,
            create_time=ts(v.created_at),
            routing_changed_time=ts(v.routing_changed_at),
            current_since_time=ts(v.current_since),
            ramping_since_time=ts(v.ramping_since),
            first_activation_time=ts(v.first_activation_at),
            last_current_time=ts(v.last_current_at),
            last_deactivation_time=ts(v.last_deactivation_at),
            ramp_percentage=d.ramping_percentage if d.ramping_build_id == v.build_id else 0.0,
            metadata=registry.metadata(v),
            last_modifier_identity=v.last_modifier_identity,
            drainage_info=drainage.info(d, v),
        )
        return rr.DescribeWorkerDeploymentVersionResponse(worker_deployment_version_info=info)

    return await dbthreads.run(read)


async def set_worker_deployment_current_version(
    request: rr.SetWorkerDeploymentCurrentVersionRequest, context: grpc.aio.ServicerContext
) -> rr.SetWorkerDeploymentCurrentVersionResponse:
    namespace = await resolve.namespace(request.namespace)
    registry.validate_name(request.deployment_name)
    build_id = _target_build_id(request.deployment_name, request.version, request.build_id)
    change = await dbthreads.run(
        registry.set_current,
        namespace.id,
        request.deployment_name,
        build_id,
        token=request.conflict_token,
        identity=request.identity,
    )
    name = request.deployment_name
    return rr.SetWorkerDeploymentCurrentVersionResponse(
        conflict_token=registry.conflict_token(change.deployment),
        previous_version=registry.version_string(name, change.previous_build_id),
        previous_deployment_version=_deployment_version(name, change.previous_build_id),
    )


async def set_worker_deployment_ramping_version(
    request: rr.SetWorkerDeploymentRampingVersionRequest, context: grpc.aio.ServicerContext
) -> rr.SetWorkerDeploymentRampingVersionResponse:
    namespace = await resolve.namespace(request.namespace)
    registry.validate_name(request.deployment_name)
    build_id = _target_build_id(request.deployment_name, request.version, request.build_id)
    change = await dbthreads.run(
        registry.set_ramping,
        namespace.id,
        request.deployment_name,
        build_id,
        request.percentage,
        token=request.conflict_token,
        identity=request.identity,
    )
    name = request.deployment_name
    previous = change.previous_build_id
    return rr.SetWorkerDeploymentRampingVersionResponse(
        conflict_token=registry.conflict_token(change.deployment),
        previous_version=registry.version_string(name, previous) if previous else "",
        previous_deployment_version=_deployment_version(name, previous),
        previous_percentage=change.previous_percentage,
    )


async def delete_worker_deployment_version(
    request: rr.DeleteWorkerDeploymentVersionRequest, context: grpc.aio.ServicerContext
) -> rr.DeleteWorkerDeploymentVersionResponse:
    namespace = await resolve.namespace(request.namespace)
    structured = request.deployment_version if request.HasField("deployment_version") else None
    ref = _ref(request.version, structured)
    await dbthreads.run(
        registry.delete_version,
        namespace.id,
        ref,
        skip_drainage=request.skip_drainage,
        identity=request.identity,
    )
    return rr.DeleteWorkerDeploymentVersionResponse()


async def delete_worker_deployment(
    request: rr.DeleteWorkerDeploymentRequest, context: grpc.aio.ServicerContext
) -> rr.DeleteWorkerDeploymentResponse:
    namespace = await resolve.namespace(request.namespace)
    registry.validate_name(request.deployment_name)
    await dbthreads.run(registry.delete_deployment, namespace.id, request.deployment_name)
    return rr.DeleteWorkerDeploymentResponse()


async def update_worker_deployment_version_metadata(
    request: rr.UpdateWorkerDeploymentVersionMetadataRequest, context: grpc.aio.ServicerContext
) -> rr.UpdateWorkerDeploymentVersionMetadataResponse:
    namespace = await resolve.namespace(request.namespace)
    structured = request.deployment_version if request.HasField("deployment_version") else None
    ref = _ref(request.version, structured)
    upsert = VersionMetadata()
    for key, value in request.upsert_entries.items():
        upsert.entries[key].CopyFrom(value)
    metadata = await dbthreads.run(
        registry.update_metadata, namespace.id, ref, upsert, list(request.remove_entries), request.identity
    )
    return rr.UpdateWorkerDeploymentVersionMetadataResponse(metadata=metadata)
