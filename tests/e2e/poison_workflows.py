"""Workflows of the poison row tests: a tenant's timers and children, and an activity whose retry
interval is Duration's maximum."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

MAX_DURATION = timedelta(seconds=315_576_000_000)
"""google.protobuf.Duration's largest value (10,000 years)."""


@workflow.defn
class EchoChild:
    @workflow.run
    async def run(self, value: int) -> int:
        await workflow.sleep(0.5)
        return value


@workflow.defn
class TickingParent:
    """Sleeps one second `ticks` times, then runs a child: timers and a child-start transfer."""

    @workflow.run
    async def run(self, ticks: int) -> int:
        for _ in range(ticks):
            await workflow.sleep(1)
        return await workflow.execute_child_workflow(
            EchoChild.run, ticks, id=f"{workflow.info().workflow_id}-child"
        )


@activity.defn
async def outlast(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "late"


@workflow.defn
class HugeRetryInterval:
    """An activity that times out, whose next attempt would be Duration's maximum away."""

    @workflow.run
    async def run(self) -> str:
        return await workflow.execute_activity(
            outlast,
            120.0,  # never completes within the test: only the timeout can move the activity on
            start_to_close_timeout=timedelta(seconds=1),
            retry_policy=RetryPolicy(initial_interval=MAX_DURATION, maximum_interval=MAX_DURATION),
        )


@workflow.defn
class HugeChildTimeouts:
    """The reported case: one workflow task with 100 StartChildWorkflowExecution commands whose
    workflow_execution_timeout is 1e12 s (its deadline past any date the server can hold)."""

    @workflow.run
    async def run(self) -> int:
        starts = [
            workflow.start_child_workflow(
                EchoChild.run,
                i,
                id=f"{workflow.info().workflow_id}-child-{i}",
                execution_timeout=timedelta(seconds=1e12),
            )
            for i in range(100)
        ]
        children = await asyncio.gather(*starts)
        return sum([await c for c in children])
