"""Timer lateness and activity dispatch latency against any Temporal-API server, read from the histories.

Two measurements, each with the official Python SDK on a fresh task queue, so the same command works
against Perdura or the real Temporal server:

* timer lateness: `--timers` workflows start at once and each sleeps `--timer-seconds` (one durable
  timer). A timer's lateness is its TimerFired event's time minus its TimerStarted event's time minus the
  duration: how long after it was due the server recorded it fired.
* activity dispatch: `--activity-workflows` one-activity workflows run with at most `--concurrency` in
  flight. An activity's dispatch latency is its ActivityTaskStarted event's time minus its
  ActivityTaskScheduled event's time: how long the task waited for a poller that was there.

Both are the server's own timestamps, so the bench's event loop does not count. Issue 17's targets:
lateness p99 at most 10 ms with 10 timers in flight and 50 ms with 1,000; dispatch p99 at most 20 ms at
concurrency 32.

Usage::

    python bench/latency.py --address 127.0.0.1:7233 [--timers 10] [--timer-seconds 2]
        [--activity-workflows 200] [--concurrency 32] [--rounds 1] [--json out.json]

With `--rounds N` each statistic is the median of N rounds' (the maximum, their maximum).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from throughput import (
    BenchOneActivity,
    LatencyStats,
    bench_echo,
    beside_worker,
    exit_without_finalizing,
    percentile,
)


@workflow.defn(name="LatencyTimer")
class LatencyTimer:
    @workflow.run
    async def run(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def _ms(later: HistoryEvent, earlier: HistoryEvent) -> float:
    delta = later.event_time.ToDatetime() - earlier.event_time.ToDatetime()
    return delta.total_seconds() * 1000.0


def timer_lateness_ms(events: list[HistoryEvent], seconds: float) -> list[float]:
    """Each fired timer's lateness in a run's history (fired time minus started time minus `seconds`)."""
    started = {e.event_id: e for e in events if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED}
    return [
        _ms(e, started[e.timer_fired_event_attributes.started_event_id]) - seconds * 1000.0
        for e in events
        if e.event_type == EventType.EVENT_TYPE_TIMER_FIRED
        and e.timer_fired_event_attributes.started_event_id in started
    ]


def dispatch_ms(events: list[HistoryEvent]) -> list[float]:
    """Each started activity's wait in a run's history (started time minus scheduled time)."""
    scheduled = {
        e.event_id: e for e in events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    return [
        _ms(e, scheduled[e.activity_task_started_event_attributes.scheduled_event_id])
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and e.activity_task_started_event_attributes.scheduled_event_id in scheduled
    ]


def _stats(samples: list[float]) -> dict[str, Any]:
    stats = LatencyStats.of(samples)
    return {
        "samples": len(samples),
        "p50": stats.p50,
        "p99": stats.p99,
        "max": round(max(samples), 3) if samples else float("nan"),
        "p90": round(percentile(sorted(samples), 90), 3) if samples else float("nan"),
    }


async def _history(client: Client, workflow_id: str) -> list[HistoryEvent]:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return list(history.events)


async def _gated(count: int, concurrency: int, one: Callable[[int], Awaitable[Any]]) -> list[Any]:
    gate = asyncio.Semaphore(concurrency)

    async def run(index: int) -> Any:
        async with gate:
            return await one(index)

    return list(await asyncio.gather(*(run(i) for i in range(count))))


async def measure(
    *,
    address: str,
    namespace: str = "default",
    timers: int = 10,
    timer_seconds: float = 2.0,
    activity_workflows: int = 200,
    concurrency: int = 32,
) -> dict[str, Any]:
    """Both measurements against `address`, with a worker of this process (shut down on return)."""
    client = await Client.connect(address, namespace=namespace)
    run = uuid.uuid4().hex[:12]
    task_queue = f"latency-{run}"
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[LatencyTimer, BenchOneActivity],
        activities=[bench_echo],
        workflow_runner=UnsandboxedWorkflowRunner(),
        disable_eager_activity_execution=True,  # every activity goes through the server's matching
        max_concurrent_activities=max(concurrency, 100),
    )

    async def timers_phase() -> list[float]:
        ids = [f"latency-timer-{run}-{i}" for i in range(timers)]
        # All started before any fires: a timer started later would find a quieter server.
        handles = await _gated(
            timers,
            100,
            lambda i: client.start_workflow(
                LatencyTimer.run, timer_seconds, id=ids[i], task_queue=task_queue
            ),
        )
        await asyncio.gather(*(h.result() for h in handles))
        histories = await _gated(timers, 20, lambda i: _history(client, ids[i]))
        return [ms for events in histories for ms in timer_lateness_ms(events, timer_seconds)]

    async def activities_phase() -> list[float]:
        ids = [f"latency-activity-{run}-{i}" for i in range(activity_workflows)]

        async def one(i: int) -> list[HistoryEvent]:
            await client.execute_workflow(BenchOneActivity.run, ids[i], id=ids[i], task_queue=task_queue)
            return await _history(client, ids[i])

        histories = await _gated(activity_workflows, concurrency, one)
        return [ms for events in histories for ms in dispatch_ms(events)]

    async def both() -> dict[str, Any]:
        await client.execute_workflow(
            BenchOneActivity.run, "warm", id=f"latency-warm-{run}", task_queue=task_queue
        )
        lateness = await timers_phase() if timers else []
        dispatch = await activities_phase() if activity_workflows else []
        return {
            "address": address,
            "timers": timers,
            "timer_seconds": timer_seconds,
            "timer_lateness_ms": _stats(lateness),
            "activity_workflows": activity_workflows,
            "concurrency": concurrency,
            "activity_dispatch_ms": _stats(dispatch),
        }

    return await beside_worker(worker, both())


def combined(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One result of several rounds: each statistic the median of the rounds' (the maximum their maximum),
    each round's kept under "rounds"."""
    result = dict(rounds[0])
    for name in ("timer_lateness_ms", "activity_dispatch_ms"):
        each = [r[name] for r in rounds]
        result[name] = {
            "samples": sum(s["samples"] for s in each),
            **{k: statistics.median(s[k] for s in each) for k in ("p50", "p90", "p99")},
            "max": max(s["max"] for s in each),
            "rounds": each,
        }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--address", required=True, help="host:port of the Temporal-API frontend")
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--timers", type=int, default=10, help="timers in flight at once (default 10)")
    parser.add_argument("--timer-seconds", type=float, default=2.0, help="each timer's duration (default 2)")
    parser.add_argument(
        "--activity-workflows", type=int, default=200, help="one-activity workflows (default 200)"
    )
    parser.add_argument(
        "--concurrency", type=int, default=32, help="activity workflows in flight (default 32)"
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="measure this many times and report the medians (default 1)"
    )
    parser.add_argument("--json", dest="json_path", default=None, help="also write the result here")
    args = parser.parse_args(argv)
    rounds = [
        asyncio.run(
            measure(
                address=args.address,
                namespace=args.namespace,
                timers=args.timers,
                timer_seconds=args.timer_seconds,
                activity_workflows=args.activity_workflows,
                concurrency=args.concurrency,
            )
        )
        for _ in range(max(args.rounds, 1))
    ]
    result = combined(rounds)
    for name in ("timer_lateness_ms", "activity_dispatch_ms"):
        s = result[name]
        print(
            f"{name:22s} samples {s['samples']:5d}   p50 {s['p50']:8.2f}   p90 {s['p90']:8.2f}   "
            f"p99 {s['p99']:8.2f}   max {s['max']:8.2f}"
        )
    if args.json_path:
        with open(args.json_path, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=2)
    return 0


if __name__ == "__main__":
    # As bench/throughput.py: the SDK's threads can abort the interpreter's finalization (SIGABRT).
    exit_without_finalizing(main())
