"""Workflows and activities for the differential tests that tests/e2e/workflows.py does not have."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

from temporalio import activity, workflow

STAGGER_SECONDS = 0.6
BLOCK_SECONDS = 1.0  # well below the SDK's 2 s deadlock detection


@activity.defn
async def staggered_greet(index: int) -> str:
    """Completes `index * STAGGER_SECONDS` after it starts, so parallel completions arrive in a fixed order,
    each after the workflow task woken by the previous one has completed."""
    await asyncio.sleep(index * STAGGER_SECONDS)
    return f"hello n{index}"


@workflow.defn
class StaggeredParallelWorkflow:
    """Schedules `count` activities in one workflow task and waits for all of them."""

    @workflow.run
    async def run(self, count: int) -> list[str]:
        return list(
            await asyncio.gather(
                *(
                    workflow.execute_activity(
                        staggered_greet, i, start_to_close_timeout=timedelta(seconds=10)
                    )
                    for i in range(count)
                )
            )
        )


RELEASES: dict[str, asyncio.Event] = {}


def release(run_id: str) -> None:
    """Let the `until_released` activity of this run complete (the test and its workers share one loop)."""
    RELEASES.setdefault(run_id, asyncio.Event()).set()


@activity.defn
async def until_released() -> str:
    """Completes when the test calls release(<this run id>): the test picks the moment."""
    await RELEASES.setdefault(activity.info().workflow_run_id, asyncio.Event()).wait()
    return "released"


@workflow.defn
class BusyWorkflow:
    """Its `block` signal handler holds the workflow task for BLOCK_SECONDS (only when not replaying), so that
    events arriving meanwhile (activity completions, signals) reach the server while a workflow task is in
    flight, and the server buffers them until that task completes.

    run(with_activity, notes): first runs `until_released` if asked, then returns once it has handled
    `block` and `notes` `note` signals (notes=0: as soon as `block` was handled)."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.blocked = False
        self.notes = 0

    @workflow.signal
    def block(self) -> None:
        self.log.append("block")
        self.blocked = True
        if not workflow.unsafe.is_replaying():
            with workflow.unsafe.sandbox_unrestricted():
                time.sleep(BLOCK_SECONDS)

    @workflow.signal
    def note(self, value: str) -> None:
        self.log.append(value)
        self.notes += 1

    @workflow.run
    async def run(self, with_activity: bool, notes: int) -> list[str]:
        if with_activity:
            self.log.append(
                await workflow.execute_activity(until_released, start_to_close_timeout=timedelta(seconds=30))
            )
        await workflow.wait_condition(lambda: self.blocked and self.notes >= notes)
        return self.log


WORKFLOWS = [StaggeredParallelWorkflow, BusyWorkflow]
ACTIVITIES = [staggered_greet, until_released]
