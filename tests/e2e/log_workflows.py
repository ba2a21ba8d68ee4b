"""The workflow of the structured-log test (tests/e2e/test_json_logs.py): its input, its signal, an
activity's failure message and its result all carry what the test passes, which no log may show."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RetryPolicy


@activity.defn
async def echo(value: str) -> str:
    if activity.info().attempt == 1:
        # A failure's message is the user's data too: it is stored (encrypted), never logged.
        raise RuntimeError(f"first attempt fails on {value}")
    return f"echoed {value}"


@workflow.defn
class CanaryWorkflow:
    def __init__(self) -> None:
        self.replies: list[str] = []

    @workflow.signal
    def reply(self, value: str) -> None:
        self.replies.append(value)

    @workflow.run
    async def run(self, value: str) -> str:
        echoed = await workflow.execute_activity(
            echo,
            value,
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200)),
        )
        await workflow.wait_condition(lambda: bool(self.replies))
        # A durable timer, fired by the shard processing (the Celery worker in production).
        await workflow.sleep(0.5)
        return f"{echoed} / {self.replies[0]}"
