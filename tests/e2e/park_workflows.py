"""Workflows and activities of tests/e2e/test_park_redrive.py (a module the workflow sandbox can import)."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    Interceptor as WorkerInterceptor,
)
from temporalio.worker import (
    StartActivityInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

HEADER = "perdura-on-retries-exhausted"

# workflow id -> attempts the activity saw; the workflow ids whose failure is "fixed" (in this process).
attempts: dict[str, list[int]] = {}
fixed: set[str] = set()


@activity.defn
async def flaky_charge() -> str:
    info = activity.info()
    attempts.setdefault(info.workflow_id or "", []).append(info.attempt)
    if info.workflow_id not in fixed:
        raise ApplicationError("card declined")
    return f"charged on attempt {info.attempt}"


@workflow.defn
class ChargeWorkflow:
    @workflow.run
    async def run(self) -> str:
        return await workflow.execute_activity(
            flaky_charge,
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(milliseconds=200), backoff_coefficient=1, maximum_attempts=3
            ),
        )


class _ParkOutbound(WorkflowOutboundInterceptor):
    def start_activity(self, input: StartActivityInput):
        input.headers = {**input.headers, HEADER: workflow.payload_converter().to_payload("park")}
        return super().start_activity(input)


class _ParkInbound(WorkflowInboundInterceptor):
    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        super().init(_ParkOutbound(outbound))


class ParkOnExhausted(WorkerInterceptor):
    """Puts `perdura-on-retries-exhausted: park` on every activity its workflows schedule."""

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput):
        return _ParkInbound


@activity.defn
async def flaky_ship() -> str:
    info = activity.info()
    attempts.setdefault(info.workflow_id or "", []).append(info.attempt)
    if info.workflow_id not in fixed:
        raise ApplicationError("no courier")
    return f"shipped on attempt {info.attempt}"


@workflow.defn
class ShipWorkflow:
    @workflow.run
    async def run(self) -> str:
        return await workflow.execute_activity(
            flaky_ship,
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(milliseconds=200), backoff_coefficient=1, maximum_attempts=3
            ),
        )


# workflow id -> the attempts its runs saw (the workflow runs unsandboxed, so this module is shared).
run_attempts: dict[str, list[int]] = {}


@workflow.defn
class LedgerWorkflow:
    """Fails every attempt until its workflow id is fixed."""

    @workflow.run
    async def run(self) -> str:
        info = workflow.info()
        if not workflow.unsafe.is_replaying():
            run_attempts.setdefault(info.workflow_id, []).append(info.attempt)
        if info.workflow_id not in fixed:
            raise ApplicationError("ledger closed")
        return f"posted on attempt {info.attempt}"
