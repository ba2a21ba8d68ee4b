"""Query latency against any Temporal-API server, with and without a workflow task in flight.

Scenarios, each timing only the ``QueryWorkflow`` call (the SDK's ``handle.query``):

* ``idle``: the run is waiting and has no workflow task: the query goes to a worker on its own;
* ``after_signal``: the query is sent right after a signal, so the run has a workflow task scheduled or
  running: a consistent query must see the signal (attached to that task, or dispatched after it);
* ``slow_task``: the signal handler blocks the worker for ``--slow-ms``; the query arrives while that
  workflow task runs;
* ``slow_task_then_signal``: as ``slow_task``, and a second signal arrives before the query, so another
  workflow task follows the slow one (a consistent query must see both signals).

Like ``throughput.py`` it runs its own SDK worker on a fresh task queue, so the same command works
against Perdura or the real server. Usage::

    python bench/query_latency.py --address 127.0.0.1:7233 [--queries 50] [--slow-ms 200] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
import uuid

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker


@workflow.defn(name="BenchQueried")
class BenchQueried:
    def __init__(self) -> None:
        self.count = 0
        self.done = False

    @workflow.signal
    def bump(self, slow_ms: int) -> None:
        if slow_ms and not workflow.unsafe.is_replaying():
            time.sleep(slow_ms / 1000)  # a busy worker: the workflow task stays in flight this long
        self.count += 1

    @workflow.signal
    def stop(self) -> None:
        self.done = True

    @workflow.query
    def current(self) -> int:
        return self.count

    @workflow.run
    async def run(self) -> int:
        await workflow.wait_condition(lambda: self.done)
        return self.count


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50": round(statistics.median(ordered), 2),
        "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 2),
        "mean": round(statistics.fmean(ordered), 2),
    }


async def _scenario(client: Client, task_queue: str, name: str, queries: int, slow_ms: int) -> list[float]:
    handle = await client.start_workflow(
        BenchQueried.run, id=f"bench-query-{name}-{uuid.uuid4()}", task_queue=task_queue
    )
    assert await handle.query(BenchQueried.current) == 0  # the first workflow task has run
    samples = []
    for i in range(queries):
        if name == "after_signal":
            await handle.signal(BenchQueried.bump, 0)
        elif name == "slow_task":
            await handle.signal(BenchQueried.bump, slow_ms)
            await asyncio.sleep(min(slow_ms, 50) / 1000)
        elif name == "slow_task_then_signal":
            await handle.signal(BenchQueried.bump, slow_ms)
            await asyncio.sleep(min(slow_ms, 50) / 1000)
            await handle.signal(BenchQueried.bump, 0)  # buffered: another workflow task must follow
        started = time.perf_counter()
        value = await handle.query(BenchQueried.current)
        samples.append((time.perf_counter() - started) * 1000)
        expected = {"idle": 0, "slow_task_then_signal": 2 * (i + 1)}.get(name, i + 1)
        if value != expected:
            raise AssertionError(f"{name}: query saw {value}, expected {expected} (not consistent)")
    await handle.signal(BenchQueried.stop)
    await handle.result()
    return samples


async def run(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    client = await Client.connect(args.address, namespace=args.namespace)
    task_queue = f"bench-{uuid.uuid4()}"
    results = {}
    async with Worker(
        client, task_queue=task_queue, workflows=[BenchQueried], workflow_runner=UnsandboxedWorkflowRunner()
    ):
        for name in ("idle", "after_signal", "slow_task", "slow_task_then_signal"):
            samples = await _scenario(client, task_queue, name, args.queries, args.slow_ms)
            results[name] = _summary(samples)
            print(f"{name:13s} query ms  " + "  ".join(f"{k} {v:8.2f}" for k, v in results[name].items()))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="127.0.0.1:7233")
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--slow-ms", type=int, default=200)
    parser.add_argument("--json")
    args = parser.parse_args()
    results = asyncio.run(run(args))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"address": args.address, "queries": args.queries, "results": results}, out, indent=1)


if __name__ == "__main__":
    main()
    os._exit(0)  # see README "Process exit"
