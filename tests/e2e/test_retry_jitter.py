"""Retry jitter through the official SDK: an always-failing activity's retries come back at the policy's
exact interval with jitter off, and spread below it with jitter on, set as the namespace default
(`perdura namespace update --retry-jitter`) or per activity by a `perdura-retry-jitter` header that a
workflow interceptor adds; a workflow retry reads the header of its start request."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import pytest
from temporalio import activity, workflow
from temporalio.client import (
    Client,
    Interceptor,
    OutboundInterceptor,
    StartWorkflowInput,
    WorkflowFailureError,
)
from temporalio.common import RetryPolicy
from temporalio.converter import default as default_converter
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import (
    Interceptor as WorkerInterceptor,
)
from temporalio.worker import (
    StartActivityInput,
    Worker,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

from engine.history import limits, retry_jitter

INTERVAL = 1.0
ATTEMPTS = 6
HEADER = "perdura-retry-jitter"

# workflow id -> [(attempt, scheduled time of the attempt, when it raised)], in this test process.
_attempts: dict[str, list[tuple[int, float, float]]] = {}


@activity.defn
async def always_fails() -> None:
    info = activity.info()
    _attempts.setdefault(info.workflow_id or "", []).append(
        (info.attempt, info.current_attempt_scheduled_time.timestamp(), time.time())
    )
    raise ApplicationError("always")


@workflow.defn
class FailingActivityWorkflow:
    @workflow.run
    async def run(self) -> str:
        try:
            await workflow.execute_activity(
                always_fails,
                start_to_close_timeout=timedelta(seconds=10),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=INTERVAL),
                    backoff_coefficient=1,
                    maximum_attempts=ATTEMPTS,
                ),
            )
        except Exception:
            return "failed as expected"
        return "unexpected success"


class _JitterOutbound(WorkflowOutboundInterceptor):
    def start_activity(self, input: StartActivityInput):
        input.headers = {**input.headers, HEADER: workflow.payload_converter().to_payload(1.0)}
        return super().start_activity(input)


class _JitterInbound(WorkflowInboundInterceptor):
    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        super().init(_JitterOutbound(outbound))


class ActivityJitterHeader(WorkerInterceptor):
    """Puts `perdura-retry-jitter: 1.0` on every activity the workflow schedules."""

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput):
        return _JitterInbound


class _StartJitter(OutboundInterceptor):
    async def start_workflow(self, input: StartWorkflowInput):
        input.headers = {**input.headers, HEADER: default_converter().payload_converter.to_payload(1.0)}
        return await super().start_workflow(input)


class WorkflowJitterHeader(Interceptor):
    """Puts `perdura-retry-jitter: 1.0` on the workflows this client starts."""

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _StartJitter(next)


def _namespace(server, jitter: str) -> str:
    name = f"jit-{uuid.uuid4().hex[:8]}"
    server.cli("namespace", "create", name)
    if jitter != "0":
        out = server.cli("namespace", "update", name, "--retry-jitter", jitter)
        assert "retry jitter up to" in out
    described = server.cli("namespace", "describe", name).splitlines()
    shown = next(line for line in described if line.startswith("retry jitter:")).split(":", 1)[1].strip()
    assert shown == ("off" if jitter == "0" else f"up to {float(jitter):.0%} of each backoff")
    return name


async def _backoffs(server, namespace: str, interceptors=()) -> list[float]:
    """The waits between each failed attempt and the next attempt's scheduled time."""
    client = await Client.connect(server.address, namespace=namespace)
    task_queue = f"tq-{uuid.uuid4()}"
    workflow_id = f"jit-{uuid.uuid4()}"
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[FailingActivityWorkflow],
        activities=[always_fails],
        interceptors=list(interceptors),
    ):
        result = await client.execute_workflow(
            FailingActivityWorkflow.run, id=workflow_id, task_queue=task_queue
        )
    assert result == "failed as expected"
    seen = _attempts.pop(workflow_id)
    assert [a for a, _, _ in seen] == list(range(1, ATTEMPTS + 1))
    return [seen[i + 1][1] - seen[i][2] for i in range(len(seen) - 1)]


async def test_activity_retries_without_jitter_wait_the_interval(server):
    waits = await _backoffs(server, _namespace(server, "0"))
    print("waits", [round(w, 3) for w in waits])
    # The failure reaches the server a few milliseconds after the activity raised.
    assert all(INTERVAL - 0.01 <= w <= INTERVAL + 0.25 for w in waits), waits


async def test_namespace_jitter_spreads_activity_retries(server):
    waits = await _backoffs(server, _namespace(server, "1"))
    print("waits", [round(w, 3) for w in waits])
    assert all(-0.01 <= w <= INTERVAL + 0.25 for w in waits), waits
    assert max(waits) - min(waits) > 0.1, waits  # 5 uniform draws this close: odds about 1 in 2000
    assert min(waits) < 0.9 * INTERVAL, waits


async def test_activity_header_overrides_the_namespace_default(server):
    waits = await _backoffs(server, _namespace(server, "0"), [ActivityJitterHeader()])
    print("waits", [round(w, 3) for w in waits])
    assert max(waits) - min(waits) > 0.1, waits
    assert min(waits) < 0.9 * INTERVAL, waits


class _BadStartJitter(OutboundInterceptor):
    async def start_workflow(self, input: StartWorkflowInput):
        input.headers = {**input.headers, HEADER: default_converter().payload_converter.to_payload(1.5)}
        return await super().start_workflow(input)


class BadJitterHeader(Interceptor):
    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _BadStartJitter(next)


async def test_a_start_with_a_bad_jitter_header_is_refused(server):
    client = await Client.connect(server.address, namespace="default", interceptors=[BadJitterHeader()])
    with pytest.raises(RPCError) as caught:
        await client.start_workflow("AnyWorkflow", id=f"jitbad-{uuid.uuid4()}", task_queue="nobody")
    assert caught.value.status == RPCStatusCode.INVALID_ARGUMENT
    assert (
        caught.value.message
        == "the perdura-retry-jitter header must be a number from 0 (off) to 1 (full jitter)"
    )


@workflow.defn
class AlwaysFailingWorkflow:
    @workflow.run
    async def run(self) -> None:
        raise ApplicationError("always")


async def test_workflow_retries_read_the_start_header(server):
    """Each retry run starts after the failed run's close less a share of the 2 s interval."""
    namespace = _namespace(server, "0")
    task_queue = f"tq-{uuid.uuid4()}"
    plain = await Client.connect(server.address, namespace=namespace)
    jittered = await Client.connect(
        server.address, namespace=namespace, interceptors=[WorkflowJitterHeader()]
    )
    gaps: dict[str, list[float]] = {}
    wanted: dict[str, list[float]] = {}
    async with Worker(plain, task_queue=task_queue, workflows=[AlwaysFailingWorkflow]):
        for name, client in (("off", plain), ("on", jittered)):
            handle = await client.start_workflow(
                AlwaysFailingWorkflow.run,
                id=f"jitwf-{uuid.uuid4()}",
                task_queue=task_queue,
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=2), backoff_coefficient=1, maximum_attempts=3
                ),
            )
            try:
                await handle.result()
            except WorkflowFailureError:
                pass
            runs = [r async for r in plain.list_workflows(f"WorkflowId = '{handle.id}'")]
            runs.sort(key=lambda r: r.start_time)
            assert len(runs) == 3
            # A retry run's execution time is when its backoff ends; the previous run closed when it failed.
            gaps[name] = [
                (later.execution_time - earlier.close_time).total_seconds()
                for earlier, later in zip(runs, runs[1:], strict=False)
            ]
            # The rule (engine/history/retry_jitter.py): 2 s less a share drawn from the failed attempt's
            # identity, and runs of one id start at least RUN_MIN_INTERVAL apart (a run that failed within
            # a few milliseconds of its start waits about that long whatever the draw).
            wanted[name] = [
                max(
                    retry_jitter.jittered(2.0, 1.0, f"run|{handle.id}|{earlier.run_id}|{attempt}")
                    if name == "on"
                    else 2.0,
                    limits.RUN_MIN_INTERVAL - (earlier.close_time - earlier.execution_time).total_seconds(),
                )
                for attempt, earlier in enumerate(runs[:-1], start=1)
            ]
    print("gaps", {k: [round(g, 3) for g in v] for k, v in gaps.items()}, "wanted", wanted)
    for name in gaps:
        assert all(abs(g - w) < 0.002 for g, w in zip(gaps[name], wanted[name], strict=True)), (gaps, wanted)
    assert gaps["off"] == pytest.approx([2.0] * 2, abs=0.002), gaps
    assert min(gaps["on"]) < 1.99, gaps  # the header was read: some draw took a share off
