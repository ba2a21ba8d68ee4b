"""The workflow of the payload canary test (tests/e2e/test_payload_canary.py): every kind of payload a run
carries -- its input, a signal's, an update's and a query's arguments and results, an activity's input,
heartbeat details, failure message and result, and the workflow's result -- holds what the test passes,
which no store may show in clear."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError, ChildWorkflowError


@activity.defn
async def canary_echo(value: str) -> str:
    activity.heartbeat(f"{value}-heartbeat")
    if activity.info().attempt == 1:
        # A failure's message is the user's data too: stored sealed, never logged.
        raise RuntimeError(f"first attempt fails on {value}")
    return f"{value}-activity-result"


@workflow.defn
class CanaryChildWorkflow:
    @workflow.run
    async def run(self, value: str, fail: bool) -> str:
        if fail:
            # A failure's message and details are payloads of the child's history and the parent's.
            raise ApplicationError(f"child fails on {value}", f"{value}-failure-details", non_retryable=True)
        return f"{value}-child-result"


@workflow.defn
class PayloadCanaryWorkflow:
    def __init__(self) -> None:
        self.signals: list[str] = []
        self.updates: list[str] = []

    @workflow.signal
    def note(self, value: str) -> None:
        self.signals.append(value)

    @workflow.update
    def amend(self, value: str) -> str:
        self.updates.append(value)
        return f"{value}-result"

    @workflow.query
    def peek(self, value: str) -> str:
        return f"{value}-result"

    @workflow.run
    async def run(self, value: str, continued: bool = False) -> str:
        if continued:
            # The run continued-as-new: its input came through the continue-as-new event.
            return f"{value}-workflow-result"
        echoed = await workflow.execute_activity(
            canary_echo,
            f"{value}-activity-input",
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100)),
        )
        await workflow.wait_condition(lambda: bool(self.signals) and bool(self.updates))
        # A durable timer, fired by the shard processing (the Celery worker in production).
        await workflow.sleep(0.2)
        child = await workflow.execute_child_workflow(
            CanaryChildWorkflow.run, args=[f"{value}-child", False], id=f"{workflow.info().workflow_id}-child"
        )
        try:
            await workflow.execute_child_workflow(
                CanaryChildWorkflow.run,
                args=[f"{value}-child", True],
                id=f"{workflow.info().workflow_id}-fails",
            )
        except ChildWorkflowError:
            pass
        else:
            raise AssertionError("the failing child did not fail")
        return workflow.continue_as_new(
            args=[f"{echoed} / {self.signals[0]} / {self.updates[0]} / {child}", True]
        )
