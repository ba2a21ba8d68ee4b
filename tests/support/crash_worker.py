"""An SDK worker in its own process, so a test can kill -9 it: python crash_worker.py ADDRESS TASK_QUEUE."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from temporalio.client import Client  # noqa: E402
from temporalio.worker import UnsandboxedWorkflowRunner, Worker  # noqa: E402

from tests.support.crash_workflows import (  # noqa: E402
    ChaosWorkflow,
    CrashChildWorkflow,
    CrashEverythingWorkflow,
    CrashWorkflow,
    handoff,
    record,
    record_slow_first,
)


async def main(address: str, task_queue: str) -> None:
    client = await Client.connect(address)
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[CrashWorkflow, CrashChildWorkflow, CrashEverythingWorkflow, ChaosWorkflow],
        activities=[record, record_slow_first, handoff],
        workflow_runner=UnsandboxedWorkflowRunner(),  # as in the suite's own workers (tests/conftest.py)
    ):
        print("worker ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
