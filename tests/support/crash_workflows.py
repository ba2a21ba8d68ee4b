"""Workflow and activities for crash tests: every activity execution is appended to a log file."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from temporalio import activity, workflow
from temporalio.common import RetryPolicy


def _record(log: str, name: str) -> None:
    with Path(log).open("a") as f:
        f.write(f"{name} {activity.info().attempt}\n")


@activity.defn
async def record(log: str, name: str) -> str:
    _record(log, name)
    return name


@activity.defn
async def record_slow_first(log: str, name: str) -> str:
    """Runs 'forever' on attempt 1, so the test can kill the worker while it runs."""
    _record(log, name)
    if activity.info().attempt == 1:
        await asyncio.sleep(60)
    return name


@workflow.defn
class CrashWorkflow:
    def __init__(self) -> None:
        self.signals: list[str] = []

    @workflow.signal
    def add(self, value: str) -> None:
        self.signals.append(value)

    @workflow.run
    async def run(self, log: str, signals: int) -> list[str]:
        options = {
            "start_to_close_timeout": timedelta(seconds=3),
            "retry_policy": RetryPolicy(initial_interval=timedelta(milliseconds=100)),
        }
        done = [await workflow.execute_activity(record, args=[log, "a"], **options)]
        done.append(await workflow.execute_activity(record_slow_first, args=[log, "b"], **options))
        await workflow.wait_condition(lambda: len(self.signals) >= signals)
        await workflow.sleep(1)
        done.append(await workflow.execute_activity(record, args=[log, "c"], **options))
        return done + self.signals


@workflow.defn
class CrashChildWorkflow:
    @workflow.run
    async def run(self, log: str, name: str) -> str:
        return await workflow.execute_activity(
            record_slow_first,
            args=[log, name],
            start_to_close_timeout=timedelta(seconds=3),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100)),
        )


@workflow.defn
class CrashEverythingWorkflow:
    """An update whose handler runs an activity, a child, then a continue-as-new: each crash-tested."""

    def __init__(self) -> None:
        self.updated = ""

    @workflow.update
    async def apply(self, log: str) -> str:
        self.updated = await workflow.execute_activity(
            record_slow_first,
            args=[log, "u"],
            start_to_close_timeout=timedelta(seconds=3),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100)),
        )
        return self.updated

    @workflow.run
    async def run(self, log: str, generation: int) -> str:
        if generation == 0:
            await workflow.wait_condition(lambda: bool(self.updated))
            await workflow.execute_child_workflow(
                CrashChildWorkflow.run, args=[log, "child"], id=f"{workflow.info().workflow_id}-child"
            )
            workflow.continue_as_new(args=[log, 1])
        last = await workflow.execute_activity(
            record_slow_first,
            args=[log, "after-can"],
            start_to_close_timeout=timedelta(seconds=3),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100)),
        )
        return f"{last} (generation {generation})"


@activity.defn
async def handoff(tokens: str) -> str:
    """Hands its task token to the test (one line in `tokens`) and completes asynchronously: the test
    then completes it through the client, so it sees which completions were acknowledged."""
    info = activity.info()
    with Path(tokens).open("a") as f:
        f.write(f"{info.workflow_id} {info.attempt} {info.task_token.hex()}\n")
    activity.raise_complete_async()


@workflow.defn
class ChaosWorkflow:
    """One activity completed by the test, a short timer, then signals until `finish`: returns
    [result, *signals]."""

    def __init__(self) -> None:
        self.signals: list[str] = []
        self.finished = False

    @workflow.signal
    def add(self, value: str) -> None:
        self.signals.append(value)

    @workflow.signal
    def finish(self) -> None:
        self.finished = True

    @workflow.run
    async def run(self, tokens: str) -> list[str]:
        result = await workflow.execute_activity(
            handoff,
            tokens,
            start_to_close_timeout=timedelta(seconds=6),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200), backoff_coefficient=1),
        )
        # A user timer, so each run also needs the shard workers (and their wake-ups) to finish.
        await workflow.sleep(timedelta(milliseconds=300))
        await workflow.wait_condition(lambda: self.finished)
        return [result, *self.signals]
