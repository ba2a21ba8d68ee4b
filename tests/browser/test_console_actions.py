"""Actions on a run from its page, in a real browser against `perdura dev` (the loopback operator): the
stack trace, queries, signals and updates answered by an SDK worker; a reset from its preview, with
signals excluded, landing on the new run; and a query no worker answers, shown as a timeout."""

from __future__ import annotations

import uuid

from playwright.async_api import expect
from temporalio.worker import Worker

from tests.browser.action_workflows import ConsoleTally
from tests.browser.conftest import PageWatch, screenshot_path
from tests.browser.test_console import run_url


async def test_reads_signal_update_and_reset_from_the_preview(console_dev, dev_client, context):
    _, base = console_dev
    queue = f"tally-{uuid.uuid4().hex[:6]}"
    workflow_id = f"tally-{uuid.uuid4().hex[:6]}"
    async with Worker(dev_client, task_queue=queue, workflows=[ConsoleTally]):
        handle = await dev_client.start_workflow(ConsoleTally.run, 10, id=workflow_id, task_queue=queue)
        await handle.signal(ConsoleTally.add, "apple")
        await handle.signal(ConsoleTally.add, "pear")
        assert await handle.query(ConsoleTally.tally) == ["apple", "pear"]

        page = await context.new_page()
        watch = PageWatch(page)
        await page.goto(run_url(base, workflow_id, handle.result_run_id))
        bar = page.get_by_role("group", name="Run actions")
        for name in (
            "Stack trace",
            "Query",
            "Signal",
            "Update",
            "Reset",
            "Request cancellation",
            "Terminate",
        ):
            await expect(bar.get_by_role("button", name=name, exact=True)).to_be_visible()

        # The stack trace is one click away: the worker's answer to `__stack_trace`.
        await bar.get_by_role("button", name="Stack trace").click()
        stack = page.locator("#stack-dialog")
        await expect(stack.locator("#stack-result pre")).to_contain_text("Stack for")
        await stack.get_by_role("button", name="Close", exact=True).click()
        await expect(stack).to_be_hidden()

        # A query, and a query the workflow does not know: the worker's error, shown as such.
        await bar.get_by_role("button", name="Query", exact=True).click()
        dialog = page.locator("#query-dialog")
        await dialog.get_by_label("Query name").fill("tally")
        await dialog.get_by_role("button", name="Run query").click()
        await expect(dialog.locator("#query-result pre")).to_have_text('[\n  "apple",\n  "pear"\n]')
        await dialog.get_by_label("Query name").fill("no_such_query")
        await dialog.get_by_role("button", name="Run query").click()
        await expect(dialog.get_by_role("alert")).to_contain_text("no_such_query")
        await page.keyboard.press("Escape")
        await expect(dialog).to_be_hidden()

        # A signal with JSON input; bad JSON is refused before anything is sent.
        await bar.get_by_role("button", name="Signal", exact=True).click()
        dialog = page.locator("#signal-dialog")
        await dialog.get_by_label("Signal name").fill("add")
        await dialog.get_by_label("Input").fill("'plum'")
        await dialog.get_by_role("button", name="Send signal").click()
        await expect(dialog.get_by_role("alert")).to_contain_text("not JSON")
        await dialog.get_by_label("Input").fill('"plum"')
        await dialog.get_by_role("button", name="Send signal").click()
        await expect(dialog.get_by_role("status")).to_have_text("Signal 'add' sent.")
        await page.keyboard.press("Escape")
        assert await handle.query(ConsoleTally.tally) == ["apple", "pear", "plum"]

        # An update: the handler's result; the validator's refusal is the worker's error.
        await bar.get_by_role("button", name="Update", exact=True).click()
        dialog = page.locator("#update-dialog")
        await dialog.get_by_label("Update name").fill("add_now")
        await dialog.get_by_label("Arguments").fill('""')
        await dialog.get_by_role("button", name="Send update").click()
        await expect(dialog.get_by_role("alert")).to_contain_text("an item needs a name")
        await dialog.get_by_label("Arguments").fill('"fig"')
        await dialog.get_by_role("button", name="Send update").click()
        await expect(dialog.locator("#update-result pre")).to_have_text("4")
        await page.keyboard.press("Escape")

        # Reset to the first workflow task. The preview first re-applies the three signals and the update;
        # with signals unticked it lists them as excluded. The screenshot is the preview as a person sees it.
        await page.evaluate(
            "window.__settled = 0; document.body.addEventListener('htmx:afterSettle', () => window.__settled++)"
        )
        await bar.get_by_role("button", name="Reset", exact=True).click()
        dialog = page.locator("#reset-dialog")
        await page.wait_for_function("() => window.__settled > 0")  # the form is in, and htmx listens to it
        await expect(dialog.locator(".preview-lede")).to_contain_text("starts over from event")
        await dialog.get_by_label("Reset to").select_option("first")
        await expect(dialog.locator(".preview-lede")).to_contain_text("starts over from event 4")
        await expect(dialog.locator("#preview-reapplied li")).to_have_count(4)
        await expect(dialog.locator("#preview-dropped li").first).to_contain_text("WorkflowTaskCompleted")
        await dialog.get_by_label("Signals").uncheck()
        await expect(dialog.locator("#preview-excluded li")).to_have_count(3)
        await expect(dialog.locator("#preview-reapplied li")).to_have_count(1)
        await expect(dialog.locator("#preview-reapplied li")).to_contain_text("add_now")
        await expect(dialog.locator("#preview-excluded")).to_contain_text('"plum"')
        await dialog.get_by_label("Reason").fill("replay without the signals")
        await page.screenshot(path=screenshot_path("reset-preview"))
        await dialog.get_by_role("button", name="Reset", exact=True).click()
        old_url = page.url
        await page.wait_for_url(lambda url: url != old_url and url.endswith("/history"))
        new_run_id = page.url.rsplit("/", 2)[-2]
        assert new_run_id != handle.result_run_id
        await expect(page.locator("h1")).to_have_text(workflow_id)

        # The new run got the update again, not the excluded signals; the old one was terminated.
        latest = dev_client.get_workflow_handle(workflow_id)
        assert (await latest.describe()).run_id == new_run_id
        assert await latest.query(ConsoleTally.tally) == ["fig"]
        old = await dev_client.get_workflow_handle(workflow_id, run_id=handle.result_run_id).describe()
        assert old.status.name == "TERMINATED"
        await page.reload()
        history = page.locator("#history")
        await expect(history.locator(".etype", has_text="WorkflowTaskFailed")).to_have_count(1)
        await expect(history.locator(".etype", has_text="WorkflowExecutionSignaled")).to_have_count(0)
        assert watch.errors == [], watch.errors


async def test_a_query_no_worker_answers_times_out_clearly(console_dev, dev_client, context):
    _, base = console_dev
    handle = await dev_client.start_workflow(
        ConsoleTally.run, 1, id=f"tally-idle-{uuid.uuid4().hex[:6]}", task_queue="nobody-polls-tally"
    )
    page = await context.new_page()
    await page.goto(run_url(base, handle.id, handle.result_run_id))
    await (
        page.get_by_role("group", name="Run actions").get_by_role("button", name="Query", exact=True).click()
    )
    dialog = page.locator("#query-dialog")
    await dialog.get_by_label("Query name").fill("tally")
    await dialog.get_by_role("button", name="Run query").click()
    await expect(dialog.get_by_text("Asking the worker")).to_be_visible()
    alert = dialog.get_by_role("alert")
    await expect(alert).to_contain_text("no worker answered", timeout=20_000)
    await expect(alert).to_contain_text("nobody-polls-tally")
