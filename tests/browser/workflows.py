"""Workflows the console's browser tests start with the official SDK."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError


@activity.defn
async def compose_greeting(name: str) -> str:
    return f"Hello, {name}!"


@workflow.defn
class ConsoleOrder:
    """Greets the customer (an activity), waits for `signals` signals of any name, then returns the
    order (or fails with `fail` as the message)."""

    def __init__(self) -> None:
        self.signals: list[str] = []

    @workflow.run
    async def run(self, order: dict) -> dict:
        greeting = await workflow.execute_activity(
            compose_greeting, order["customer"], start_to_close_timeout=timedelta(seconds=10)
        )
        await workflow.wait_condition(lambda: len(self.signals) >= order.get("signals", 0))
        if order.get("fail"):
            raise ApplicationError(order["fail"], non_retryable=True, type="OrderRejected")
        return {"greeting": greeting, "items": order.get("items", []), "signals": self.signals[:3]}

    @workflow.signal(dynamic=True)
    def any_signal(self, name: str, args: Sequence[RawValue]) -> None:
        self.signals.append(name)


WORKFLOWS = [ConsoleOrder]
ACTIVITIES = [compose_greeting]
