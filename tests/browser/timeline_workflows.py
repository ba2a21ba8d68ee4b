"""A workflow whose run page has something of each kind on its timeline: activities (one retried), a
timer, a signal it waits for, and what it does after the signal."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError


@activity.defn
async def reserve_stock(item: str) -> str:
    return f"reserved {item}"


@activity.defn
async def charge_flaky(amount: int) -> str:
    attempt = activity.info().attempt
    if attempt < 3:
        raise ApplicationError(f"gateway busy (attempt {attempt})", type="GatewayBusy")
    return f"charged {amount}"


@activity.defn
async def ship_parcel(item: str) -> str:
    return f"shipped {item}"


@workflow.defn
class ScheduledPing:
    @workflow.run
    async def run(self) -> str:
        return "pong"


@workflow.defn
class TimelineOrder:
    """Reserves stock, charges (failing twice first), sleeps a second, waits for `ship`, then ships and
    pings a child workflow."""

    def __init__(self) -> None:
        self.ship = False

    @workflow.run
    async def run(self, item: str) -> str:
        options = {"start_to_close_timeout": timedelta(seconds=10)}
        await workflow.execute_activity(reserve_stock, item, **options)
        await workflow.execute_activity(
            charge_flaky,
            42,
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100), backoff_coefficient=1.0),
            **options,
        )
        await workflow.sleep(timedelta(seconds=1))
        await workflow.wait_condition(lambda: self.ship)
        shipped = await workflow.execute_activity(ship_parcel, item, **options)
        await workflow.execute_child_workflow(ScheduledPing.run, id=f"{workflow.info().workflow_id}-ping")
        return shipped

    @workflow.signal
    def ship_now(self) -> None:
        self.ship = True


WORKFLOWS = [TimelineOrder, ScheduledPing]
ACTIVITIES = [reserve_stock, charge_flaky, ship_parcel]
