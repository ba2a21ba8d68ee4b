"""Console page times: a run page of a 10,000-event history (full view by pages, compact view) and the list.

Starts `perdura dev` (SQLite) with its web port, makes one run with N events (signals to a run no worker
polls: one event each), then fetches each page `--repeat` times over loopback HTTP and prints the median
and the worst. Loopback round trips bound the server time from above (the client is the same machine).

    python bench/console_pages.py [--events 10000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from temporalio.client import Client  # noqa: E402

from tests.support import servers  # noqa: E402


def timed_get(url: str) -> tuple[float, int, int]:
    started = time.perf_counter()
    with urllib.request.urlopen(url) as answer:
        body = answer.read()
        status = answer.status
    return time.perf_counter() - started, status, len(body)


async def make_run(address: str, events: int) -> tuple[str, str]:
    client = await Client.connect(address, namespace="default")
    handle = await client.start_workflow("Nobody", id="bench-console-long", task_queue="nobody-polls")
    batch = 200
    sent = 0
    while sent < events - 2:
        count = min(batch, events - 2 - sent)
        await asyncio.gather(*(handle.signal(f"s{sent + i}", sent + i) for i in range(count)))
        sent += count
    return handle.id, handle.result_run_id or ""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    ui_port = servers.free_port()
    with (
        tempfile.TemporaryDirectory() as tmp,
        servers.dev_server(Path(tmp), extra=("--ui-port", str(ui_port))) as dev,
    ):
        servers.wait_for_port(ui_port, dev.processes["dev"], dev.logs["dev"])
        started = time.perf_counter()
        workflow_id, run_id = asyncio.run(make_run(dev.address, args.events))
        print(f"made a run of {args.events} events in {time.perf_counter() - started:.1f}s")
        base = f"http://127.0.0.1:{ui_port}"
        run = f"{base}/namespaces/default/workflows/{quote(workflow_id)}/{run_id}/history"
        pages = {
            "list": f"{base}/namespaces/default/workflows",
            "run, full view, newest page": run,
            "run, full view, oldest page": run + "?view=full&order=asc",
            "run, full view, middle page": run + f"?view=full&order=desc&after={args.events // 2}",
            "run, compact view (groups the whole history)": run + "?view=compact&order=asc",
        }
        for name, url in pages.items():
            timings = []
            size = 0
            for _ in range(args.repeat):
                took, status, size = timed_get(url)
                assert status == 200, (name, status)
                timings.append(took * 1000)
            print(
                f"{name:48s} median {statistics.median(timings):7.1f} ms  worst {max(timings):7.1f} ms  "
                f"({size // 1024} KiB)"
            )


if __name__ == "__main__":
    main()
