"""Actions on a run from its page, in a real browser. Against `perdura dev` (the loopback operator): the
stack trace, queries, signals and updates answered by an SDK worker; a reset from its preview, with
signals excluded, landing on the new run; a query no worker answers, shown as a timeout. In production
(`perdura web`, people signed in): a termination with its reason in the history and the person in the
audit log; a reader has no action and is refused a forged post; another tenant gets 404."""

from __future__ import annotations

import json
import re
import uuid

from playwright.async_api import expect
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

from frontend.history import event_name
from tests.browser.action_workflows import ConsoleTally
from tests.browser.conftest import PageWatch, screenshot_path
from tests.browser.test_console import run_url
from tests.browser.test_console_auth import PASSWORD, production_web, signup  # noqa: F401 - a fixture
from tests.browser.workflows import ConsoleOrder


async def test_reads_signal_update_and_reset_from_the_preview(console_dev, dev_client, context):
    _, base = console_dev
    queue = f"tally-{uuid.uuid4().hex[:6]}"
    workflow_id = f"tally-{uuid.uuid4().hex[:6]}"
    async with Worker(dev_client, task_queue=queue, workflows=[ConsoleTally]):
        handle = await dev_client.start_workflow(ConsoleTally.run, 10, id=workflow_id, task_queue=queue)
        # Answered once the first workflow task is done (a query waits for the task in flight), so the
        # signals below come after the first reset point.
        assert await handle.query(ConsoleTally.tally) == []
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
        # (By keyboard: the button opens its dialog with the name field focused; Escape closes it.)
        await bar.get_by_role("button", name="Signal", exact=True).focus()
        await page.keyboard.press("Enter")
        dialog = page.locator("#signal-dialog")
        await expect(dialog.get_by_label("Signal name")).to_be_focused()
        await page.keyboard.type("add")
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
        await dialog.get_by_label("Updates").uncheck()
        await expect(dialog.locator("#preview-excluded li")).to_have_count(4)
        await expect(dialog.locator("#preview-reapplied li")).to_have_count(0)
        await dialog.get_by_label("Updates").check()
        await expect(dialog.locator("#preview-reapplied li")).to_have_count(1)
        # A point that is not the end of a workflow task gets the reset's own refusal, in the preview.
        run_path = page.url.removesuffix("/history")
        for point, message in [
            ("1", "must be &gt; 1"),
            ("5", "Can only reset workflow to event ID in range"),
        ]:
            answer = await page.request.get(f"{run_path}/reset/preview?point={point}&reapply_signals=1")
            assert answer.status == 200
            assert message in await answer.text(), point
        await dialog.get_by_label("Reason").fill("replay without the signals")
        previewed = await dialog.locator("ol.added li").all_inner_texts()
        await page.screenshot(path=screenshot_path("reset-preview"))
        await page.set_viewport_size({"width": 390, "height": 844})
        await page.screenshot(path=screenshot_path("reset-preview-phone"))
        await page.set_viewport_size({"width": 1440, "height": 900})
        await dialog.get_by_role("button", name="Reset", exact=True).click()
        # The new run's page, named by what it is rather than by the URL read after the click: the redirect can
        # land before the test reads page.url again. A reset replays the history, so a loaded machine gets longer.
        await page.wait_for_url(
            lambda url: handle.result_run_id not in url and url.endswith("/history"), timeout=30_000
        )
        new_run_id = page.url.rsplit("/", 2)[-2]
        assert new_run_id != handle.result_run_id
        await expect(page.locator("h1")).to_have_text(workflow_id)

        # The new run got the update again, not the excluded signals; the old one was terminated.
        latest = dev_client.get_workflow_handle(workflow_id)
        assert (await latest.describe()).run_id == new_run_id
        assert await latest.query(ConsoleTally.tally) == ["fig"]
        # What the preview said the new run continues with is what the reset wrote after event 3.
        written = [e async for e in latest.fetch_history_events()][3 : 3 + len(previewed)]
        assert [" ".join(text.split()[:2]) for text in previewed] == [
            f"{e.event_id} {event_name(e.event_type)}" for e in written
        ]
        assert [e.event_type for e in written][-1] == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED
        old = await dev_client.get_workflow_handle(workflow_id, run_id=handle.result_run_id).describe()
        assert old.status.name == "TERMINATED"
        await page.reload()
        history = page.locator("#history")
        await expect(history.locator(".etype", has_text="WorkflowTaskFailed")).to_have_count(1)
        await expect(history.locator(".etype", has_text="WorkflowExecutionSignaled")).to_have_count(0)

        # Cancellation, confirmed with a reason: the workflow's code decides, and this one stops.
        await bar.get_by_role("button", name="Request cancellation").click()
        dialog = page.locator("#cancel-dialog")
        await dialog.get_by_label("Reason").fill("no longer needed")
        await dialog.get_by_role("button", name="Request cancellation").click()
        await expect(page.locator("#run-actions").get_by_role("status")).to_contain_text(
            "Cancellation requested"
        )
        await expect(page.locator("#run-status")).to_have_text("Canceled")
        # The live update brings the bar of a closed run: reads and reset only.
        await expect(bar.get_by_role("button", name="Terminate")).to_have_count(0)
        await expect(bar.get_by_role("button", name="Reset")).to_be_visible()
        await expect(history.locator(".event", has_text="WorkflowExecutionCancelRequested")).to_contain_text(
            "no longer needed"
        )
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


# --- production: people, roles and the audit log -----------------------------------------------------


async def _csrf(context) -> str:
    return next(c["value"] for c in await context.cookies() if c["name"] == "csrftoken")


async def _join_as_reader(browser, running, base: str, owner, email: str, namespace: str):
    """A person invited into the owner's organisation who holds the reader role on `namespace`."""
    headers = {"X-CSRFToken": await _csrf(owner)}
    answer = await owner.request.post(
        base + "/api/v1/invitations/", data={"email": email, "role": "member"}, headers=headers
    )
    assert answer.status == 201, await answer.text()
    token = re.findall(r"invitations/accept/\?token=(\S+)", running.logs["web"].read_text())[-1]
    reader = await browser.new_context(viewport={"width": 1280, "height": 800})
    reader.set_default_timeout(10_000)
    await reader.request.get(base + "/api/v1/auth/csrf/")
    answer = await reader.request.post(
        base + "/api/v1/invitations/accept/",
        data={"token": token, "password": PASSWORD},
        headers={"X-CSRFToken": await _csrf(reader)},
    )
    assert answer.status == 200, await answer.text()
    members = await (await owner.request.get(base + "/api/v1/members/")).json()
    member_id = next(m["id"] for m in members if m["email"] == email)
    namespaces = await (await owner.request.get(base + "/api/v1/namespaces/")).json()
    namespace_id = next(n["id"] for n in namespaces if n["name"] == namespace)
    answer = await owner.request.put(
        f"{base}/api/v1/namespaces/{namespace_id}/access/{member_id}/",
        data={"role": "reader"},
        headers=headers,
    )
    assert answer.status == 200, await answer.text()
    return reader


async def test_terminate_is_audited_readers_cannot_act_and_other_tenants_get_404(production_web, browser):  # noqa: F811
    running, base = production_web
    owner = await signup(browser, running, base, "olga@hooli.example", "hooli")
    reader = await _join_as_reader(browser, running, base, owner, "rita@hooli.example", "orders.hooli")
    stranger = await signup(browser, running, base, "eve@evilcorp.example", "evilcorp")
    client = await Client.connect(running.address, namespace="orders.hooli")
    handle = await client.start_workflow(
        ConsoleOrder.run, {"customer": "Olga"}, id=f"hooli-{uuid.uuid4().hex[:6]}", task_queue="nobody-polls"
    )
    url = run_url(base, handle.id, handle.result_run_id, namespace="orders.hooli")
    run_path = url.removesuffix("/history")

    # A reader sees the run and may read it (stack trace, query), but has no action to take...
    page = await reader.new_page()
    response = await page.goto(url)
    assert response is not None
    assert response.status == 200
    bar = page.get_by_role("group", name="Run actions")
    await expect(bar.get_by_role("button", name="Stack trace")).to_be_visible()
    for name in ("Signal", "Update", "Reset", "Request cancellation", "Terminate"):
        await expect(page.get_by_role("button", name=name, exact=True)).to_have_count(0)
    # ...and a forged post is refused (with its CSRF token: the refusal is the role's).
    token = await _csrf(reader)
    for action, form in [
        ("terminate", {"reason": "forged"}),
        ("cancel", {"reason": "forged"}),
        ("signal", {"name": "x"}),
        ("reset/run", {"point": "last", "reason": "forged"}),
        ("update", {"name": "x"}),
    ]:
        answer = await reader.request.post(
            f"{run_path}/{action}", form=form | {"csrfmiddlewaretoken": token}, headers={"X-CSRFToken": token}
        )
        assert answer.status == 403, (action, answer.status)
    assert (await reader.request.get(f"{run_path}/reset/preview?point=last")).status == 403

    # Another tenant's person: the run's action URLs answer 404, as its page does.
    token = await _csrf(stranger)
    answer = await stranger.request.post(
        f"{run_path}/terminate",
        form={"reason": "x", "csrfmiddlewaretoken": token},
        headers={"X-CSRFToken": token},
    )
    assert answer.status == 404
    assert (await stranger.request.get(f"{run_path}/reset")).status == 404

    # The owner terminates it with a reason: confirmed in a dialog, shown live, in the history.
    page = await owner.new_page()
    watch = PageWatch(page)
    await page.goto(url)
    await page.get_by_role("group", name="Run actions").get_by_role("button", name="Terminate").click()
    dialog = page.locator("#terminate-dialog")
    await expect(dialog.get_by_role("heading", name="Terminate workflow")).to_be_visible()
    reason = "customer <b>asked</b> twice"
    await dialog.get_by_label("Reason").fill(reason)
    await dialog.get_by_role("button", name="Terminate", exact=True).click()
    await expect(page.locator("#run-actions").get_by_role("status")).to_have_text("Terminated.")
    await expect(page.get_by_role("button", name="Terminate", exact=True)).to_have_count(0)
    await expect(page.locator("#run-status")).to_have_text("Terminated")
    await expect(page.locator("#run-outcome")).to_contain_text(f"WorkflowExecutionTerminated: {reason}")
    await expect(page.locator("#history .event").first).to_contain_text("WorkflowExecutionTerminated")
    await expect(page.locator("#history .event").first).to_contain_text(reason)
    assert watch.errors == []
    description = await handle.describe()
    assert description.status is not None
    assert description.status.name == "TERMINATED"

    # The audit log names the person, the interface and the run; the reader's refusals are there too.
    entries = (await (await owner.request.get(base + "/api/v1/audit/?limit=200")).json())["results"]
    target = f"workflow/{handle.id}/{handle.result_run_id}"
    done = [e for e in entries if e["action"] == "TerminateWorkflowExecution" and e["outcome"] == "ok"]
    assert len(done) == 1
    assert done[0]["actor"]["kind"] == "user"
    assert done[0]["actor"]["label"] == "olga@hooli.example"
    assert done[0]["via"] == "console"
    assert done[0]["target"] == target
    assert done[0]["namespace"] == "orders.hooli"
    assert reason not in json.dumps(entries)  # free text stays in the history, out of the log
    denied = {
        e["action"]
        for e in entries
        if e["outcome"] == "denied" and e["actor"]["label"] == "rita@hooli.example"
    }
    assert denied == {
        "TerminateWorkflowExecution",
        "RequestCancelWorkflowExecution",
        "SignalWorkflowExecution",
        "ResetWorkflowExecution",
        "UpdateWorkflowExecution",
    }
    for context in (owner, reader, stranger):
        await context.close()
