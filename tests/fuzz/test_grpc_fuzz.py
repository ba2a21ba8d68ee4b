"""Every WorkflowService and OperatorService method, fuzzed over real gRPC against a running Perdura.

Each answer must be OK or a client error, never INTERNAL or UNKNOWN, and no traceback may reach the
server log. Meanwhile a canary run in a namespace the fuzz never names takes 1-second timers; afterwards
none may have fired late by more than `LATE_LIMIT`, and the server must still run a normal SDK start to
completion.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.client import Client
from temporalio.worker import Worker

from tests.fuzz import summary
from tests.fuzz.canary import CanaryWorkflow, timer_lateness
from tests.fuzz.conftest import examples
from tests.fuzz.grpc_campaign import Campaign, Target

FUZZ_NAMESPACE = "fuzz"
CANARY_NAMESPACE = "canary"
BUDGET_SECONDS = float(os.environ.get("PERDURA_FUZZ_SECONDS", "60"))
"""Wall time after which no further method is started (the whole test stays near it)."""
LATE_LIMIT = {"dev": 1.0, "production": 3.0}[os.environ.get("PERDURA_FUZZ_SERVER", "dev")]
"""Seconds a canary timer may fire late. `perdura dev`'s timer loop fires an idle 1 s timer 4 ms late (p50;
30 ms max), 0.17 s at most in the longest fuzz runs. The production processes fire one ~1 s late even idle
(p50 0.97 s, max 1.8 s over 25 timers: the Celery ETA path), so their bound leaves room for that."""

pytestmark = pytest.mark.timeout(1800)


async def test_grpc_fuzz(fuzz_server, tmp_path: Path):
    client = await Client.connect(fuzz_server.address, namespace="default")
    for name in (FUZZ_NAMESPACE, CANARY_NAMESPACE):
        await client.workflow_service.register_namespace(
            RegisterNamespaceRequest(
                namespace=name, workflow_execution_retention_period=Duration(seconds=86400)
            )
        )
    canary_client = await Client.connect(fuzz_server.address, namespace=CANARY_NAMESPACE)
    queue = f"canary-{uuid.uuid4().hex[:8]}"
    target = Target(fuzz_server.address, list(fuzz_server.logs.values()))
    async with Worker(canary_client, task_queue=queue, workflows=[CanaryWorkflow]):
        canary = await canary_client.start_workflow(
            CanaryWorkflow.run, 3600, id=f"canary-{uuid.uuid4().hex[:8]}", task_queue=queue
        )
        campaign = Campaign(target, namespaces=["default", FUZZ_NAMESPACE])
        figures = await asyncio.to_thread(
            campaign.run, examples=examples(10), command_examples=examples(10) * 8, budget=BUDGET_SECONDS
        )
        await canary.signal(CanaryWorkflow.finish)
        fired = await asyncio.wait_for(canary.result(), timeout=60)
        late = await timer_lateness(canary)
        # After the fuzz, a normal start still runs to completion.
        after = await canary_client.execute_workflow(
            CanaryWorkflow.run,
            1,
            id=f"after-{uuid.uuid4().hex[:8]}",
            task_queue=queue,
            execution_timeout=timedelta(seconds=60),
        )
    target.close()

    findings_file = Path(os.environ.get("PERDURA_FUZZ_FINDINGS", tmp_path / "grpc-findings.jsonl"))
    target.write_findings(findings_file)
    p99 = statistics.quantiles(late, n=100)[98] if len(late) >= 2 else max(late, default=0.0)
    summary.LINES.append(
        f"FUZZ grpc: {figures['requests']} requests, {figures['methods']} methods covered "
        f"(of {figures['of']}), {figures['internal']} internal errors, "
        f"{figures['background']} background tracebacks, {len(target.findings)} distinct; "
        f"canary {fired} timers late p50 {statistics.median(late):.3f}s p99 {p99:.3f}s max {max(late):.3f}s; "
        f"{figures['seconds']:.0f}s; findings in {findings_file}"
    )
    listing = "\n".join(
        f"  {f.method}: {f.status} x{f.count} at {f.frame} | {f.detail[:120]} | {f.request[:300]}"
        for f in target.findings.values()
    )
    background = "\n".join(
        f"  x{n} {frame} | first after: {target.suspects.get(frame, '')[:400]}"
        for frame, n in target.background.items()
    )
    print(summary.LINES[-1], listing, background, sep="\n")

    assert not figures["stalled"], figures["stalled"]
    assert figures["methods"] == figures["of"], f"only {figures['methods']} methods within the budget"
    assert after == 1
    assert late, "the canary took no timer"
    assert max(late) <= LATE_LIMIT, f"canary timers fired up to {max(late):.2f}s late"
    assert not target.background, f"tracebacks in the server log outside any call:\n{background}"
    assert not target.findings, f"{figures['internal']} internal errors:\n{listing}"
