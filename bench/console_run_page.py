"""Server time of the console's run page (summary, timeline, history) for a 10,000-event run: p50/p99 over N renders.

The page reports its own time in `Server-Timing: app;dur=<ms>, cpu;dur=<ms>` (frontend/middleware.py: the
view and its templates, not the network; and the CPU time its thread spent, which a busy machine does not
inflate as it does the wall time); the loopback round trip is printed beside them. Without `--web`, starts
`perdura dev` (SQLite) with its web port; with `--web URL --address HOST:PORT`, measures any Perdura (its
database is whatever that server uses): the run is made through the gRPC API, the page fetched over HTTP.

Two shapes of run: `signals` (a run no worker polls, sent N signals: N point rows on the timeline, the
longest timeline a history of that length has) and `activities` (an SDK worker runs batches of 50
activities at once until the history is N events long: bars with queue waits and runs).

    python bench/console_run_page.py [--events 10000] [--renders 50] [--shape signals|activities]
    python bench/console_run_page.py --address 127.0.0.1:7233 --web http://127.0.0.1:8233 \
        [--namespace default] [--api-key KEY] [--cookie 'sessionid=...'] [--workflow-id W --run-id R]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import statistics
import sys
import tempfile
import time
import urllib.request
import uuid
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from temporalio import activity, workflow  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.worker import UnsandboxedWorkflowRunner, Worker  # noqa: E402

TIMING = re.compile(r"app;dur=([0-9.]+)")
CPU = re.compile(r"cpu;dur=([0-9.]+)")


@activity.defn
async def bench_step(n: int) -> int:
    return n


@workflow.defn
class BenchActivities:
    """Runs activities 50 at a time until its history holds about `events` events."""

    @workflow.run
    async def run(self, events: int) -> int:
        done = 0
        # Each activity adds 3 events (scheduled, started, completed) and each batch 3 workflow-task
        # events more, plus the start and the close.
        while workflow.info().get_current_history_length() + 3 * 50 + 6 < events:
            await asyncio.gather(
                *(
                    workflow.execute_activity(
                        bench_step, done + i, start_to_close_timeout=timedelta(seconds=30)
                    )
                    for i in range(50)
                )
            )
            done += 50
        return done


async def _client(args: argparse.Namespace, address: str) -> Client:
    return await Client.connect(address, namespace=args.namespace, api_key=args.api_key or None)


async def make_signal_run(client: Client, events: int) -> tuple[str, str]:
    handle = await client.start_workflow(
        "Nobody", id=f"bench-run-page-{uuid.uuid4().hex[:6]}", task_queue="nobody-polls"
    )
    sent, batch = 0, 200
    while sent < events - 2:
        count = min(batch, events - 2 - sent)
        await asyncio.gather(*(handle.signal(f"s{sent + i}", sent + i) for i in range(count)))
        sent += count
    return handle.id, handle.result_run_id or ""


async def make_activity_run(client: Client, events: int) -> tuple[str, str]:
    queue = f"bench-run-page-{uuid.uuid4().hex[:6]}"
    async with Worker(
        client,
        task_queue=queue,
        workflows=[BenchActivities],
        activities=[bench_step],
        max_concurrent_activities=50,
        # The sandbox would import this script again (sys.path, argparse); the workflow is deterministic.
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        handle = await client.start_workflow(BenchActivities.run, events, id=queue, task_queue=queue)
        await handle.result()
    return handle.id, handle.result_run_id or ""


def fetch(url: str, cookie: str) -> tuple[float, float | None, float, int]:
    """(server ms and server CPU ms from Server-Timing, round trip ms, bytes)."""
    request = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    started = time.perf_counter()
    with urllib.request.urlopen(request) as answer:
        body = answer.read()
        header = answer.headers.get("Server-Timing", "")
        status = answer.status
    took = (time.perf_counter() - started) * 1000
    if status != 200:
        raise SystemExit(f"{url} answered {status}")
    found = TIMING.search(header)
    if found is None:
        raise SystemExit(f"{url} has no Server-Timing header (a Perdura older than this bench?)")
    cpu = CPU.search(header)
    return float(found.group(1)), float(cpu.group(1)) if cpu else None, took, len(body)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def _figures(name: str, values: list[float]) -> dict[str, float]:
    return {
        f"{name}_p50_ms": round(statistics.median(values), 1),
        f"{name}_p99_ms": round(percentile(values, 0.99), 1),
    }


def measure(args: argparse.Namespace, web: str, workflow_id: str, run_id: str) -> dict[str, dict[str, float]]:
    run = f"{web}/namespaces/{quote(args.namespace)}/workflows/{quote(workflow_id, safe='')}/{run_id}/history"
    pages = {
        "run page, full view (newest events, timeline)": run,
        "run page, compact view (timeline)": run + "?view=compact&order=desc",
        "run page, oldest timeline rows": run + "?timeline=1",
    }
    figures: dict[str, dict[str, float]] = {}
    # The first render reads and parses the whole history; later ones extend the process's copy
    # (engine/services/console_reads.run_history) with what was appended since.
    fetch(f"{web}/namespaces/{quote(args.namespace)}/workflows", args.cookie)  # the process's first page
    cold, cold_cpu, _, _ = fetch(run, args.cookie)
    figures["first render (whole history read)"] = {"server_ms": cold, "cpu_ms": cold_cpu or 0.0}
    print(f"{'first render (whole history read)':48s} server {cold:7.1f} ms  cpu {cold_cpu or 0:7.1f} ms")
    for name, url in pages.items():
        server, cpu, trip, size = [], [], [], 0
        for _ in range(args.renders):
            s, c, t, size = fetch(url, args.cookie)
            server.append(s)
            cpu.append(c or 0.0)
            trip.append(t)
        shown = {"renders": args.renders, "kib": size // 1024}
        shown |= _figures("server", server) | _figures("cpu", cpu) | _figures("round_trip", trip)
        figures[name] = shown
        print(
            f"{name:48s} server p50 {shown['server_p50_ms']:7.1f} ms  p99 {shown['server_p99_ms']:7.1f} ms"
            f"   cpu p50 {shown['cpu_p50_ms']:7.1f} ms  p99 {shown['cpu_p99_ms']:7.1f} ms"
            f"   round trip p50 {shown['round_trip_p50_ms']:7.1f} ms  ({size // 1024} KiB)"
        )
    return figures


def run_bench(args: argparse.Namespace, address: str, web: str) -> None:
    if args.workflow_id:
        workflow_id, run_id = args.workflow_id, args.run_id
    else:
        started = time.perf_counter()
        make = make_signal_run if args.shape == "signals" else make_activity_run

        async def made() -> tuple[str, str]:
            return await make(await _client(args, address), args.events)

        workflow_id, run_id = asyncio.run(made())
        print(f"made a run of ~{args.events} events ({args.shape}) in {time.perf_counter() - started:.1f}s")
    load_before = os.getloadavg()[0]
    figures = measure(args, web, workflow_id, run_id)
    load = round(max(load_before, os.getloadavg()[0]), 1)
    print(f"load average (1 min) during the renders: up to {load} on {os.cpu_count()} cores")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"events": args.events, "shape": args.shape, "load": load, "pages": figures}, indent=2)
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--renders", type=int, default=50)
    parser.add_argument("--shape", choices=["signals", "activities"], default="signals")
    parser.add_argument("--address", help="gRPC address of a running Perdura (with --web)")
    parser.add_argument("--web", help="console base URL of that Perdura, e.g. http://127.0.0.1:8233")
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--api-key", default="")
    parser.add_argument(
        "--cookie", default="", help="Cookie header of a signed-in person (production consoles)"
    )
    parser.add_argument("--workflow-id", default="", help="measure this run instead of making one")
    parser.add_argument("--run-id", default="")
    parser.add_argument("--json", default="", help="also write the figures to this file")
    args = parser.parse_args()
    if args.web:
        if not args.address and not args.workflow_id:
            parser.error("--web needs --address (to make the run) or --workflow-id/--run-id")
        run_bench(args, args.address or "", args.web.rstrip("/"))
        return
    from tests.support import servers

    ui_port = servers.free_port()
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        dev = stack.enter_context(servers.dev_server(Path(tmp), extra=("--ui-port", str(ui_port))))
        servers.wait_for_port(ui_port, dev.processes["dev"], dev.logs["dev"])
        run_bench(args, dev.address, f"http://127.0.0.1:{ui_port}")


if __name__ == "__main__":
    main()
