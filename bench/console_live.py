"""Console live updates: milliseconds from a signal RPC's return to its event's row in an open run page.

Starts `perdura dev` (SQLite) with its web port and Debian's Chromium (Playwright), starts a run that no
worker polls, optionally fills its history first (`--history` signals, one event each), opens its page,
then sends `--signals` signals `--gap` seconds apart and notes, by the clock the browser and this script
share, when each signal's row appears (tests/browser/test_console_live.py measures the same, and the
production path through Redis in tests/browser/test_console_auth.py).

    python bench/console_live.py [--signals 200] [--gap 0.25] [--history 0]

A gap under 0.2 s measures the consumer's coalescing (one render per 200 ms per socket) more than the path.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playwright.async_api import async_playwright  # noqa: E402
from temporalio.client import Client  # noqa: E402

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.browser.test_console import run_url  # noqa: E402
from tests.browser.test_console_live import latency_figures, signal_latencies  # noqa: E402
from tests.support import servers  # noqa: E402


async def measure(address: str, base: str, *, signals: int, gap: float, history: int) -> dict[str, object]:
    client = await Client.connect(address, namespace="default")
    handle = await client.start_workflow("Idle", id=f"live-{uuid.uuid4().hex[:6]}", task_queue="nobody-polls")
    for n in range(history):
        await handle.signal("fill", n)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = await browser.new_page()
        await page.goto(run_url(base, handle.id, handle.result_run_id))
        await page.wait_for_selector("[data-live][data-state=open]", state="attached")
        latencies = await signal_latencies(page, handle, prefix="lat", count=signals, gap=gap)
        await browser.close()
    await handle.terminate("bench over")
    return latency_figures(latencies, mode=f"perdura dev, gap {gap} s, history {history + 2} events")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--signals", type=int, default=200)
    parser.add_argument("--gap", type=float, default=0.25)
    parser.add_argument("--history", type=int, default=0)
    args = parser.parse_args()
    ui_port = servers.free_port()
    with (
        tempfile.TemporaryDirectory() as tmp,
        servers.dev_server(Path(tmp), extra=("--ui-port", str(ui_port))) as running,
    ):
        servers.wait_for_port(ui_port, running.processes["dev"], running.logs["dev"])
        figures = asyncio.run(
            measure(
                running.address,
                f"http://127.0.0.1:{ui_port}",
                signals=args.signals,
                gap=args.gap,
                history=args.history,
            )
        )
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
