"""An SDK worker in its own process, so a test can kill -9 it: python crash_worker.py ADDRESS TASK_QUEUE."""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
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
        # A killed worker's sticky queue holds its run's next workflow task until this timeout sends it to
        # the normal queue, as on the real server (whose matching still counts a poller seen in the last
        # 10 s as there). The SDK's 10 s made three of these waits 30 of a crash test's 50 s.
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=2),
    ):
        print("worker ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
