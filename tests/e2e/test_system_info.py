"""GetSystemInfo advertises only what is served: each capability it claims works, the ones it omits are not
served, and the deprecated build-id APIs are refused as the real dev server refuses them by default."""

from __future__ import annotations

import pytest
from temporalio.api.deployment.v1 import Deployment
from temporalio.api.workflowservice.v1 import (
    DescribeDeploymentRequest,
    GetCurrentDeploymentRequest,
    GetDeploymentReachabilityRequest,
    GetSystemInfoRequest,
    GetWorkerBuildIdCompatibilityRequest,
    GetWorkerTaskReachabilityRequest,
    GetWorkerVersioningRulesRequest,
    ListDeploymentsRequest,
    SetCurrentDeploymentRequest,
    UpdateWorkerBuildIdCompatibilityRequest,
    UpdateWorkerVersioningRulesRequest,
)
from temporalio.service import RPCError, RPCStatusCode

from engine.api.rpc import legacy_versioning
from tests.e2e.conftest import new_id


async def test_build_id_versioning_is_claimed_and_the_deprecated_apis_are_refused_as_on_temporal(client):
    info = await client.workflow_service.get_system_info(GetSystemInfoRequest())
    assert info.capabilities.build_id_based_versioning
    assert not info.capabilities.nexus
    assert not info.capabilities.server_scaled_deployments
    for call, request, message in [
        (
            client.workflow_service.update_worker_build_id_compatibility,
            UpdateWorkerBuildIdCompatibilityRequest(namespace=client.namespace, task_queue="tq"),
            legacy_versioning.VERSION_SETS_OFF,
        ),
        (
            client.workflow_service.get_worker_build_id_compatibility,
            GetWorkerBuildIdCompatibilityRequest(namespace=client.namespace, task_queue="tq"),
            legacy_versioning.VERSION_SETS_OFF,
        ),
        (
            client.workflow_service.get_worker_task_reachability,
            GetWorkerTaskReachabilityRequest(namespace=client.namespace, build_ids=["b"]),
            legacy_versioning.RULES_OFF,
        ),
        (
            client.workflow_service.get_worker_versioning_rules,
            GetWorkerVersioningRulesRequest(namespace=client.namespace, task_queue="tq"),
            legacy_versioning.RULES_OFF,
        ),
        (
            client.workflow_service.update_worker_versioning_rules,
            UpdateWorkerVersioningRulesRequest(namespace=client.namespace, task_queue="tq"),
            legacy_versioning.RULES_OFF,
        ),
    ]:
        with pytest.raises(RPCError) as refused:
            await call(request)
        assert (refused.value.status, refused.value.message) == (RPCStatusCode.PERMISSION_DENIED, message)

    # The Deployments of v0.30 are gone from Server 1.32 too: it says what replaced them.
    deployment = Deployment(series_name="orders", build_id="1.0")
    for call, request in [
        (
            client.workflow_service.describe_deployment,
            DescribeDeploymentRequest(namespace=client.namespace, deployment=deployment),
        ),
        (client.workflow_service.list_deployments, ListDeploymentsRequest(namespace=client.namespace)),
        (
            client.workflow_service.get_current_deployment,
            GetCurrentDeploymentRequest(namespace=client.namespace, series_name="orders"),
        ),
        (
            client.workflow_service.set_current_deployment,
            SetCurrentDeploymentRequest(namespace=client.namespace, deployment=deployment),
        ),
        (
            client.workflow_service.get_deployment_reachability,
            GetDeploymentReachabilityRequest(namespace=client.namespace, deployment=deployment),
        ),
    ]:
        with pytest.raises(RPCError) as gone:
            await call(request)
        assert (gone.value.status, gone.value.message) == (
            RPCStatusCode.UNIMPLEMENTED,
            legacy_versioning.DEPLOYMENTS_GONE,
        )

    unknown = UpdateWorkerBuildIdCompatibilityRequest(namespace=new_id("no-such-ns"), task_queue="tq")
    with pytest.raises(RPCError) as refused:
        await client.workflow_service.update_worker_build_id_compatibility(unknown)
    assert refused.value.status == RPCStatusCode.NOT_FOUND


async def test_claimed_count_group_by_execution_status_is_served(client, task_queue):
    info = await client.workflow_service.get_system_info(GetSystemInfoRequest())
    assert info.capabilities.count_group_by_execution_status
    workflow_id = new_id("sysinfo")
    handle = await client.start_workflow("NeverPolled", id=workflow_id, task_queue=task_queue)
    count = await client.count_workflows(f'WorkflowId = "{workflow_id}" GROUP BY ExecutionStatus')
    assert count.count == 1
    assert [(g.group_values, g.count) for g in count.groups] == [(["Running"], 1)]
    await handle.terminate("done")
