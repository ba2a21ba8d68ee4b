"""Worker deployments with the official SDK: learned from versioned pollers, described, listed, routed
(current and ramping versions, with conflict tokens), deleted, annotated; and the versioning fields a
versioned worker's completions write on WorkflowTaskCompleted events."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.common.v1 import Payload
from temporalio.api.deployment.v1 import WorkerDeploymentVersion as VersionMessage
from temporalio.api.enums.v1 import VersioningBehavior, WorkerDeploymentVersionStatus
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr
from temporalio.client import Client
from temporalio.common import WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker, WorkerDeploymentConfig

from tests.e2e import deployment_workflows as dw
from tests.e2e.conftest import events, new_id

Status = WorkerDeploymentVersionStatus


def versioned_worker(client: Client, task_queue: str, version: WorkerDeploymentVersion, **kwargs) -> Worker:
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[dw.PinnedWorkflow, dw.AutoUpgradeWorkflow],
        deployment_config=WorkerDeploymentConfig(version=version, use_worker_versioning=True, **kwargs),
    )


async def describe(client: Client, name: str) -> rr.DescribeWorkerDeploymentResponse:
    return await client.workflow_service.describe_worker_deployment(
        rr.DescribeWorkerDeploymentRequest(namespace=client.namespace, deployment_name=name), retry=False
    )


async def visible(client: Client, version: WorkerDeploymentVersion) -> rr.DescribeWorkerDeploymentResponse:
    """The deployment, once the version's first poll registered it (pollers start asynchronously)."""
    for _ in range(100):
        try:
            response = await describe(client, version.deployment_name)
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
        else:
            versions = [s.version for s in response.worker_deployment_info.version_summaries]
            if version.to_canonical_string() in versions:
                return response
        await asyncio.sleep(0.1)
    raise AssertionError(f"{version} never became visible")


async def set_current(client: Client, version: WorkerDeploymentVersion, token: bytes):
    return await client.workflow_service.set_worker_deployment_current_version(
        rr.SetWorkerDeploymentCurrentVersionRequest(
            namespace=client.namespace,
            deployment_name=version.deployment_name,
            version=version.to_canonical_string(),
            conflict_token=token,
            identity="operator",
        ),
        retry=False,
    )


async def set_ramping(client: Client, version: WorkerDeploymentVersion, percentage: float, token: bytes):
    return await client.workflow_service.set_worker_deployment_ramping_version(
        rr.SetWorkerDeploymentRampingVersionRequest(
            namespace=client.namespace,
            deployment_name=version.deployment_name,
            build_id=version.build_id,
            percentage=percentage,
            conflict_token=token,
        ),
        retry=False,
    )


async def describe_version(client: Client, version: WorkerDeploymentVersion):
    response = await client.workflow_service.describe_worker_deployment_version(
        rr.DescribeWorkerDeploymentVersionRequest(
            namespace=client.namespace,
            deployment_version=VersionMessage(
                deployment_name=version.deployment_name, build_id=version.build_id
            ),
        ),
        retry=False,
    )
    return response.worker_deployment_version_info


async def test_versioned_pollers_register_their_deployment_and_operators_route_it(client: Client):
    name = new_id("deployment")
    v1 = WorkerDeploymentVersion(deployment_name=name, build_id="1.0")
    v2 = WorkerDeploymentVersion(deployment_name=name, build_id="2.0")
    queue = new_id("tq")
    async with versioned_worker(client, queue, v1), versioned_worker(client, queue, v2):
        await visible(client, v1)
        first = await visible(client, v2)
        assert first.worker_deployment_info.name == name
        assert {s.status for s in first.worker_deployment_info.version_summaries} == {
            Status.WORKER_DEPLOYMENT_VERSION_STATUS_INACTIVE
        }
        assert not first.worker_deployment_info.routing_config.HasField("current_deployment_version")

        current = await set_current(client, v1, first.conflict_token)
        assert current.previous_version == "__unversioned__"
        assert current.conflict_token != first.conflict_token
        with pytest.raises(RPCError) as stale:
            await set_current(client, v2, first.conflict_token)
        assert stale.value.status == RPCStatusCode.FAILED_PRECONDITION
        assert "conflict token mismatch" in stale.value.message

        with pytest.raises(RPCError) as too_much:
            await set_ramping(client, v2, 150, current.conflict_token)
        assert too_much.value.status == RPCStatusCode.INVALID_ARGUMENT
        assert "Percentage must be between 0 and 100" in too_much.value.message
        ramp = await set_ramping(client, v2, 30, current.conflict_token)
        assert ramp.previous_version == ""
        assert ramp.previous_percentage == 0

        routed = await describe(client, name)
        routing = routed.worker_deployment_info.routing_config
        assert routing.current_deployment_version.build_id == "1.0"
        assert routing.current_version == v1.to_canonical_string()
        assert routing.ramping_deployment_version.build_id == "2.0"
        assert routing.ramping_version_percentage == 30
        assert routing.revision_number == 2
        statuses = {
            s.deployment_version.build_id: s.status for s in routed.worker_deployment_info.version_summaries
        }
        assert statuses == {
            "1.0": Status.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT,
            "2.0": Status.WORKER_DEPLOYMENT_VERSION_STATUS_RAMPING,
        }
        assert (await describe_version(client, v2)).ramp_percentage == 30

        # The ramping version made current stops ramping; the old current one drains.
        promoted = await set_current(client, v2, ramp.conflict_token)
        assert promoted.previous_deployment_version.build_id == "1.0"
        routing = (await describe(client, name)).worker_deployment_info.routing_config
        assert routing.current_deployment_version.build_id == "2.0"
        assert not routing.HasField("ramping_deployment_version")
        assert routing.ramping_version_percentage == 0
        assert (await describe_version(client, v1)).status == Status.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINING

        listed = await client.workflow_service.list_worker_deployments(
            rr.ListWorkerDeploymentsRequest(namespace=client.namespace), retry=False
        )
        mine = [d for d in listed.worker_deployments if d.name == name]
        assert len(mine) == 1
        assert mine[0].current_version_summary.deployment_version.build_id == "2.0"

        with pytest.raises(RPCError) as in_use:
            await client.workflow_service.delete_worker_deployment_version(
                rr.DeleteWorkerDeploymentVersionRequest(
                    namespace=client.namespace, version=v2.to_canonical_string()
                ),
                retry=False,
            )
        assert in_use.value.status == RPCStatusCode.FAILED_PRECONDITION
        assert "cannot be deleted since it is current or ramping" in in_use.value.message
        with pytest.raises(RPCError) as has_versions:
            await client.workflow_service.delete_worker_deployment(
                rr.DeleteWorkerDeploymentRequest(namespace=client.namespace, deployment_name=name),
                retry=False,
            )
        assert has_versions.value.status == RPCStatusCode.FAILED_PRECONDITION
        assert has_versions.value.message == "deployment has versions, can't be deleted"


async def test_unknown_deployments_and_bad_requests_get_the_real_servers_errors(client: Client):
    name = new_id("nobody")
    with pytest.raises(RPCError) as missing:
        await describe(client, name)
    assert missing.value.status == RPCStatusCode.NOT_FOUND
    assert (
        missing.value.message
        == f"no Worker Deployment found with name '{name}'; does your Worker Deployment have pollers?"
    )
    with pytest.raises(RPCError) as empty:
        await describe(client, "")
    assert empty.value.status == RPCStatusCode.INVALID_ARGUMENT
    assert empty.value.message == "deployment name cannot be empty"
    with pytest.raises(RPCError) as bad_version:
        await client.workflow_service.describe_worker_deployment_version(
            rr.DescribeWorkerDeploymentVersionRequest(namespace=client.namespace, version="no-separator"),
            retry=False,
        )
    assert bad_version.value.status == RPCStatusCode.INVALID_ARGUMENT
    with pytest.raises(RPCError) as no_version:
        await describe_version(client, WorkerDeploymentVersion(deployment_name=name, build_id="9"))
    assert no_version.value.status == RPCStatusCode.NOT_FOUND
    assert no_version.value.message == f"build ID '9' not found in Worker Deployment '{name}'"


async def test_version_metadata_is_upserted_and_removed(client: Client):
    version = WorkerDeploymentVersion(deployment_name=new_id("meta"), build_id="1.0")
    async with versioned_worker(client, new_id("tq"), version):
        await visible(client, version)
    target = VersionMessage(deployment_name=version.deployment_name, build_id=version.build_id)
    update = rr.UpdateWorkerDeploymentVersionMetadataRequest(
        namespace=client.namespace, deployment_version=target
    )
    update.upsert_entries["owner"].CopyFrom(Payload(data=b'"team-a"'))
    update.upsert_entries["ticket"].CopyFrom(Payload(data=b'"T-1"'))
    first = await client.workflow_service.update_worker_deployment_version_metadata(update, retry=False)
    assert set(first.metadata.entries) == {"owner", "ticket"}
    second = await client.workflow_service.update_worker_deployment_version_metadata(
        rr.UpdateWorkerDeploymentVersionMetadataRequest(
            namespace=client.namespace, deployment_version=target, remove_entries=["ticket"]
        ),
        retry=False,
    )
    assert set(second.metadata.entries) == {"owner"}
    info = await describe_version(client, version)
    assert info.metadata.entries["owner"].data == b'"team-a"'


async def test_deployments_are_namespaced(server, client: Client):
    version = WorkerDeploymentVersion(deployment_name=new_id("walled"), build_id="1.0")
    async with versioned_worker(client, new_id("tq"), version):
        await visible(client, version)
    other_name = f"dep{uuid.uuid4().hex[:8]}"
    other = await Client.connect(server.address, namespace=other_name)
    await other.workflow_service.register_namespace(
        rr.RegisterNamespaceRequest(
            namespace=other_name, workflow_execution_retention_period=Duration(seconds=86400)
        )
    )
    with pytest.raises(RPCError) as hidden:
        await describe(other, version.deployment_name)
    assert hidden.value.status == RPCStatusCode.NOT_FOUND
    listed = await other.workflow_service.list_worker_deployments(
        rr.ListWorkerDeploymentsRequest(namespace=other_name), retry=False
    )
    assert not listed.worker_deployments


async def test_completions_record_the_versioning_behaviour_and_deployment_version(client: Client):
    version = WorkerDeploymentVersion(deployment_name=new_id("behaviour"), build_id="7.1")
    queue = new_id("tq")
    async with versioned_worker(client, queue, version):
        described = await visible(client, version)
        await set_current(client, version, described.conflict_token)
        handle = await client.start_workflow(dw.PinnedWorkflow.run, id=new_id(), task_queue=queue)
        assert await handle.result() == "pinned"
    completed = [
        e.workflow_task_completed_event_attributes
        for e in await events(handle)
        if e.HasField("workflow_task_completed_event_attributes")
    ]
    assert completed[-1].versioning_behavior == VersioningBehavior.VERSIONING_BEHAVIOR_PINNED
    assert completed[-1].deployment_version == VersionMessage(
        deployment_name=version.deployment_name, build_id="7.1"
    )
    assert completed[-1].worker_deployment_name == version.deployment_name


async def test_an_unversioned_worker_with_a_build_id_stamps_it_without_a_behaviour(client: Client):
    queue = new_id("tq")
    version = WorkerDeploymentVersion(deployment_name=new_id("plain"), build_id="build-3")
    config = WorkerDeploymentConfig(version=version, use_worker_versioning=False)
    async with Worker(client, task_queue=queue, workflows=[dw.PlainWorkflow], deployment_config=config):
        handle = await client.start_workflow(dw.PlainWorkflow.run, id=new_id(), task_queue=queue)
        assert await handle.result() == "plain"
    completed = [
        e.workflow_task_completed_event_attributes
        for e in await events(handle)
        if e.HasField("workflow_task_completed_event_attributes")
    ]
    assert completed[-1].worker_version.build_id == "build-3"
    assert completed[-1].versioning_behavior == VersioningBehavior.VERSIONING_BEHAVIOR_UNSPECIFIED
    assert not completed[-1].HasField("deployment_version")
    with pytest.raises(RPCError) as unregistered:
        await describe(client, version.deployment_name)
    assert unregistered.value.status == RPCStatusCode.NOT_FOUND
