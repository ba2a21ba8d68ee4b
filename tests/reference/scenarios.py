"""Workflows and activities for the differential tests that tests/e2e/workflows.py does not have."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

from temporalio import activity, exceptions, workflow

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


@activity.defn
async def never_polled() -> str:
    """Registered so that a worker could ask to run it eagerly; no worker polls its task queue."""
    return "ran"


@workflow.defn
class UnpolledActivityWorkflow:
    """Schedules `never_polled` with only a schedule-to-close timeout (so schedule-to-start defaults to it)
    and returns the timeout type the activity failed with."""

    @workflow.run
    async def run(self) -> str:
        try:
            await workflow.execute_activity(never_polled, schedule_to_close_timeout=timedelta(seconds=2))
        except exceptions.ActivityError as e:
            if not isinstance(e.cause, exceptions.TimeoutError) or e.cause.type is None:
                return f"not a timeout: {e.cause!r}"
            return e.cause.type.name
        return "completed"


@workflow.defn
class FinishedByUpdateWorkflow:
    """The `finish` update lets the run go on to its last step, a 0.2 s timer, and itself waits on a 0.5 s
    timer, so it is accepted in one workflow task and completed in a later one. Both timers are shorter
    than Temporal's timer queue shift (about 1 s): they fire together, and the task that completes the
    update also completes the run (where firing each at its own time would close the run first and fail
    the update with AcceptedUpdateCompletedWorkflow)."""

    def __init__(self) -> None:
        self.started = False

    @workflow.update
    async def finish(self, value: str) -> str:
        self.started = True
        await workflow.sleep(0.5)
        return value.upper()

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.started)
        await workflow.sleep(0.2)
        return "finished"


@workflow.defn
class HeldUpdatesWorkflow:
    """Updates that reach the server while a workflow task is in flight.

    `hold` holds the workflow task for BLOCK_SECONDS (only when not replaying). `add` appends a value
    (rejecting empty ones) and returns the count. run(continue_after_hold): on the first run, if asked,
    continues as new once `hold` was handled; otherwise (or on the next run) returns after `finish`. The
    next run holds its first workflow task too, so an update retried onto it arrives while that task is in
    flight on either server."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.held = False
        self.done = False

    def _hold(self) -> None:
        if not workflow.unsafe.is_replaying():
            with workflow.unsafe.sandbox_unrestricted():
                time.sleep(BLOCK_SECONDS)

    @workflow.signal
    def hold(self) -> None:
        self.held = True
        self._hold()

    @workflow.signal
    def finish(self) -> None:
        self.done = True

    @workflow.update
    def add(self, value: str) -> int:
        self.items.append(value)
        return len(self.items)

    @add.validator
    def check_add(self, value: str) -> None:
        if not value:
            raise ValueError("empty values are not allowed")

    @workflow.run
    async def run(self, continue_after_hold: bool, continued: bool = False) -> list[str]:
        if continued:
            self._hold()
        elif continue_after_hold:
            await workflow.wait_condition(lambda: self.held)
            workflow.continue_as_new(args=[False, True])
        await workflow.wait_condition(lambda: self.done)
        return self.items


WORKFLOWS += [UnpolledActivityWorkflow, FinishedByUpdateWorkflow, HeldUpdatesWorkflow]
ACTIVITIES += [never_polled]


@workflow.defn
class PausableWorkflow:
    """Starts a short timer, then waits for a signal and returns the signals it got: a run that a pause
    catches with a timer pending, and that a signal sent while paused must still finish."""

    def __init__(self) -> None:
        self.signals: list[str] = []

    @workflow.signal
    def note(self, value: str) -> None:
        self.signals.append(value)

    @workflow.update
    def bump(self) -> int:
        return len(self.signals)

    @workflow.run
    async def run(self, timer_seconds: float) -> list[str]:
        await workflow.sleep(timer_seconds)
        await workflow.wait_condition(lambda: bool(self.signals))
        return self.signals


WORKFLOWS += [PausableWorkflow]
