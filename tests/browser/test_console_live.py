"""Live updates in a real browser against `perdura dev` (one process: the in-memory channel layer): runs
started by the official SDK appear in the open list and change status there, an open run's history grows
as signals arrive, with no reload, and markup arriving live stays inert. The websocket is refused to
pages of other origins and, as pages are, to hosts other than loopback names (DNS rebinding)."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import re
import statistics
import time
import uuid
from urllib.parse import quote

import pytest
from playwright.async_api import expect
from temporalio.client import WorkflowFailureError

from tests.browser.conftest import OUTPUT, PageWatch, screenshot_path
from tests.browser.test_console import XSS, run_url
from tests.browser.workflows import ConsoleOrder

LIVE_OPEN = "[data-live][data-state=open]"
SIGNALS = int(os.environ.get("PERDURA_LIVE_SIGNALS", "50"))


OBSERVE_SIGNALS = r"""(prefix) => {
  window.__seen = {};
  const pattern = new RegExp(prefix + "-(\\d+)\\b");
  new MutationObserver(() => {
    document.querySelectorAll("#history .esum").forEach((el) => {
      const m = pattern.exec(el.textContent);
      if (m && !(m[1] in window.__seen)) window.__seen[m[1]] = Date.now();
    });
  }).observe(document.getElementById("main"), { childList: true, subtree: true, characterData: true });
}"""


async def signal_latencies(
    page, handle, *, prefix: str, count: int, on_each=None, gap: float = 0.25
) -> list[float]:
    """Milliseconds from each signal RPC's return to its event's row in the page, by the system clock that
    the test and the browser share (a MutationObserver notes when each row appears). Signals are 250 ms
    apart, a run that gets a few events a second: back to back, each would land in the consumer's
    coalescing window (renders start 200 ms apart at most) and measure that instead."""
    await page.evaluate(OBSERVE_SIGNALS, prefix)
    latencies = []
    for n in range(count):
        await handle.signal(f"{prefix}-{n}", n)
        returned = time.time() * 1000
        await page.wait_for_function(
            "(n) => window.__seen && n in window.__seen", arg=n, polling=20, timeout=10_000
        )
        latencies.append(await page.evaluate("(n) => window.__seen[n]", n) - returned)
        if on_each is not None:
            await on_each(n)
        await asyncio.sleep(gap)
    return latencies


def latency_figures(latencies: list[float], *, mode: str) -> dict[str, object]:
    ordered = sorted(latencies)
    return {
        "signals": len(ordered),
        "p50_ms": round(statistics.median(ordered), 1),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 1),
        "max_ms": round(ordered[-1], 1),
        "mode": mode,
    }


async def mark_no_reload(page) -> None:
    """A flag in the page's window: it survives only if the page is never reloaded or navigated."""
    await page.evaluate("window.__noReload = 1")


async def assert_not_reloaded(page) -> None:
    assert await page.evaluate("window.__noReload") == 1


async def test_sdk_run_appears_live_in_the_list_and_changes_status(
    console_dev, dev_client, console_worker, task_queue, context
):
    _, base = console_dev
    tag = uuid.uuid4().hex[:6]
    page = await context.new_page()
    watch = PageWatch(page)
    await page.goto(
        base + "/namespaces/default/workflows?query=" + quote(f'WorkflowId STARTS_WITH "live-{tag}"')
    )
    await expect(page.locator("table.runs tbody tr")).to_have_text(["No runs match this filter."])
    await expect(page.locator(LIVE_OPEN)).to_have_count(1)
    await mark_no_reload(page)

    handle = await dev_client.start_workflow(
        ConsoleOrder.run, {"customer": "Ada", "signals": 1}, id=f"live-{tag}-a", task_queue=task_queue
    )
    row = page.locator("table.runs tbody tr", has_text=f"live-{tag}-a")
    await expect(row.locator(".badge")).to_have_text("Running")
    await expect(page.locator(".chip.status-running span")).to_have_text("1")
    await handle.signal("go")
    await handle.result()
    await expect(row.locator(".badge")).to_have_text("Completed")
    await expect(page.locator(".chip.status-completed span")).to_have_text("1")
    await expect(page.locator(".chip.status-running span")).to_have_text("0")
    # The row's link still works: htmx and the links of swapped parts are live too.
    await assert_not_reloaded(page)
    assert watch.errors == []
    await row.get_by_role("link", name=f"live-{tag}-a").click()
    await expect(page.locator("h1")).to_have_text(f"live-{tag}-a")


async def test_run_history_grows_live_as_signals_arrive(
    console_dev, dev_client, console_worker, task_queue, context
):
    """Also measures the latency from the signal RPC's return to the event's row in the page."""
    _, base = console_dev
    workflow_id = f"live-{uuid.uuid4().hex[:6]}"
    handle = await dev_client.start_workflow(
        ConsoleOrder.run,
        {"customer": "Ada", "signals": SIGNALS + 1},
        id=workflow_id,
        task_queue=task_queue,
    )
    page = await context.new_page()
    watch = PageWatch(page)
    await page.goto(run_url(base, workflow_id, handle.result_run_id))
    await expect(page.locator(LIVE_OPEN)).to_have_count(1)
    history = page.locator("#history")
    # The greeting activity completes and the run waits for signals (seen live: no reload yet).
    await expect(history.locator("ol.full > li", has_text="ActivityTaskCompleted")).to_have_count(1)
    await expect(history.locator("ol.full > li").first.locator(".etype")).to_have_text(
        "WorkflowTaskCompleted"
    )
    # The person opened the newest event: it stays open across live swaps.
    await history.locator("ol.full > li").first.locator("summary").first.click()
    opened = await history.locator("ol.full > li").first.get_attribute("id")
    await mark_no_reload(page)

    async def check_open(n: int) -> None:
        if n == 2:  # still on the first page (100 events), the event opened before stays open
            await expect(page.locator(f"#{opened} > details")).to_have_attribute("open", "")

    latencies = await signal_latencies(page, handle, prefix="lat", count=SIGNALS, on_each=check_open)
    await expect(history.locator("h2 .count")).not_to_have_text("")
    await expect(history.locator("ol.full > li").first).to_contain_text(
        "WorkflowTaskCompleted", timeout=5_000
    )
    await expect(page.locator("#run-status")).to_have_text("Running")

    await handle.signal("last")
    await handle.result()
    await expect(page.locator("#run-status")).to_have_text("Completed")
    await expect(page.locator("#run-outcome")).to_contain_text('"greeting": "Hello, Ada!"')
    await expect(history.locator("ol.full > li").first.locator(".etype")).to_have_text(
        "WorkflowExecutionCompleted"
    )
    events = [e async for e in handle.fetch_history_events()]
    await expect(history.locator("h2 .count")).to_have_text(str(len(events)))
    await assert_not_reloaded(page)
    assert watch.errors == []
    await page.screenshot(path=screenshot_path("run-live"), full_page=False)

    figures = latency_figures(latencies, mode="perdura dev (in-memory channel layer)")
    OUTPUT.mkdir(parents=True, exist_ok=True)
    (OUTPUT / "live-latency-dev.json").write_text(json.dumps(figures, indent=2))
    print("live latency, signal RPC return -> DOM:", figures)
    # The target is 500 ms p99; the bound here is looser, for a busy two-core test machine.
    assert figures["p99_ms"] < 1500, figures


async def test_markup_arriving_live_stays_inert(console_dev, dev_client, console_worker, task_queue, context):
    _, base = console_dev
    tag = uuid.uuid4().hex[:6]
    page = await context.new_page()
    watch = PageWatch(page)

    async def assert_inert() -> None:
        assert await page.evaluate("window.__xss") is None
        assert await page.locator("img[src=x]").count() == 0
        assert await page.locator("script:not([src])").count() == 0

    await page.goto(
        base + "/namespaces/default/workflows?query=" + quote(f'WorkflowId STARTS_WITH "xss-live-{tag}"')
    )
    await expect(page.locator(LIVE_OPEN)).to_have_count(1)
    await mark_no_reload(page)
    handle = await dev_client.start_workflow(
        ConsoleOrder.run,
        {"customer": XSS, "items": [XSS], "signals": 1, "fail": f"rejected {XSS}"},
        id=f"xss-live-{tag}-{XSS}",
        task_queue=task_queue,
        memo={XSS: XSS},
    )
    await expect(page.get_by_role("link", name=f"xss-live-{tag}-{XSS}", exact=True)).to_be_visible()
    await assert_inert()

    await page.get_by_role("link", name=f"xss-live-{tag}-{XSS}", exact=True).click()
    await expect(page.locator("h1")).to_have_text(f"xss-live-{tag}-{XSS}")
    await expect(page.locator(LIVE_OPEN)).to_have_count(1)
    await mark_no_reload(page)
    await handle.signal(f"sig-{XSS}", XSS)
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    await expect(page.locator("#run-status")).to_have_text("Failed")
    await expect(page.locator(".failure-message")).to_have_text(f"rejected {XSS}")
    signaled = page.locator("ol.full > li", has_text="WorkflowExecutionSignaled")
    await expect(signaled.locator(".esum")).to_contain_text(f"sig-{XSS}")
    for summary in await page.locator("ol.full details > summary").all():
        await summary.click()
    await assert_inert()
    await assert_not_reloaded(page)
    assert watch.errors == []


def handshake(base: str, path: str, *, host: str, origin: str | None, cookie: str = "") -> int:
    """The HTTP status of a websocket handshake (101: accepted) sent with these Host and Origin headers."""
    netloc = base.removeprefix("http://")
    conn = http.client.HTTPConnection(netloc, timeout=10)
    headers = {
        "Host": host,
        "Upgrade": "websocket",
        "Connection": "Upgrade",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version": "13",
    }
    if origin is not None:
        headers["Origin"] = origin
    if cookie:
        headers["Cookie"] = cookie
    try:
        conn.request("GET", path, headers=headers)
        return conn.getresponse().status
    finally:
        conn.close()


def test_live_socket_checks_origin_and_loopback_host(console_dev):
    _, base = console_dev
    port = base.rsplit(":", 1)[1]
    path = "/live/namespaces/default/workflows"
    own = f"127.0.0.1:{port}"
    assert handshake(base, path, host=own, origin=f"http://{own}") == 101  # the positive control
    assert handshake(base, path, host=f"localhost:{port}", origin=f"http://localhost:{port}") == 101
    assert handshake(base, path, host=own, origin="http://evil.example") == 403
    assert handshake(base, path, host=own, origin=None) == 403
    # DNS rebinding: the page of rebound.example, resolved to 127.0.0.1, is same-origin with itself.
    assert handshake(base, path, host="rebound.example", origin="http://rebound.example") == 403
    assert handshake(base, "/live/namespaces/nope/workflows", host=own, origin=f"http://{own}") == 403


async def test_a_lost_update_is_read_again_when_the_page_reconnects(console_dev, dev_client, context):
    """The first socket's messages are lost (a hint dropped, Redis away): the page shows nothing new,
    which costs freshness only; when that socket drops, the page reconnects and re-reads the run."""
    _, base = console_dev
    handle = await dev_client.start_workflow(
        "Idle", id=f"lost-{uuid.uuid4().hex[:6]}", task_queue="nobody-polls"
    )
    sockets = []

    def route(ws) -> None:
        server = ws.connect_to_server()
        sockets.append(ws)
        if len(sockets) == 1:
            server.on_message(lambda message: None)  # what the server sends on this socket is lost

    page = await context.new_page()
    watch = PageWatch(page)
    await page.route_web_socket(re.compile(r"/live/"), route)
    await page.goto(run_url(base, handle.id, handle.result_run_id))
    await expect(page.locator(LIVE_OPEN)).to_have_count(1)
    await mark_no_reload(page)
    await handle.signal("while-lost")
    await asyncio.sleep(1)
    assert await page.locator("ol.full > li", has_text="while-lost").count() == 0
    await sockets[0].close()
    await expect(page.locator("ol.full > li", has_text="while-lost")).to_have_count(1)
    assert len(sockets) == 2
    await assert_not_reloaded(page)
    assert watch.errors == []
    await handle.terminate("test over")
