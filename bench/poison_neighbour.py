"""Poison-row isolation: do another tenant's unprocessable rows delay this tenant's timers?

Starts a Perdura of its own (`perdura dev` on SQLite, or the production processes on Postgres +
Redis + Celery), with namespaces A (the bad neighbour) and B (measured). B starts workflows at a fixed
rate, each sleeping one timer; its timer lateness is read afterwards from the histories, server-side:
`TimerFired.event_time - (TimerStarted.event_time + start_to_fire_timeout)`. Two phases in one run:

1. alone (baseline);
2. while A keeps producing rows no shard processor can complete:
   - the request that once stalled a shard: a workflow task answered with 100 StartChildWorkflowExecution
     commands whose `workflow_execution_timeout` is 1e12 s (raw gRPC, every second);
   - runs whose sealed state no longer decrypts (written over in the database), while each has a timer
     due every second, so every fire of theirs fails;
   - transfer rows (child starts) whose sealed details do not decrypt, inserted every second.

It reports B's lateness p50/p99/max in both phases and their ratio, and how many poison rows A made.
The goal is that B's p99 does not move. Like bench/rate_limit_isolation.py this is Perdura-specific
(it writes to the database), so it imports the test support that starts servers.

Usage::

    python bench/poison_neighbour.py [--mode dev|production] [--rate 10] [--seconds 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from temporalio import workflow  # noqa: E402

from tests.support import servers  # noqa: E402

SLEEP_SECONDS = 2.0
POISON_RUNS = 20


@workflow.defn(name="PoisonBenchSleeper")
class Sleeper:
    """B's measured workflow: one timer, then done."""

    @workflow.run
    async def run(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


@workflow.defn(name="PoisonBenchTicker")
class Ticker:
    """A's workflow whose state the bench corrupts: it always has a timer about to fire."""

    @workflow.run
    async def run(self) -> None:
        while True:  # noqa: ASYNC110 - a timer every second is the point
            await asyncio.sleep(1)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


# --------------------------------------------------------------------------- A's poison


_INJECT = """
import os, sys, django
django.setup()
from django.db import transaction
from perdura import clock
from engine.history.mutation import TransferKind
from engine.models import Execution, Transfer
namespace, what, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
runs = list(Execution.objects.filter(namespace__name=namespace, workflow_type="PoisonBenchTicker", status=1))
with transaction.atomic():
    if what == "state":
        for e in runs:
            Execution.objects.filter(pk=e.pk).update(state=os.urandom(64))
    else:
        now = clock.now()
        Transfer.objects.bulk_create(
            Transfer(shard=runs[i % len(runs)].shard, execution=runs[i % len(runs)], kind=TransferKind.START_CHILD,
                     event_id=10_000_000 + i, details=os.urandom(48), created_at=now)
            for i in range(count)
        )
print(len(runs))
"""


def inject(running: servers.Running, namespace: str, what: str, count: int = 0) -> int:
    """Write poison into the server's database (a separate process with the server's settings)."""
    env = dict(
        running.env,
        PERDURA_DATABASE_URL=running.database_url or f"sqlite:///{running.db_file}",
        DJANGO_SETTINGS_MODULE="perdura.settings",
    )
    done = subprocess.run(
        [sys.executable, "-c", _INJECT, namespace, what, str(count)],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if done.returncode != 0:
        raise RuntimeError(f"injecting {what} failed:\n{done.stderr[-3000:]}")
    return int(done.stdout.split()[-1])


async def poison_commands(address: str, namespace: str, stop_at: float) -> dict[str, int]:
    """Every second: a workflow task answered with 100 child starts whose execution timeout is 1e12 s."""
    import grpc
    from google.protobuf.duration_pb2 import Duration
    from temporalio.api.command.v1 import Command, StartChildWorkflowExecutionCommandAttributes
    from temporalio.api.common.v1 import WorkflowType
    from temporalio.api.enums.v1 import CommandType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import request_response_pb2 as rr
    from temporalio.api.workflowservice.v1 import service_pb2_grpc as wss

    counts = {"tasks": 0, "accepted": 0, "refused": 0}
    queue = TaskQueue(name=f"poison-{uuid.uuid4()}")
    async with grpc.aio.insecure_channel(address) as channel:
        stub = wss.WorkflowServiceStub(channel)
        while time.monotonic() < stop_at:
            began = time.monotonic()
            await stub.StartWorkflowExecution(
                rr.StartWorkflowExecutionRequest(
                    namespace=namespace,
                    workflow_id=f"poison-{uuid.uuid4()}",
                    workflow_type=WorkflowType(name="PoisonParent"),
                    task_queue=queue,
                    request_id=str(uuid.uuid4()),
                )
            )
            task = await stub.PollWorkflowTaskQueue(
                rr.PollWorkflowTaskQueueRequest(namespace=namespace, task_queue=queue, identity="poison"),
                timeout=10,
            )
            if not task.task_token:
                continue
            commands = [
                Command(
                    command_type=CommandType.COMMAND_TYPE_START_CHILD_WORKFLOW_EXECUTION,
                    start_child_workflow_execution_command_attributes=StartChildWorkflowExecutionCommandAttributes(
                        namespace=namespace,
                        workflow_id=f"poison-child-{uuid.uuid4()}",
                        workflow_type=WorkflowType(name="PoisonChild"),
                        task_queue=queue,
                        workflow_execution_timeout=Duration(seconds=10**12),
                    ),
                )
                for _ in range(100)
            ]
            counts["tasks"] += 1
            try:
                await stub.RespondWorkflowTaskCompleted(
                    rr.RespondWorkflowTaskCompletedRequest(
                        namespace=namespace, task_token=task.task_token, commands=commands, identity="poison"
                    )
                )
                counts["accepted"] += 1
            except grpc.aio.AioRpcError:
                counts["refused"] += 1
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - began)))
    return counts


# --------------------------------------------------------------------------- B's measurement


async def measure(client, queue: str, rate: float, seconds: float) -> tuple[list[float], int]:
    """Start B's sleepers at `rate` a second for `seconds`; their timer lateness (ms) once all are done."""
    from temporalio.api.enums.v1 import EventType

    handles = []
    errors = 0
    start = time.monotonic()
    for i in range(int(rate * seconds)):
        await asyncio.sleep(max(0.0, start + i / rate - time.monotonic()))
        try:
            handles.append(
                await client.start_workflow(
                    Sleeper.run, SLEEP_SECONDS, id=f"sleeper-{uuid.uuid4()}", task_queue=queue
                )
            )
        except Exception:  # noqa: BLE001 - a refused or timed-out start is what this counts
            errors += 1
    lateness: list[float] = []
    # One deadline for the whole phase: a stalled server shows as errors, not as an hour of waiting.
    results = await asyncio.gather(
        *(asyncio.wait_for(h.result(), timeout=SLEEP_SECONDS + 60) for h in handles), return_exceptions=True
    )
    for handle, outcome in zip(handles, results, strict=True):
        if isinstance(outcome, BaseException):
            errors += 1
            continue
        started = fired = None
        timeout = timedelta()
        async for event in handle.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_TIMER_STARTED:
                started = event.event_time.ToDatetime()
                timeout = event.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta()
            elif event.event_type == EventType.EVENT_TYPE_TIMER_FIRED:
                fired = event.event_time.ToDatetime()
        if started is None or fired is None:
            errors += 1
            continue
        lateness.append((fired - (started + timeout)).total_seconds() * 1000)
    return lateness, errors


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": round(percentile(values, 0.5), 1),
        "p99": round(percentile(values, 0.99), 1),
        "max": round(max(values), 1) if values else float("nan"),
    }


async def run(args: argparse.Namespace, running: servers.Running) -> dict:
    from temporalio.client import Client
    from temporalio.worker import UnsandboxedWorkflowRunner, Worker

    bad, measured = "neighbour", "measured"
    for name in (bad, measured):
        running.cli("namespace", "create", name)
    client_a = await Client.connect(running.address, namespace=bad)
    client_b = await Client.connect(running.address, namespace=measured)
    queue_a, queue_b = f"ticker-{uuid.uuid4()}", f"sleeper-{uuid.uuid4()}"
    result: dict = {"mode": args.mode, "rate": args.rate, "seconds": args.seconds, "sleep_s": SLEEP_SECONDS}
    async with (
        Worker(client_a, task_queue=queue_a, workflows=[Ticker], workflow_runner=UnsandboxedWorkflowRunner()),
        Worker(
            client_b, task_queue=queue_b, workflows=[Sleeper], workflow_runner=UnsandboxedWorkflowRunner()
        ),
    ):
        # A's tickers run through both phases (a timer each a second): the baseline has the same healthy
        # neighbour, so the phases differ only by the poison.
        for _ in range(POISON_RUNS):
            await client_a.start_workflow(Ticker.run, id=f"ticker-{uuid.uuid4()}", task_queue=queue_a)
        await asyncio.sleep(2)
        baseline, errors = await measure(client_b, queue_b, args.rate, args.seconds)
        result["baseline"] = {"lateness_ms": summary(baseline), "errors": errors}

        corrupted = await asyncio.to_thread(inject, running, bad, "state")
        # All at once (a subprocess per injection would itself take CPU from B on a small machine): from
        # here on they fail, back off and park while B is measured.
        await asyncio.to_thread(inject, running, bad, "transfers", args.bad_transfers)
        made = args.bad_transfers
        stop_at = time.monotonic() + args.seconds + SLEEP_SECONDS + 5
        commands = (
            asyncio.create_task(poison_commands(running.address, bad, stop_at)) if args.child_flood else None
        )
        await asyncio.sleep(1)
        poisoned, errors = await measure(client_b, queue_b, args.rate, args.seconds)
        result["poisoned"] = {
            "lateness_ms": summary(poisoned),
            "errors": errors,
            "neighbour": {
                "corrupted_runs": corrupted,
                "bad_transfers": made,
                "child_flood_tasks": await commands if commands is not None else None,
            },
        }
    base = result["baseline"]["lateness_ms"]
    got = result["poisoned"]["lateness_ms"]
    result["p50_ratio"] = round(got["p50"] / base["p50"], 2) if base["p50"] > 0 else None
    result["p99_ratio"] = round(got["p99"] / base["p99"], 2) if base["p99"] > 0 else None
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["dev", "production"], default="dev")
    parser.add_argument("--rate", type=float, default=10.0, help="B's sleepers started a second")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each measured phase")
    parser.add_argument("--bad-transfers", type=int, default=500, help="undecryptable transfer rows A makes")
    parser.add_argument(
        "--child-flood",
        action="store_true",
        help="A also answers a workflow task every second with 100 child starts of a 1e12 s timeout (the "
        "request that once stalled a shard; the edge now caps it, so this is load, not poison)",
    )
    parser.add_argument("--json", help="write the result here too")
    args = parser.parse_args()
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    with tempfile.TemporaryDirectory(prefix="perdura-poison-bench-") as tmp, contextlib.ExitStack() as stack:
        if args.mode == "dev":
            running = stack.enter_context(servers.dev_server(Path(tmp)))
        else:
            url = stack.enter_context(servers.postgres_database())
            running = stack.enter_context(servers.production(Path(tmp), url))
        result = asyncio.run(run(args, running))
        log = running.logs.get("dev") or running.logs.get("worker")
        if log is not None and log.exists():
            result["server_log_bytes"] = log.stat().st_size
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 1 if result["baseline"]["errors"] or result["poisoned"]["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
