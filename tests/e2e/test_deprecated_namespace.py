"""A deprecated namespace takes no new run (issue 10, item 4), as the real server answers.

Checked against `temporal server start-dev` (1.x): after `UpdateNamespace` to DEPRECATED, StartWorkflowExecution
and SignalWithStartWorkflowExecution (even onto a running run) fail with FAILED_PRECONDITION "Namespace has
invalid state: Deprecated. Must be Registered."; schedules take no further action; signals to running runs,
child starts, continue-as-new, describe, list and CreateSchedule still work. (Temporal lets update-with-start
through and starts the run; Perdura refuses it like a start.)
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.enums.v1 import NamespaceState
from temporalio.api.namespace.v1 import UpdateNamespaceInfo
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    WithStartWorkflowOperation,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from tests.e2e.conftest import new_id
from tests.e2e.workflows import GoOnWorkflow, HelloWorkflow, UpdatableWorkflow, greet

REFUSED = "Namespace has invalid state: Deprecated. Must be Registered."


async def _runs(client: Client, prefix: str) -> int:
    return len([w async for w in client.list_workflows(f"WorkflowId STARTS_WITH '{prefix}'")])


async def test_a_deprecated_namespace_refuses_new_runs_and_keeps_running_the_old(server):
    name = f"dep{uuid.uuid4().hex[:8]}"
    operator = await Client.connect(server.address, namespace=name)
    await operator.workflow_service.register_namespace(
        rr.RegisterNamespaceRequest(
            namespace=name, workflow_execution_retention_period=Duration(seconds=86400)
        )
    )
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(
        operator,
        task_queue=queue,
        workflows=[GoOnWorkflow, HelloWorkflow, UpdatableWorkflow],
        activities=[greet],
    ):
        parent = await operator.start_workflow(GoOnWorkflow.run, False, id=new_id(), task_queue=queue)
        chain = await operator.start_workflow(GoOnWorkflow.run, False, id=new_id(), task_queue=queue)
        waiting = await operator.start_workflow(GoOnWorkflow.run, False, id=new_id(), task_queue=queue)
        prefix = f"sched-{uuid.uuid4().hex[:6]}"
        await operator.create_schedule(
            new_id("schedule"),
            Schedule(
                action=ScheduleActionStartWorkflow(HelloWorkflow.run, "s", id=prefix, task_queue=queue),
                spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(seconds=1))]),
                policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.ALLOW_ALL),
            ),
        )
        deadline = asyncio.get_running_loop().time() + 20
        while await _runs(operator, prefix) == 0:
            assert asyncio.get_running_loop().time() < deadline, "the schedule never acted"
            await asyncio.sleep(0.5)

        await operator.workflow_service.update_namespace(
            rr.UpdateNamespaceRequest(
                namespace=name,
                update_info=UpdateNamespaceInfo(state=NamespaceState.NAMESPACE_STATE_DEPRECATED),
            )
        )
        await asyncio.sleep(2)  # an action already under way may still land
        scheduled = await _runs(operator, prefix)

        # New runs are refused, by every way of starting one.
        starts = [
            lambda: operator.start_workflow(HelloWorkflow.run, "x", id=new_id(), task_queue=queue),
            lambda: operator.start_workflow(
                GoOnWorkflow.run,
                False,
                id=new_id(),
                task_queue=queue,
                start_signal="go",
                start_signal_args=["x"],
            ),
            # Signal-with-start onto a running run is refused too, as Temporal refuses it.
            lambda: operator.start_workflow(
                GoOnWorkflow.run,
                False,
                id=waiting.id,
                task_queue=queue,
                start_signal="go",
                start_signal_args=["never"],
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            ),
        ]
        for start in starts:
            with pytest.raises(RPCError) as caught:
                await start()
            assert caught.value.status == RPCStatusCode.FAILED_PRECONDITION
            assert caught.value.message == REFUSED
        with_start = WithStartWorkflowOperation(
            UpdatableWorkflow.run,
            id=new_id(),
            task_queue=queue,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
        )
        with pytest.raises(Exception) as caught:  # noqa: PT011 (the SDK wraps the multi-operation failure)
            await operator.execute_update_with_start_workflow(
                UpdatableWorkflow.add, "v", start_workflow_operation=with_start
            )
        assert REFUSED in str(caught.value) or REFUSED in str(caught.value.__cause__)

        # What already runs goes on: signals, a child start, continue-as-new; describe and list answer.
        await parent.signal(GoOnWorkflow.go, "child")
        await chain.signal(GoOnWorkflow.go, "continue")
        assert await asyncio.wait_for(parent.result(), 30) == "hello child"
        assert await asyncio.wait_for(chain.result(), 30) == "continued"
        assert (await waiting.describe()).id == waiting.id
        assert await _runs(operator, waiting.id) == 1
        described = await operator.workflow_service.describe_namespace(
            rr.DescribeNamespaceRequest(namespace=name)
        )
        assert described.namespace_info.state == NamespaceState.NAMESPACE_STATE_DEPRECATED

        # The schedule takes no new action (one a second before).
        await asyncio.sleep(3)
        assert await _runs(operator, prefix) == scheduled
        await waiting.terminate("done")
