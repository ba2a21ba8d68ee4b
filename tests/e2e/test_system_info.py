"""GetSystemInfo advertises only what is served: each capability it claims works, the ones it omits are not served."""

from __future__ import annotations

import pytest
from temporalio.api.workflowservice.v1 import (
    GetSystemInfoRequest,
    GetWorkerBuildIdCompatibilityRequest,
    GetWorkerTaskReachabilityRequest,
    UpdateWorkerBuildIdCompatibilityRequest,
)
from temporalio.service import RPCError, RPCStatusCode

from tests.e2e.conftest import new_id


async def test_build_id_versioning_is_not_claimed_and_its_rpcs_say_unimplemented(client):
    info = await client.workflow_service.get_system_info(GetSystemInfoRequest())
    assert not info.capabilities.build_id_based_versioning
    assert not info.capabilities.nexus
    assert not info.capabilities.server_scaled_deployments
    for call, request in [
        (
            client.workflow_service.update_worker_build_id_compatibility,
            UpdateWorkerBuildIdCompatibilityRequest(namespace=client.namespace, task_queue="tq"),
        ),
        (
            client.workflow_service.get_worker_build_id_compatibility,
            GetWorkerBuildIdCompatibilityRequest(namespace=client.namespace, task_queue="tq"),
        ),
        (
            client.workflow_service.get_worker_task_reachability,
            GetWorkerTaskReachabilityRequest(namespace=client.namespace, build_ids=["b"]),
        ),
    ]:
        with pytest.raises(RPCError) as refused:
            await call(request)
        assert refused.value.status == RPCStatusCode.UNIMPLEMENTED


async def test_claimed_count_group_by_execution_status_is_served(client, task_queue):
    info = await client.workflow_service.get_system_info(GetSystemInfoRequest())
    assert info.capabilities.count_group_by_execution_status
    workflow_id = new_id("sysinfo")
    handle = await client.start_workflow("NeverPolled", id=workflow_id, task_queue=task_queue)
    count = await client.count_workflows(f'WorkflowId = "{workflow_id}" GROUP BY ExecutionStatus')
    assert count.count == 1
    assert [(g.group_values, g.count) for g in count.groups] == [(["Running"], 1)]
    await handle.terminate("done")
