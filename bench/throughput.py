"""Workflow throughput and latency against any Temporal-API server.

Measures, for one scenario run against one address with the official Python SDK:

* start latency: duration of the ``start_workflow`` call (StartWorkflowExecution round trip), per workflow;
* end-to-end latency: from just before ``start_workflow`` until the workflow result is received, per
  workflow (includes the signal round trip in the ``signal`` scenario);
* throughput: completed workflows divided by the wall time from the first start call to the last
  completion.

The benchmark runs its own SDK worker in this process, on a fresh task queue ``bench-<uuid>``, so the
same command works unchanged against Perdura or the real Temporal server. A few warm-up workflows run
first and are not counted. Worker, client and load generator share one event loop, so on a small
machine the client side can become the bottleneck; compare servers on the same machine in the same run
(see ``bench/compare.py``).

Usage::

    python bench/throughput.py --address 127.0.0.1:7233 --scenario one_activity \\
        [--namespace default] [--workflows 200] [--concurrency 50] [--json out.json] [--api-key KEY]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Coroutine
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from measure import percentile, process_tree_cpu_s
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

SCENARIOS: tuple[str, ...] = ("one_activity", "ten_activities", "timer", "signal")

_ACTIVITY_TIMEOUT = timedelta(seconds=30)
T = TypeVar("T")


# --------------------------------------------------------------------------- workflows and activities


@activity.defn(name="bench_echo")
async def bench_echo(value: str) -> str:
    """The cheapest possible activity: return the input, so only server round trips are measured."""
    return value


@workflow.defn(name="BenchOneActivity")
class BenchOneActivity:
    @workflow.run
    async def run(self, value: str) -> str:
        return await workflow.execute_activity(bench_echo, value, start_to_close_timeout=_ACTIVITY_TIMEOUT)


@workflow.defn(name="BenchTenActivities")
class BenchTenActivities:
    @workflow.run
    async def run(self, value: str) -> str:
        result = value
        for _ in range(10):
            result = await workflow.execute_activity(
                bench_echo, result, start_to_close_timeout=_ACTIVITY_TIMEOUT
            )
        return result


@workflow.defn(name="BenchTimer")
class BenchTimer:
    @workflow.run
    async def run(self, value: str) -> str:
        await asyncio.sleep(0.1)  # a durable 100 ms timer (StartTimer / TimerFired)
        return value


@workflow.defn(name="BenchSignal")
class BenchSignal:
    def __init__(self) -> None:
        self._received: str | None = None

    @workflow.signal(name="go")
    def go(self, value: str) -> None:
        self._received = value

    @workflow.run
    async def run(self, value: str) -> str:
        await workflow.wait_condition(lambda: self._received is not None)
        assert self._received is not None
        return self._received


WORKFLOW_BY_SCENARIO: dict[str, type] = {
    "one_activity": BenchOneActivity,
    "ten_activities": BenchTenActivities,
    "timer": BenchTimer,
    "signal": BenchSignal,
}


# --------------------------------------------------------------------------- results


@dataclass
class LatencyStats:
    p50: float
    p99: float
    mean: float

    @classmethod
    def of(cls, samples_ms: list[float]) -> LatencyStats:
        if not samples_ms:
            return cls(p50=float("nan"), p99=float("nan"), mean=float("nan"))
        ordered = sorted(samples_ms)
        return cls(
            p50=round(percentile(ordered, 50), 3),
            p99=round(percentile(ordered, 99), 3),
            mean=round(statistics.fmean(ordered), 3),
        )


@dataclass
class BenchResult:
    address: str
    scenario: str
    workflows: int
    concurrency: int
    wall_s: float
    workflows_per_s: float
    start_ms: LatencyStats
    e2e_ms: LatencyStats
    errors: int
    client_cpu_s: float = 0.0
    server_cpu_s: float | None = None
    """CPU of the server's processes and their descendants over the measured phase (--server-pids)."""
    eager_activities: bool = False
    error_samples: list[str] = field(default_factory=list)

    @property
    def server_cpu_ms_per_workflow(self) -> float:
        if self.server_cpu_s is None or self.workflows <= 0:
            return float("nan")
        return 1000.0 * self.server_cpu_s / self.workflows

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if self.server_cpu_s is not None:
            data["server_cpu_ms_per_workflow"] = round(self.server_cpu_ms_per_workflow, 3)
        if not self.error_samples:
            data.pop("error_samples")
        return data

    def summary_lines(self) -> list[str]:
        def lat(stats: LatencyStats) -> str:
            return f"p50 {stats.p50:9.2f} ms   p99 {stats.p99:9.2f} ms   mean {stats.mean:9.2f} ms"

        cpu_pct = 100.0 * self.client_cpu_s / self.wall_s if self.wall_s > 0 else 0.0
        lines = [
            f"address          {self.address}",
            f"scenario         {self.scenario}",
            f"workflows        {self.workflows} (concurrency {self.concurrency})",
            f"errors           {self.errors}",
            f"wall time        {self.wall_s:.3f} s",
            f"throughput       {self.workflows_per_s:.1f} workflows/s",
            f"start latency    {lat(self.start_ms)}",
            f"e2e latency      {lat(self.e2e_ms)}",
            f"bench CPU        {self.client_cpu_s:.2f} s ({cpu_pct:.0f}% of one core over the wall time)",
        ]
        if self.server_cpu_s is not None:
            lines.append(
                f"server CPU       {self.server_cpu_s:.2f} s, {self.server_cpu_ms_per_workflow:.2f} ms per workflow"
            )
        lines.extend(f"error sample     {sample}" for sample in self.error_samples)
        return lines


@dataclass
class _Sample:
    t_begin: float
    t_started: float | None = None
    t_done: float | None = None
    error: str | None = None


# --------------------------------------------------------------------------- driver


async def _run_one(
    client: Client, scenario: str, task_queue: str, workflow_id: str, timeout_s: float
) -> _Sample:
    sample = _Sample(t_begin=time.perf_counter())
    try:
        handle = await client.start_workflow(
            WORKFLOW_BY_SCENARIO[scenario], workflow_id, id=workflow_id, task_queue=task_queue
        )
        sample.t_started = time.perf_counter()
        if scenario == "signal":
            await handle.signal(BenchSignal.go, workflow_id)
        result = await asyncio.wait_for(handle.result(), timeout=timeout_s)
        sample.t_done = time.perf_counter()
        if result != workflow_id:
            sample.error = f"unexpected result {result!r}"
    except Exception as exc:  # counted, not fatal: one failing workflow must not abort the run
        sample.error = f"{type(exc).__name__}: {exc}"
    return sample


async def _run_batch(
    client: Client,
    scenario: str,
    task_queue: str,
    prefix: str,
    count: int,
    concurrency: int,
    timeout_s: float,
) -> list[_Sample]:
    gate = asyncio.Semaphore(concurrency)

    async def gated(index: int) -> _Sample:
        async with gate:
            return await _run_one(client, scenario, task_queue, f"{prefix}-{index}", timeout_s)

    return list(await asyncio.gather(*(gated(i) for i in range(count))))


async def run_benchmark(
    *,
    address: str,
    scenario: str,
    namespace: str = "default",
    workflows: int = 200,
    concurrency: int = 50,
    warmup: int = 5,
    api_key: str | None = None,
    tls: bool | None = None,
    timeout_s: float = 60.0,
    eager_activities: bool = False,
    server_pids: list[int] | None = None,
) -> BenchResult:
    """Run one scenario against one address with a dedicated worker; the worker is shut down on return.

    Raises if the connection or the worker fails; failures of individual workflows are counted instead.
    """
    if scenario not in WORKFLOW_BY_SCENARIO:
        raise ValueError(f"unknown scenario {scenario!r}; choose from {', '.join(SCENARIOS)}")
    client = await Client.connect(address, namespace=namespace, api_key=api_key, tls=tls)
    run_id = uuid.uuid4().hex[:12]
    task_queue = f"bench-{run_id}"
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=list(WORKFLOW_BY_SCENARIO.values()),
        activities=[bench_echo],
        # The workflows are trivial and deterministic; skipping the sandbox keeps worker CPU per workflow
        # task low so that the server, not the in-process worker, dominates what is measured.
        workflow_runner=UnsandboxedWorkflowRunner(),
        # Eager activity dispatch bypasses the server's activity task matching; it is off by default so
        # that every activity goes through the same server path on every server under comparison.
        disable_eager_activity_execution=not eager_activities,
    )

    async def measure() -> tuple[list[_Sample], float]:
        if warmup > 0:
            prefix = f"bench-warmup-{run_id}"
            await _run_batch(
                client, scenario, task_queue, prefix, warmup, min(warmup, concurrency), timeout_s
            )
        cpu_before = time.process_time()  # whole process, including the SDK's Rust threads
        server_before = process_tree_cpu_s(server_pids) if server_pids else 0.0
        samples = await _run_batch(
            client, scenario, task_queue, f"bench-{scenario}-{run_id}", workflows, concurrency, timeout_s
        )
        if server_pids:
            server_cpu["s"] = process_tree_cpu_s(server_pids) - server_before
        return samples, time.process_time() - cpu_before

    server_cpu: dict[str, float] = {}
    samples, cpu_s = await beside_worker(worker, measure())
    result = _summarise(address, scenario, workflows, concurrency, samples)
    result.client_cpu_s = round(cpu_s, 3)
    result.eager_activities = eager_activities
    if "s" in server_cpu:
        result.server_cpu_s = round(server_cpu["s"], 3)
    return result


async def beside_worker(worker: Worker, measurement: Coroutine[Any, Any, T]) -> T:
    """Run `measurement` while `worker` serves its task queue, then shut the worker down; its result.

    Not `async with worker`: if the worker fails at start-up (e.g. unknown namespace), the SDK's
    __aexit__ waits forever for a shutdown that never completes. Running both as tasks lets a dead
    worker abort the measurement, and a finished measurement shut the worker down.
    """
    worker_task = asyncio.create_task(worker.run(), name="bench-worker")
    measure_task = asyncio.create_task(measurement, name="bench-measure")
    try:
        await asyncio.wait({worker_task, measure_task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not measure_task.done():
            measure_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await measure_task
        if not worker_task.done():
            await worker.shutdown()  # all workflows are closed by now, so nothing is left in flight
    await worker_task  # re-raises a fatal worker error, if any
    if measure_task.cancelled():
        raise RuntimeError("the worker stopped before the benchmark finished")
    return measure_task.result()


def _summarise(
    address: str, scenario: str, workflows: int, concurrency: int, samples: list[_Sample]
) -> BenchResult:
    ok = [s for s in samples if s.error is None and s.t_started is not None and s.t_done is not None]
    errors = [s.error for s in samples if s.error is not None]
    start_ms = [(s.t_started - s.t_begin) * 1000.0 for s in samples if s.t_started is not None]
    e2e_ms = [(s.t_done - s.t_begin) * 1000.0 for s in ok if s.t_done is not None]
    if ok:
        first = min(s.t_begin for s in samples)
        last = max(s.t_done for s in ok if s.t_done is not None)
        wall_s = last - first
    else:
        wall_s = 0.0
    return BenchResult(
        address=address,
        scenario=scenario,
        workflows=workflows,
        concurrency=concurrency,
        wall_s=round(wall_s, 4),
        workflows_per_s=round(len(ok) / wall_s, 2) if wall_s > 0 else 0.0,
        start_ms=LatencyStats.of(start_ms),
        e2e_ms=LatencyStats.of(e2e_ms),
        errors=len(errors),
        error_samples=sorted(set(errors))[:3],
    )


# --------------------------------------------------------------------------- command line


def parse_pids(text: str) -> list[int]:
    """`123+456`: the processes of one server (see process_tree_cpu_s)."""
    return [int(p) for p in text.split("+") if p.strip()]


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared with bench/compare.py."""
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--workflows", type=int, default=200, help="measured workflows (default 200)")
    parser.add_argument("--concurrency", type=int, default=50, help="max workflows in flight (default 50)")
    parser.add_argument("--warmup", type=int, default=5, help="uncounted warm-up workflows (default 5)")
    parser.add_argument("--api-key", default=None, help="sent as 'Authorization: Bearer KEY'")
    parser.add_argument(
        "--tls",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="force TLS on/off (default: the SDK's choice, i.e. TLS only when --api-key is given)",
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="per-workflow result timeout, seconds")
    parser.add_argument(
        "--eager-activities",
        action="store_true",
        help="let the SDK request eager activity execution (off by default, see README)",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--address", required=True, help="host:port of the Temporal-API frontend")
    parser.add_argument("--scenario", required=True, choices=SCENARIOS)
    parser.add_argument("--json", dest="json_path", default=None, help="also write the result here")
    parser.add_argument(
        "--server-pids",
        default="",
        help="the server's process ids joined by '+' (their descendants count too): report its CPU per workflow",
    )
    add_connection_arguments(parser)
    args = parser.parse_args(argv)
    if args.workflows < 1 or args.concurrency < 1 or args.warmup < 0:
        parser.error("--workflows and --concurrency must be >= 1, --warmup >= 0")

    result = asyncio.run(
        run_benchmark(
            address=args.address,
            scenario=args.scenario,
            namespace=args.namespace,
            workflows=args.workflows,
            concurrency=args.concurrency,
            warmup=args.warmup,
            api_key=args.api_key,
            tls=args.tls,
            timeout_s=args.timeout,
            eager_activities=args.eager_activities,
            server_pids=parse_pids(args.server_pids) or None,
        )
    )
    print("\n".join(result.summary_lines()))
    if args.json_path:
        with open(args.json_path, "w", encoding="utf-8") as fh:
            json.dump(result.to_json(), fh, indent=2)
            fh.write("\n")
    return 1 if result.errors else 0


def exit_without_finalizing(code: int) -> None:
    """Exit once all output is flushed, skipping interpreter finalization.

    By now the worker has shut down and every workflow has completed. The SDK's Rust (Tokio) threads can
    still be alive, and if CPython finalizes underneath them the process intermittently aborts with
    "Fatal Python error: PyGILState_Release" (temporalio/sdk-python#300). That abort would replace a
    correct exit status with SIGABRT, so it is skipped.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_without_finalizing(main())
