"""The batch operations pages in Chromium: from the workflows list's filter to a batch that terminates 200
runs, its progress growing live on its page, and the batch in the namespace's list."""

from __future__ import annotations

import asyncio
import uuid

from playwright.async_api import expect
from temporalio.api.enums.v1 import WorkflowExecutionStatus

from tests.browser.conftest import PageWatch, screenshot_path

RUNS = 200


async def test_terminate_200_runs_by_query_and_watch_progress_live(console_dev, dev_client, context):
    _, base = console_dev
    queue = f"batch-ui-{uuid.uuid4().hex[:8]}"
    ids = [f"batch-ui-{uuid.uuid4().hex[:8]}-{i}" for i in range(RUNS)]
    for start in range(0, RUNS, 50):
        await asyncio.gather(
            *(
                dev_client.start_workflow("BatchTarget", id=i, task_queue=queue)
                for i in ids[start : start + 50]
            )
        )
    page = await context.new_page()
    watch = PageWatch(page)
    query = f"TaskQueue = '{queue}'"
    await page.goto(base + "/namespaces/default/workflows?query=" + query.replace(" ", "%20"))
    await page.locator("#batch-from-query").click()
    await expect(page.locator("#batch-match-count")).to_contain_text(f"{RUNS} runs match now")
    await page.get_by_label("Terminate").check()
    await page.get_by_label("Reason").fill("cleaning up the UI test")
    await page.get_by_label(f"Act on the {RUNS} runs that match").check()
    await page.get_by_role("button", name="Start batch").click()
    await expect(page.locator("h1")).to_contain_text("Terminate: console-")
    # The page is never reloaded: a marker set now must survive until the batch has finished.
    await page.evaluate("window.__sameDocument = true")
    seen: list[int] = []
    shot = False
    for _ in range(600):
        done = int(await page.locator("#batch-completed").inner_text())
        if not seen or seen[-1] != done:
            seen.append(done)
        if not shot and RUNS // 5 <= done <= RUNS * 4 // 5:
            await page.screenshot(path=str(screenshot_path("batch-progress")), full_page=True)
            shot = True
        if (await page.locator("#batch-state").inner_text()) == "Completed":
            break
        await asyncio.sleep(0.05)
    await expect(page.locator("#batch-state")).to_have_text("Completed")
    await expect(page.locator("#batch-completed")).to_have_text(str(RUNS))
    await expect(page.locator("#batch-percent")).to_have_text("100%")
    assert await page.evaluate("window.__sameDocument") is True
    # Progress arrived in steps while the batch ran (50 runs a second by default), not only at the end.
    assert len([n for n in seen if 0 < n < RUNS]) >= 3, seen
    await page.screenshot(path=str(screenshot_path("batch-done")), full_page=True)
    for workflow_id in (ids[0], ids[-1]):
        described = await dev_client.get_workflow_handle(workflow_id).describe()
        assert described.status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_TERMINATED

    await page.get_by_role("link", name="Batch operations").first.click()
    row = page.locator("table.batches tbody tr").first
    await expect(row.locator(".badge")).to_have_text("Completed")
    await expect(row).to_contain_text(f"{RUNS}/{RUNS}")
    await page.screenshot(path=str(screenshot_path("batch-operations")), full_page=True)
    assert not watch.errors, watch.errors
