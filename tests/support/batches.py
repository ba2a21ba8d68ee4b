"""Helpers for batch operation tests: runs nobody works on, the CLI, waiting for a batch to close."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid

from temporalio.api.enums.v1 import BatchOperationState
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr
from temporalio.client import Client

from tests.support.reference import TEMPORAL

RUNNING = BatchOperationState.BATCH_OPERATION_STATE_RUNNING


async def idle_runs(client: Client, count: int, *, prefix: str = "batch") -> tuple[str, list[str]]:
    """Start `count` runs on a fresh task queue no worker polls (they stay running); (queue, workflow ids)."""
    queue = f"{prefix}-tq-{uuid.uuid4().hex[:10]}"
    ids = [f"{prefix}-{uuid.uuid4().hex[:10]}-{i}" for i in range(count)]
    await asyncio.gather(*(client.start_workflow("BatchTarget", id=i, task_queue=queue) for i in ids))
    return queue, ids


async def temporal(*args: str, address: str, namespace: str = "default") -> subprocess.CompletedProcess[str]:
    """The `temporal` CLI against `address`; fails the test if it fails."""
    done = await asyncio.to_thread(
        subprocess.run,
        [str(TEMPORAL), *args, "--address", address, "--namespace", namespace],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"temporal {' '.join(args)}: {done.stderr}{done.stdout}"
    return done


def job_id_of(output: str) -> str:
    """The job id `temporal workflow <action> --query ...` prints."""
    return output.rsplit("Started batch for job ID:", 1)[1].split()[0]


async def wait_closed(client: Client, job_id: str, timeout: float = 60) -> rr.DescribeBatchOperationResponse:
    """Describe the batch until it is no longer running."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        described = await client.workflow_service.describe_batch_operation(
            rr.DescribeBatchOperationRequest(namespace=client.namespace, job_id=job_id)
        )
        if described.state != RUNNING:
            return described
        assert asyncio.get_running_loop().time() < deadline, f"batch {job_id} still running: {described}"
        await asyncio.sleep(0.1)


async def describe_json(address: str, job_id: str) -> dict:
    done = await temporal("batch", "describe", "--job-id", job_id, "-o", "json", address=address)
    return json.loads(done.stdout)
