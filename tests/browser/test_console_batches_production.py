"""The batch pages in production: a signed-in owner starts a termination batch from the list's filter in
`perdura web`; the Celery shard worker runs it; its progress reaches the open page through Redis."""

from __future__ import annotations

import asyncio
import uuid

from playwright.async_api import expect
from temporalio.client import Client

from tests.browser.conftest import PageWatch
from tests.browser.test_console_auth import production_web, signup  # noqa: F401 (a fixture)

RUNS = 100


async def test_a_batch_started_in_the_console_runs_on_the_worker_and_shows_progress_live(
    production_web,  # noqa: F811
    browser,
):
    running, base = production_web
    org = f"batchco{uuid.uuid4().hex[:6]}"
    context = await signup(browser, running, base, f"ops@{org}.example", org)
    namespace = f"orders.{org}"
    client = await Client.connect(running.address, namespace=namespace)
    queue = f"batch-prod-{uuid.uuid4().hex[:6]}"
    ids = [f"{queue}-{i}" for i in range(RUNS)]
    await asyncio.gather(*(client.start_workflow("BatchTarget", id=i, task_queue=queue) for i in ids))
    page = await context.new_page()
    watch = PageWatch(page)
    await page.goto(f"{base}/namespaces/{namespace}/workflows?query=TaskQueue%20%3D%20%27{queue}%27")
    await page.locator("#batch-from-query").click()
    await expect(page.locator("#batch-match-count")).to_contain_text(f"{RUNS} runs match now")
    await page.get_by_label("Terminate").check()
    await page.get_by_label("Reason").fill("production batch")
    await page.get_by_label(f"Act on the {RUNS} runs that match").check()
    await page.get_by_role("button", name="Start batch").click()
    await page.evaluate("window.__sameDocument = true")
    seen: list[int] = []
    for _ in range(600):
        done = int(await page.locator("#batch-completed").inner_text())
        if not seen or seen[-1] != done:
            seen.append(done)
        if await page.locator("#batch-state").inner_text() == "Completed":
            break
        await asyncio.sleep(0.05)
    await expect(page.locator("#batch-state")).to_have_text("Completed")
    await expect(page.locator("#batch-completed")).to_have_text(str(RUNS))
    assert await page.evaluate("window.__sameDocument") is True
    assert [n for n in seen if 0 < n < RUNS], seen  # progress arrived while it ran, without a reload
    described = await client.get_workflow_handle(ids[0]).describe()
    assert described.status.name == "TERMINATED"
    assert not watch.errors, watch.errors
    await context.close()
