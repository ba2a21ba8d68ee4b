"""Workflows and activities the end-to-end tests run through the official SDK."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError, ChildWorkflowError


@activity.defn
async def greet(name: str) -> str:
    return f"hello {name}"


@activity.defn
async def add_one(value: int) -> int:
    return value + 1


FLAKY_CALLS: dict[str, int] = {}


@activity.defn
async def flaky(key: str) -> str:
    """Fails on attempts 1 and 2, succeeds on 3."""
    info = activity.info()
    FLAKY_CALLS[key] = FLAKY_CALLS.get(key, 0) + 1
    if info.attempt < 3:
        raise RuntimeError(f"flaky failure {info.attempt}")
    return f"ok after {info.attempt}"


@activity.defn
async def fatal() -> None:
    raise ApplicationError("fatal boom", type="MyFatal", non_retryable=True)


@activity.defn
async def sleepy(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "slept"


@activity.defn
async def slow_first_attempt(seconds: float) -> int:
    """Overruns its start-to-close timeout on attempt 1 only."""
    if activity.info().attempt == 1:
        await asyncio.sleep(seconds)
    return activity.info().attempt


@activity.defn
async def heartbeat_then_stall(seconds: float) -> str:
    activity.heartbeat("hb-detail-1")
    await asyncio.sleep(seconds)
    return "never"


@activity.defn
async def heartbeat_until_cancelled() -> str:
    """Heartbeats until the server reports cancellation, which the SDK raises here as CancelledError."""
    while True:
        activity.heartbeat("working")
        await asyncio.sleep(0.2)


@workflow.defn
class HelloWorkflow:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(greet, name, start_to_close_timeout=timedelta(seconds=10))


@workflow.defn
class SequenceWorkflow:
    @workflow.run
    async def run(self, count: int) -> int:
        value = 0
        for _ in range(count):
            value = await workflow.execute_activity(
                add_one, value, start_to_close_timeout=timedelta(seconds=10)
            )
        return value


@workflow.defn
class ParallelWorkflow:
    @workflow.run
    async def run(self, count: int) -> list[str]:
        return list(
            await asyncio.gather(
                *(
                    workflow.execute_activity(greet, f"n{i}", start_to_close_timeout=timedelta(seconds=10))
                    for i in range(count)
                )
            )
        )


@workflow.defn
class RetryWorkflow:
    @workflow.run
    async def run(self, key: str) -> str:
        return await workflow.execute_activity(
            flaky,
            key,
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200), backoff_coefficient=2),
        )


@workflow.defn
class FatalWorkflow:
    @workflow.run
    async def run(self) -> None:
        await workflow.execute_activity(fatal, start_to_close_timeout=timedelta(seconds=10))


@workflow.defn
class StartToCloseWorkflow:
    @workflow.run
    async def run(self) -> int:
        return await workflow.execute_activity(
            slow_first_attempt,
            3.0,
            start_to_close_timeout=timedelta(seconds=1),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_attempts=3),
        )


@workflow.defn
class HeartbeatTimeoutWorkflow:
    @workflow.run
    async def run(self) -> str:
        return await workflow.execute_activity(
            heartbeat_then_stall,
            5.0,
            start_to_close_timeout=timedelta(seconds=30),
            heartbeat_timeout=timedelta(seconds=1),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )


@workflow.defn
class TimerWorkflow:
    @workflow.run
    async def run(self, seconds: float) -> str:
        await workflow.sleep(seconds)
        return "woke"


@workflow.defn
class CancelledTimerWorkflow:
    @workflow.run
    async def run(self) -> str:
        long_timer = asyncio.create_task(workflow.sleep(60))
        await workflow.sleep(0.2)
        long_timer.cancel()
        try:
            await long_timer
        except asyncio.CancelledError:
            return "cancelled"
        return "fired"


@workflow.defn
class SignalWorkflow:
    def __init__(self) -> None:
        self.received: list[str] = []

    @workflow.signal
    def add(self, value: str) -> None:
        self.received.append(value)

    @workflow.run
    async def run(self, expected: int, linger: float = 0) -> list[str]:
        await workflow.wait_condition(lambda: len(self.received) >= expected)
        if linger:
            await workflow.sleep(linger)
        return self.received


@workflow.defn
class WaitForCancelWorkflow:
    @workflow.run
    async def run(self) -> str:
        try:
            await workflow.sleep(3600)
        except asyncio.CancelledError:
            return "saw cancellation"
        return "not cancelled"


@workflow.defn
class SlowToCancelWorkflow:
    """Takes a second to finish once cancelled, so its completion never races its parent's next task."""

    @workflow.run
    async def run(self) -> str:
        try:
            await workflow.sleep(3600)
        except asyncio.CancelledError:
            await workflow.sleep(1)
            return "saw cancellation"
        return "not cancelled"


@workflow.defn
class CancelActivityWorkflow:
    @workflow.run
    async def run(self) -> str:
        return await workflow.execute_activity(
            heartbeat_until_cancelled,
            start_to_close_timeout=timedelta(seconds=30),
            heartbeat_timeout=timedelta(seconds=2),
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        )


@workflow.defn
class FailingWorkflow:
    @workflow.run
    async def run(self) -> None:
        raise ApplicationError("workflow says no", type="Nope")


@workflow.defn
class LongSleepWorkflow:
    @workflow.run
    async def run(self) -> str:
        await workflow.sleep(3600)
        return "done"


ALL_WORKFLOWS = [
    HelloWorkflow,
    SequenceWorkflow,
    ParallelWorkflow,
    RetryWorkflow,
    FatalWorkflow,
    StartToCloseWorkflow,
    HeartbeatTimeoutWorkflow,
    TimerWorkflow,
    CancelledTimerWorkflow,
    SignalWorkflow,
    WaitForCancelWorkflow,
    SlowToCancelWorkflow,
    CancelActivityWorkflow,
    FailingWorkflow,
    LongSleepWorkflow,
]
ALL_ACTIVITIES = [
    greet,
    add_one,
    flaky,
    fatal,
    sleepy,
    slow_first_attempt,
    heartbeat_then_stall,
    heartbeat_until_cancelled,
]


@workflow.defn
class CounterWorkflow:
    """Counts signals; queries read the count; finishes on the 'stop' signal."""

    def __init__(self) -> None:
        self.count = 0
        self.stopped = False

    @workflow.signal
    def bump(self) -> None:
        self.count += 1

    @workflow.signal
    def stop(self) -> None:
        self.stopped = True

    @workflow.query
    def current(self) -> int:
        return self.count

    @workflow.query
    def fails(self) -> int:
        raise ValueError("no such thing")

    @workflow.run
    async def run(self) -> int:
        await workflow.wait_condition(lambda: self.stopped)
        return self.count


ALL_WORKFLOWS.append(CounterWorkflow)


@workflow.defn
class ContinueAsNewWorkflow:
    """Continues as new until `remaining` reaches 0, carrying a running total."""

    @workflow.run
    async def run(self, remaining: int, total: int) -> int:
        total += await workflow.execute_activity(add_one, 0, start_to_close_timeout=timedelta(seconds=10))
        if remaining > 0:
            workflow.continue_as_new(args=[remaining - 1, total])
        return total


ALL_WORKFLOWS.append(ContinueAsNewWorkflow)


@workflow.defn
class ParentWorkflow:
    """Runs a child HelloWorkflow and returns its result."""

    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_child_workflow(
            HelloWorkflow.run, name, id=f"{workflow.info().workflow_id}-child"
        )


@workflow.defn
class FailingChildParentWorkflow:
    @workflow.run
    async def run(self) -> str:
        try:
            await workflow.execute_child_workflow(
                FailingWorkflow.run, id=f"{workflow.info().workflow_id}-child"
            )
        except ChildWorkflowError as err:
            return f"child failed: {err.cause}"
        return "child succeeded"


@workflow.defn
class ConflictingChildWorkflow:
    @workflow.run
    async def run(self, taken_id: str) -> str:
        from temporalio.exceptions import WorkflowAlreadyStartedError

        try:
            await workflow.start_child_workflow(LongSleepWorkflow.run, id=taken_id)
        except WorkflowAlreadyStartedError:
            return "already started"
        return "started"


@workflow.defn
class SignalChildWorkflow:
    @workflow.run
    async def run(self) -> list[str]:
        # The child lingers a second after the signal, so the parent's task that records the signal as
        # delivered is over before the child's result arrives, whichever server runs them.
        child = await workflow.start_child_workflow(
            SignalWorkflow.run, args=[1, 1.0], id=f"{workflow.info().workflow_id}-child"
        )
        await child.signal(SignalWorkflow.add, "from parent")
        return await child


@workflow.defn
class SignalExternalWorkflow:
    @workflow.run
    async def run(self, target: str) -> str:
        await workflow.get_external_workflow_handle(target).signal(SignalWorkflow.add, "external")
        try:
            await workflow.get_external_workflow_handle(f"{target}-missing").signal(SignalWorkflow.add, "x")
        except Exception as err:  # noqa: BLE001 - the SDK's error for an unknown target
            return f"missing target: {type(err).__name__}"
        return "signalled a missing target?"


@workflow.defn
class CancelChildWorkflow:
    @workflow.run
    async def run(self) -> str:
        child = await workflow.start_child_workflow(
            SlowToCancelWorkflow.run,
            id=f"{workflow.info().workflow_id}-child",
            cancellation_type=workflow.ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED,
        )
        await workflow.sleep(0.3)
        child.cancel()
        return await child


@workflow.defn
class AbandonAndTerminateParentWorkflow:
    """Starts two long children (terminate and abandon policies) and completes at once."""

    @workflow.run
    async def run(self) -> str:
        wid = workflow.info().workflow_id
        await workflow.start_child_workflow(LongSleepWorkflow.run, id=f"{wid}-terminated")
        await workflow.start_child_workflow(
            LongSleepWorkflow.run,
            id=f"{wid}-abandoned",
            parent_close_policy=workflow.ParentClosePolicy.ABANDON,
        )
        return "done"


ALL_WORKFLOWS.extend(
    [
        ParentWorkflow,
        FailingChildParentWorkflow,
        ConflictingChildWorkflow,
        SignalChildWorkflow,
        SignalExternalWorkflow,
        CancelChildWorkflow,
        AbandonAndTerminateParentWorkflow,
    ]
)


@workflow.defn
class UpdatableWorkflow:
    """Holds a list; updates append to it (rejecting empty values) and return its length."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.done = False

    @workflow.update
    async def add(self, value: str) -> int:
        await workflow.sleep(0.05)
        self.items.append(value)
        return len(self.items)

    @add.validator
    def check_add(self, value: str) -> None:
        if not value:
            raise ValueError("empty values are not allowed")

    @workflow.signal
    def finish(self) -> None:
        self.done = True

    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: self.done)
        return self.items


ALL_WORKFLOWS.append(UpdatableWorkflow)


@workflow.defn
class MemoWorkflow:
    @workflow.run
    async def run(self) -> str:
        workflow.upsert_memo({"stage": "two", "drop": None})
        await workflow.sleep(3600)
        return "done"


ALL_WORKFLOWS.append(MemoWorkflow)


@activity.defn
async def complete_later() -> str:
    """Hands its completion to someone else (the test), by id."""
    activity.raise_complete_async()


@workflow.defn
class AsyncActivityWorkflow:
    @workflow.run
    async def run(self) -> str:
        return await workflow.execute_activity(
            complete_later, start_to_close_timeout=timedelta(seconds=30), activity_id="external"
        )


ALL_WORKFLOWS.append(AsyncActivityWorkflow)
ALL_ACTIVITIES.append(complete_later)


@workflow.defn
class RetriedWorkflow:
    """Fails on its first two attempts; the server's retry policy starts the next ones."""

    @workflow.run
    async def run(self) -> str:
        attempt = workflow.info().attempt
        if attempt < 3:
            raise ApplicationError(f"attempt {attempt} fails")
        return f"attempt {attempt}"


ALL_WORKFLOWS.append(RetriedWorkflow)


@workflow.defn
class LocalActivityWorkflow:
    """Local activities (one retried) and a patch: recorded as markers."""

    @workflow.run
    async def run(self, key: str) -> list[str]:
        patched = workflow.patched("perdura-patch")
        first = await workflow.execute_local_activity(
            greet, "local", start_to_close_timeout=timedelta(seconds=5)
        )
        second = await workflow.execute_local_activity(
            flaky,
            key,
            start_to_close_timeout=timedelta(seconds=5),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=50)),
        )
        return [first, second, str(patched)]


ALL_WORKFLOWS.append(LocalActivityWorkflow)


@workflow.defn
class CronCounterWorkflow:
    """Each run of the cron chain returns the previous run's result plus one."""

    @workflow.run
    async def run(self) -> int:
        last = (
            workflow.get_last_completion_result(type_hint=int) if workflow.has_last_completion_result() else 0
        )
        return (last or 0) + 1


ALL_WORKFLOWS.append(CronCounterWorkflow)


@workflow.defn
class SlowUpdateWorkflow:
    """Its update never finishes; the run completes on the 'finish' signal regardless."""

    def __init__(self) -> None:
        self.done = False

    @workflow.update(unfinished_policy=workflow.HandlerUnfinishedPolicy.ABANDON)
    async def forever(self) -> str:
        await workflow.wait_condition(lambda: False)
        return "never"

    @workflow.signal
    def finish(self) -> None:
        self.done = True

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.done)
        return "done"


ALL_WORKFLOWS.append(SlowUpdateWorkflow)


@workflow.defn
class ResettableWorkflow:
    """Collects `add` signals and `push` updates in a log and returns it once it holds `expected` entries.

    Its first task may also start a `sleepy(activity_seconds)` activity and a timer of `timer_seconds`
    (0: none), both awaited before it returns, so that a reset can find them pending."""

    def __init__(self) -> None:
        self.log: list[str] = []

    @workflow.signal
    def add(self, value: str) -> None:
        self.log.append(value)

    @workflow.update
    def push(self, value: str) -> int:
        self.log.append(value)
        return len(self.log)

    @workflow.run
    async def run(self, expected: int, activity_seconds: float, timer_seconds: float) -> list[str]:
        slept = None
        if activity_seconds:
            slept = workflow.start_activity(
                sleepy, activity_seconds, start_to_close_timeout=timedelta(seconds=30)
            )
        timer = asyncio.create_task(asyncio.sleep(timer_seconds)) if timer_seconds else None
        await workflow.wait_condition(lambda: len(self.log) >= expected)
        if timer is not None:
            await timer
            self.log.append("timer")
        if slept is not None:
            self.log.append(await slept)
        return self.log


ALL_WORKFLOWS.append(ResettableWorkflow)


@workflow.defn
class GoOnWorkflow:
    """Waits for `go`, then starts a child HelloWorkflow ("child") or continues as new ("continue"): what a
    run already started does must go on in a deprecated namespace."""

    def __init__(self) -> None:
        self.mode = ""

    @workflow.signal
    def go(self, mode: str) -> None:
        self.mode = mode

    @workflow.run
    async def run(self, continued: bool) -> str:
        if continued:
            return "continued"
        await workflow.wait_condition(lambda: bool(self.mode))
        if self.mode == "continue":
            workflow.continue_as_new(True)
        return await workflow.execute_child_workflow(
            HelloWorkflow.run, "child", id=f"{workflow.info().workflow_id}-child"
        )
