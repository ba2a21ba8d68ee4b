"""A batch's shard worker killed -9 mid-batch, twice: every run is still signalled exactly once.

A signal batch over 30 runs (full: 300) nobody works on, paced at 10 actions a second, runs on the
Celery shard worker. The test kills the worker (supervisor, Celery and pool: everything) while the batch
is under way, starts a new one, and does it again. Each target's signal commits with the batch's
progress in one transaction fenced on the batch row's shard, so the histories must show each run
signalled once: none skipped, none twice, and the batch's counts must agree.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import psycopg
import pytest
from temporalio.api.batch.v1 import BatchOperationSignal
from temporalio.api.enums.v1 import BatchOperationState, EventType
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr
from temporalio.client import Client

from tests.chaos.conftest import report, scaled
from tests.support import servers
from tests.support.batches import idle_runs, wait_closed

RUNS = scaled(30, 300)
RPS = 10
LEASE_SECONDS = 3

pytestmark = pytest.mark.timeout(scaled(120, 400))


def completed(url: str, job_id: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT completed FROM engine_batchoperation WHERE job_id = %s", (job_id,)
        ).fetchone()
    return row[0] if row else 0


async def wait_until(check, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout}s"
        await asyncio.sleep(0.02)


async def test_killed_batch_worker_signals_each_run_exactly_once(tmp_path):
    env = {"PERDURA_SHARD_LEASE_SECONDS": str(LEASE_SECONDS)}
    with servers.postgres_database(schema=True) as url, servers.production(tmp_path, url, env=env) as prod:
        client = await Client.connect(prod.address)
        queue, ids = await idle_runs(client, RUNS, prefix="chaos-batch")
        job_id = f"chaos-{uuid.uuid4().hex[:8]}"
        await client.workflow_service.start_batch_operation(
            rr.StartBatchOperationRequest(
                namespace="default",
                job_id=job_id,
                reason="chaos",
                visibility_query=f"TaskQueue = '{queue}'",
                max_operations_per_second=RPS,
                signal_operation=BatchOperationSignal(signal="once"),
            )
        )
        killed_at = []
        worker = "worker"
        for round_ in (1, 2):
            mark = RUNS * round_ // 3
            await wait_until(lambda mark=mark: completed(url, job_id) >= mark, 60, f"{mark} targets done")
            prod.kill(worker)
            killed_at.append(completed(url, job_id))
            worker = f"worker-{round_}"
            proc = prod.spawn(worker, ["worker", "--concurrency", "1", "--", f"--hostname={worker}@%h"])
            servers.wait_for_log(" ready.", proc, prod.logs[worker])
        started = time.monotonic()
        described = await wait_closed(client, job_id, timeout=scaled(60, 300))
        drained_in = time.monotonic() - started
        counts = {}
        for workflow_id in ids:
            history = [e async for e in client.get_workflow_handle(workflow_id).fetch_history_events()]
            signals = [
                e
                for e in history
                if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
                and e.workflow_execution_signaled_event_attributes.signal_name == "once"
            ]
            counts[workflow_id] = len(signals)
        for workflow_id in ids:
            await client.get_workflow_handle(workflow_id).terminate("chaos over")

    missed = sorted(w for w, n in counts.items() if n == 0)
    doubled = sorted(w for w, n in counts.items() if n > 1)
    report(
        "batch-worker-kill",
        f"{RUNS} runs signalled by a batch at {RPS}/s; shard worker killed -9 at {killed_at[0]} and "
        f"{killed_at[1]} targets done; the batch finished {drained_in:.1f}s after the second restart; "
        f"{len(missed)} runs missed, {len(doubled)} signalled twice",
    )
    assert not missed, missed
    assert not doubled, doubled
    assert described.state == BatchOperationState.BATCH_OPERATION_STATE_COMPLETED
    assert (described.total_operation_count, described.complete_operation_count) == (RUNS, RUNS)
