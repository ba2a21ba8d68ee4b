"""A reset batch started from the workflows list's filter: every matching run is reset to its first
workflow task, its signals not re-applied as asked, and the batch's page shows the progress."""

from __future__ import annotations

import asyncio
import uuid

from playwright.async_api import expect
from temporalio.api.enums.v1 import EventType, WorkflowExecutionStatus

from tests.browser.conftest import PageWatch, screenshot_path
from tests.browser.workflows import ConsoleOrder

RUNS = 4


async def _has_completed_task(handle) -> bool:  # type: ignore[no-untyped-def]
    history = await handle.fetch_history()
    return any(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED for e in history.events)


async def test_reset_runs_by_query_from_the_console(
    console_dev, dev_client, console_worker, task_queue, context
):
    _, base = console_dev
    tag = uuid.uuid4().hex[:6]
    handles = [
        await dev_client.start_workflow(
            ConsoleOrder.run,
            {"customer": f"c{i}", "signals": 2},
            id=f"reset-{tag}-{i}",
            task_queue=task_queue,
        )
        for i in range(RUNS)
    ]
    # The signal comes after each run's first workflow task, so a reset to that task drops it unless
    # re-applied.
    for handle in handles:
        for _ in range(100):
            if await _has_completed_task(handle):
                break
            await asyncio.sleep(0.1)
        await handle.signal("early", 1)
    first_runs = [h.result_run_id for h in handles]

    page = await context.new_page()
    watch = PageWatch(page)
    query = f'WorkflowId STARTS_WITH "reset-{tag}-"'
    await page.goto(base + "/namespaces/default/workflows")
    await page.get_by_label("List filter").fill(query)
    await page.get_by_label("List filter").press("Enter")
    await page.locator("#batch-from-query").click()
    await expect(page.locator("#batch-match-count")).to_contain_text(f"{RUNS} runs match now")
    await page.get_by_label("Reset", exact=True).check()
    await page.get_by_label("First workflow task").check()
    await page.get_by_label("Do not re-apply signals").check()
    await page.get_by_label("Reason").fill("replay from the start without the early signal")
    await page.get_by_label(f"Act on the {RUNS} runs that match").check()
    await page.screenshot(path=screenshot_path("batch-reset-form"), full_page=True)
    await page.get_by_role("button", name="Start batch").click()
    await expect(page.locator("h1")).to_contain_text("Reset: console-")
    await expect(page.locator("#batch-state")).to_have_text("Completed", timeout=30_000)
    await expect(page.locator("#batch-completed")).to_have_text(str(RUNS))

    for handle, first_run in zip(handles, first_runs, strict=True):
        old = await dev_client.get_workflow_handle(handle.id, run_id=first_run).describe()
        assert old.status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_TERMINATED
        current = dev_client.get_workflow_handle(handle.id)
        described = await current.describe()
        assert described.run_id != first_run
        assert described.status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING
        events = (await current.fetch_history()).events
        # Reset to the first workflow task: the early signal came after it and was excluded.
        assert not [e for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED]
        await current.terminate("test over")
    assert watch.errors == []
