"""Workflows the console's browser tests start with the official SDK."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RawValue, RetryPolicy
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


@activity.defn
async def charge_card(reason: str) -> None:
    raise ApplicationError(f"card declined: {reason}", type="CardDeclined")


@workflow.defn
class ConsoleCharge:
    """Retries a failing activity until cancelled: a run with a pending activity and a last failure."""

    @workflow.run
    async def run(self, reason: str) -> None:
        await workflow.execute_activity(
            charge_card,
            reason,
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100), backoff_coefficient=1.0),
        )


WORKFLOWS = [ConsoleOrder, ConsoleCharge]
ACTIVITIES = [compose_greeting, charge_card]
