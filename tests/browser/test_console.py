"""The web console in a real browser against `perdura dev`: runs started by the official SDK appear in the
list, the filter works and shows the parser's error at its position, a run shows its summary, decoded
input and result and its history (paged, compact and full, raw JSON one click away)."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from urllib.parse import quote

import pytest
from playwright.async_api import expect
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import WorkflowFailureError
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

from tests.browser.conftest import PageWatch, screenshot_path
from tests.browser.workflows import ConsoleCharge, ConsoleOrder


def run_url(base: str, workflow_id: str, run_id: str, namespace: str = "default") -> str:
    return f"{base}/namespaces/{namespace}/workflows/{quote(workflow_id, safe='')}/{run_id}/history"


async def test_sdk_run_in_list_filter_and_query_error(
    console_dev, dev_client, console_worker, task_queue, context
):
    _, base = console_dev
    tag = uuid.uuid4().hex[:6]
    done = await dev_client.execute_workflow(
        ConsoleOrder.run,
        {"customer": "Ada", "items": ["tea", "scones"]},
        id=f"order-{tag}-done",
        task_queue=task_queue,
    )
    assert done["greeting"] == "Hello, Ada!"
    waiting = await dev_client.start_workflow(
        ConsoleOrder.run,
        {"customer": "Grace", "signals": 1},
        id=f"order-{tag}-waiting",
        task_queue=task_queue,
    )

    page = await context.new_page()
    watch = PageWatch(page)
    response = await page.goto(base + "/")
    assert response is not None
    assert response.ok
    assert page.url == f"{base}/namespaces/default/workflows"
    csp = await response.header_value("content-security-policy")
    assert csp is not None
    assert "script-src 'self'" in csp
    assert "unsafe-inline" not in csp
    rows = page.locator("table.runs tbody tr")
    await expect(page.get_by_role("link", name=f"order-{tag}-done", exact=True)).to_be_visible()
    await expect(page.get_by_role("link", name=f"order-{tag}-waiting", exact=True)).to_be_visible()
    await expect(page.locator(".chip.status-running span")).not_to_have_text("0")
    await expect(page.locator(".chip.status-completed span")).not_to_have_text("0")
    await page.screenshot(path=screenshot_path("workflows-list"), full_page=True)
    # At 1440 px, beside the side navigation, a run id and a short workflow id each fit on one line (the
    # saved views used to take a column, and the run id broke over four).
    for cell in (rows.first.locator("td.mono"), rows.first.locator("td.wid a")):
        lines = await cell.evaluate(
            "e => { const r = document.createRange(); r.selectNodeContents(e); return r.getClientRects().length; }"
        )
        assert lines == 1, lines
    # ... and the default columns fit without scrolling the table sideways.
    overflow = await page.locator(".tablewrap").first.evaluate("e => e.scrollWidth - e.clientWidth")
    assert overflow <= 0, f"the list scrolls sideways by {overflow} px at 1440 px"
    await page.set_viewport_size({"width": 390, "height": 844})
    await page.screenshot(path=screenshot_path("workflows-list-phone"))
    await page.set_viewport_size({"width": 1440, "height": 900})

    # A filter typed in the query bar narrows the list to the one run.
    await page.get_by_label("List filter").fill(f'WorkflowId = "order-{tag}-waiting"')
    await page.get_by_label("List filter").press("Enter")
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_contain_text(f"order-{tag}-waiting")
    await expect(rows.first.locator(".badge")).to_have_text("Running")
    await expect(page.locator(".chip.status-running span")).to_have_text("1")
    assert "query=WorkflowId" in page.url

    # A status chip filters by status.
    await page.goto(base + "/namespaces/default/workflows")
    await page.locator(".chip.status-completed").click()
    await expect(page.locator(".chip.status-completed")).to_have_attribute("aria-current", "true")
    await expect(page.get_by_role("link", name=f"order-{tag}-done", exact=True)).to_be_visible()
    await expect(page.get_by_role("link", name=f"order-{tag}-waiting", exact=True)).to_have_count(0)

    # A bad filter shows the parser's message and marks the position it names.
    bad = 'WorkflowType = = "x"'
    await page.get_by_label("List filter").fill(bad)
    await page.get_by_label("List filter").press("Enter")
    error = page.locator("#query-error")
    await expect(error).to_contain_text("syntax error at position 16")
    await expect(error.locator("mark")).to_have_text("=")
    await expect(error.locator(".caret")).to_have_text(bad)
    await expect(page.get_by_label("List filter")).to_have_attribute("aria-invalid", "true")
    await page.screenshot(path=screenshot_path("workflows-query-error"))
    # An unknown attribute is the resolver's error, also shown.
    await page.goto(base + "/namespaces/default/workflows?query=" + quote("NoSuchAttribute = 'x'"))
    await expect(page.locator("#query-error")).to_contain_text("NoSuchAttribute")

    # An example fills the filter.
    await page.get_by_text("Filter examples").click()
    await page.get_by_role("link", name='ExecutionStatus = "Running"').click()
    await expect(page.get_by_label("List filter")).to_have_value('ExecutionStatus = "Running"')
    await expect(page.get_by_role("link", name=f"order-{tag}-waiting", exact=True)).to_be_visible()
    assert watch.errors == []
    await waiting.signal("go")
    await waiting.result()


async def test_run_page_summary_payloads_and_history(
    console_dev, dev_client, console_worker, task_queue, context
):
    _, base = console_dev
    workflow_id = f"checkout/{uuid.uuid4().hex[:6]}"  # a slash in the id, as people use them
    await dev_client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace="default", search_attributes={"CustomerId": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD}
        )
    )
    customer = f"c-{uuid.uuid4().hex[:4]}"
    handle = await dev_client.start_workflow(
        ConsoleOrder.run,
        {"customer": "Ada", "items": ["tea", {"sku": 42, "qty": 2}], "signals": 130},
        id=workflow_id,
        task_queue=task_queue,
        memo={"team": "payments", "ticket": {"id": 7}},
        search_attributes=TypedSearchAttributes(
            [SearchAttributePair(SearchAttributeKey.for_keyword("CustomerId"), customer)]
        ),
    )
    for n in range(130):
        await handle.signal(f"nudge-{n}", n)
    result = await handle.result()
    events = [e async for e in handle.fetch_history_events()]
    assert len(events) > 140

    page = await context.new_page()
    watch = PageWatch(page)
    await page.goto(base + "/namespaces/default/workflows?query=" + quote(f'CustomerId = "{customer}"'))
    await page.get_by_role("link", name=workflow_id, exact=True).click()
    await expect(page).to_have_url(run_url(base, workflow_id, handle.result_run_id).replace("%2F", "/"))
    await expect(page.locator("h1")).to_have_text(workflow_id)
    await expect(page.locator(".run-head .badge")).to_have_text("Completed")
    summary = page.locator("section.summary")
    await expect(summary).to_contain_text("ConsoleOrder")
    await expect(summary).to_contain_text(task_queue)
    await expect(summary).to_contain_text(handle.result_run_id)
    await expect(summary).to_contain_text(f"{len(events)} events")

    # Input and result decoded and pretty-printed.
    input_text = await page.locator("#input-h + .payload pre").inner_text()
    assert json.loads(input_text) == {
        "customer": "Ada",
        "items": ["tea", {"sku": 42, "qty": 2}],
        "signals": 130,
    }
    assert '\n  "customer": "Ada"' in input_text
    result_text = await page.locator("#result-h + .payload pre").inner_text()
    assert json.loads(result_text) == result
    await expect(page.locator("#memo-h + dl")).to_contain_text("payments")
    await expect(page.locator("#sa-h + dl")).to_contain_text("CustomerId")
    await expect(page.locator("#sa-h + dl")).to_contain_text(customer)

    # The full history, newest first, 100 events a page; the close event on top.
    history = page.locator("#history")
    await expect(history.locator("h2 .count")).to_have_text(str(len(events)))
    full = history.locator("ol.full > li")
    await expect(full).to_have_count(100)
    await expect(full.first.locator(".etype")).to_have_text("WorkflowExecutionCompleted")
    await expect(history.locator(".pager")).to_contain_text(
        f"events {len(events) - 99}–{len(events)} of {len(events)}"
    )
    await page.screenshot(path=screenshot_path("run-detail"), full_page=False)
    await page.set_viewport_size({"width": 390, "height": 844})
    await page.screenshot(path=screenshot_path("run-detail-phone"))
    await page.set_viewport_size({"width": 1440, "height": 900})
    await page.evaluate("document.getElementById('history').scrollIntoView()")
    await page.screenshot(path=screenshot_path("run-history"), full_page=False)
    # Next page (htmx: the history alone is replaced and the URL follows).
    await history.get_by_role("link", name="Next ›").click()
    n = len(events)
    await expect(history.locator(".pager")).to_contain_text(f"events {n - 199}–{n - 100} of {n}")
    assert "after=" in page.url
    await history.get_by_role("link", name="Last »").click()
    await expect(history.locator(".pager")).to_contain_text(f"events 1–100 of {n}")
    await expect(full.last.locator(".etype")).to_have_text("WorkflowExecutionStarted")
    # Expand an event, then its raw JSON.
    started = history.locator("#event-1")
    await started.locator("summary").first.click()
    await expect(started.locator(".event-body")).to_contain_text("workflowType")
    await started.get_by_text("Raw JSON").click()
    raw = json.loads(await started.locator("details.raw pre").inner_text())
    assert raw["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED"
    assert raw["workflowExecutionStartedEventAttributes"]["input"]["payloads"][0]["customer"] == "Ada"

    # Compact view: the activity is one row, with its state; signals one row each; no workflow tasks.
    await history.get_by_role("link", name="Compact").click()
    await expect(history.locator("ol.compact")).to_be_visible()
    await expect(history.locator("ol.compact > li").first).to_contain_text("WorkflowExecutionCompleted")
    await history.get_by_role("link", name="Newest first ↓").click()
    await expect(history.get_by_role("link", name="Oldest first ↑")).to_be_visible()
    await expect(history.locator("ol.compact > li").first).to_contain_text("ConsoleOrder")
    activity = history.locator("ol.compact > li", has_text="compose_greeting")
    await expect(activity.locator(".badge.state")).to_have_text("Completed")
    await expect(activity).to_contain_text("3 events")
    await expect(history.locator("ol.compact > li.cat-task")).to_have_count(0)
    await expect(history.locator(".pager")).to_contain_text("page 1 of 2")
    await activity.locator("summary").first.click()
    await page.evaluate("document.getElementById('history').scrollIntoView()")
    await page.screenshot(path=screenshot_path("run-history-compact"), full_page=False)
    assert watch.errors == []


async def test_missing_run_and_namespace_answer_404(console_dev, context):
    _, base = console_dev
    page = await context.new_page()
    response = await page.goto(run_url(base, "nope", "00000000-0000-0000-0000-000000000000"))
    assert response is not None
    assert response.status == 404
    response = await page.goto(base + "/namespaces/no-such-namespace/workflows")
    assert response is not None
    assert response.status == 404


XSS = (
    '<script>window.__xss=(window.__xss||0)+1</script><img src=x onerror="window.__xss=(window.__xss||0)+1">'
)


async def test_stored_xss_is_shown_inert(console_dev, dev_client, console_worker, task_queue, context):
    """Ids, memo values, signal names, failure messages, payloads and saved view names that carry markup
    are shown as text: no injected element exists and no injected script ran (CSP violations would be
    console errors)."""
    _, base = console_dev
    tag = uuid.uuid4().hex[:6]
    failing = await dev_client.start_workflow(
        ConsoleOrder.run,
        {"customer": XSS, "items": [XSS], "signals": 1, "fail": f"rejected {XSS}"},
        id=f"xss-{tag}-{XSS}",
        task_queue=task_queue,
        memo={XSS: XSS, "note": XSS},
    )
    await failing.signal(f"sig-{XSS}", XSS)
    with pytest.raises(WorkflowFailureError):
        await failing.result()
    completing = await dev_client.start_workflow(
        ConsoleOrder.run, {"customer": XSS, "items": [XSS]}, id=f"xss-{tag}-ok-{XSS}", task_queue=task_queue
    )
    await completing.result()

    page = await context.new_page()
    watch = PageWatch(page)

    async def assert_inert() -> None:
        assert await page.evaluate("window.__xss") is None
        assert await page.locator("img[src=x]").count() == 0
        assert await page.locator("script:not([src])").count() == 0

    await page.goto(
        base + "/namespaces/default/workflows?query=" + quote(f'WorkflowId STARTS_WITH "xss-{tag}"')
    )
    await expect(page.locator("table.runs tbody tr")).to_have_count(2)
    await expect(page.get_by_role("link", name=f"xss-{tag}-{XSS}", exact=True)).to_be_visible()
    await assert_inert()
    # A saved view named with markup: listed beside the query bar, in the heading and in its delete
    # button's label, as text.
    await page.get_by_label("Save this view as").fill(f"{XSS} view {tag}")
    await page.get_by_role("button", name="Save view").click()
    views = page.get_by_role("complementary", name="Saved views")
    await expect(views.get_by_role("link", name=f"{XSS} view {tag}")).to_have_attribute(
        "aria-current", "page"
    )
    await expect(page.locator("h1 .view-name")).to_contain_text(f"{XSS} view {tag}")
    await expect(page.locator("table.runs tbody tr")).to_have_count(2)
    await assert_inert()
    await views.get_by_role("button", name=f"Delete saved view {XSS} view {tag}").click()
    await expect(views.get_by_role("link", name=f"{XSS} view {tag}")).to_have_count(0)
    await page.goto(
        base + "/namespaces/default/workflows?query=" + quote(f'WorkflowId STARTS_WITH "xss-{tag}"')
    )

    await page.get_by_role("link", name=f"xss-{tag}-{XSS}", exact=True).click()
    await expect(page.locator(".run-head .badge")).to_have_text("Failed")
    await expect(page.locator("h1")).to_have_text(f"xss-{tag}-{XSS}")
    await expect(page.locator(".failure-message")).to_have_text(f"rejected {XSS}")
    await expect(page.locator("#memo-h + dl")).to_contain_text(XSS)
    assert json.loads(await page.locator("#input-h + .payload pre").inner_text())["customer"] == XSS
    signaled = page.locator("ol.full > li", has_text="WorkflowExecutionSignaled")
    await expect(signaled.locator(".esum")).to_contain_text(f"sig-{XSS}")
    # Open every event and every raw JSON block: their contents render as text too.
    for summary in await page.locator("ol.full details > summary").all():
        await summary.click()
    await expect(page.locator("details.raw[open]").first).to_be_visible()
    await assert_inert()
    await page.get_by_role("link", name="Compact").click()
    await expect(page.locator("ol.compact")).to_be_visible()
    await assert_inert()

    await page.goto(
        base + "/namespaces/default/workflows?query=" + quote(f'WorkflowId STARTS_WITH "xss-{tag}-ok"')
    )
    await page.get_by_role("link", name=f"xss-{tag}-ok-{XSS}", exact=True).click()
    await expect(page.locator(".run-head .badge")).to_have_text("Completed")
    assert json.loads(await page.locator("#result-h + .payload pre").inner_text())["items"] == [XSS]
    await assert_inert()
    assert watch.errors == []
    assert re.search(r"<img|<script", await page.locator("main").inner_text())  # shown, as text


async def test_pending_activity_shows_attempt_and_last_failure(
    console_dev, dev_client, console_worker, task_queue, context
):
    _, base = console_dev
    handle = await dev_client.start_workflow(
        ConsoleCharge.run, XSS, id=f"charge-{uuid.uuid4().hex[:6]}", task_queue=task_queue
    )
    try:
        for _ in range(100):
            described = await handle.describe()
            pending = described.raw_description.pending_activities
            if pending and pending[0].attempt >= 3:
                break
            await asyncio.sleep(0.1)
        else:
            pytest.fail("the activity was not retried")
        page = await context.new_page()
        watch = PageWatch(page)
        await page.goto(run_url(base, handle.id, described.run_id))
        table = page.locator("#pending-h + .tablewrap table")
        row = table.locator("tbody tr")
        await expect(row).to_have_count(1)
        await expect(row).to_contain_text("charge_card")
        attempt = int((await row.locator("td").nth(2).inner_text()).split()[0])
        assert attempt >= 3
        await expect(row.locator(".error")).to_have_text(f"card declined: {XSS}")
        # Retries change no history, only the run's state: the attempt still counts up live.
        await page.evaluate("window.__noReload = 1")
        await expect(row.locator("td").nth(2)).not_to_have_text(str(attempt))
        later = int((await row.locator("td").nth(2).inner_text()).split()[0])
        assert later > attempt
        assert await page.evaluate("window.__noReload") == 1
        assert await page.evaluate("window.__xss") is None
        assert await page.locator("img[src=x]").count() == 0
        assert watch.errors == []
    finally:
        await handle.terminate("test over")


async def test_api_docs_load_nothing_from_other_origins(console_dev, context):
    """The REST API's docs (Swagger UI) come from the web app itself, like the console's files."""
    _, base = console_dev
    page = await context.new_page()
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    await page.goto(base + "/api/docs/")
    await expect(page.get_by_text("Perdura control-plane API").first).to_be_visible()
    await expect(page.locator(".swagger-ui .opblock").first).to_be_visible()
    assert requested
    assert [u for u in requested if not u.startswith(base + "/") and not u.startswith("data:")] == []


async def test_list_pages_stay_stable_while_runs_start(console_dev, dev_client, context):
    """Page two is where page one's token says, and stays there while new runs start (keyset paging)."""
    _, base = console_dev
    queue = f"paging-{uuid.uuid4().hex[:6]}"
    handles = []
    for n in range(55):
        handles.append(await dev_client.start_workflow("Idle", id=f"{queue}-{n:02d}", task_queue=queue))
    page = await context.new_page()
    await page.goto(base + "/namespaces/default/workflows?query=" + quote(f'TaskQueue = "{queue}"'))
    rows = page.locator("table.runs tbody tr")
    await expect(rows).to_have_count(50)
    await expect(rows.first).to_contain_text(f"{queue}-54")
    await expect(page.locator(".pager")).to_contain_text("50 shown of 55")
    for n in range(55, 60):
        handles.append(await dev_client.start_workflow("Idle", id=f"{queue}-{n:02d}", task_queue=queue))
    # Page one is live: the new runs appear on top, and its next link follows what it shows.
    await expect(rows.first).to_contain_text(f"{queue}-59")
    await expect(page.locator(".pager")).to_contain_text("50 shown of 60")
    await page.get_by_role("link", name="Next page »").click()
    await expect(rows).to_have_count(10)
    assert [t.split("\t")[1] for t in await rows.all_inner_texts()] == [
        f"{queue}-{n:02d}" for n in range(9, -1, -1)
    ]
    # Page two stays where its token says while more runs start; its live re-reads keep the token.
    await expect(page.locator("[data-live][data-state=open]")).to_have_count(1)
    for n in range(60, 63):
        handles.append(await dev_client.start_workflow("Idle", id=f"{queue}-{n:02d}", task_queue=queue))
    await expect(page.locator(".pager")).to_contain_text("10 shown of 63")
    assert [t.split("\t")[1] for t in await rows.all_inner_texts()] == [
        f"{queue}-{n:02d}" for n in range(9, -1, -1)
    ]
    await page.get_by_role("link", name="« First page").click()
    await expect(rows.first).to_contain_text(f"{queue}-62")
    await asyncio.gather(*(h.terminate("test over") for h in handles))


async def test_an_older_run_links_to_the_latest(console_dev, dev_client, console_worker, task_queue, context):
    _, base = console_dev
    workflow_id = f"again-{uuid.uuid4().hex[:6]}"
    first = await dev_client.start_workflow(
        ConsoleOrder.run, {"customer": "A"}, id=workflow_id, task_queue=task_queue
    )
    await first.result()
    second = await dev_client.start_workflow(
        ConsoleOrder.run, {"customer": "B"}, id=workflow_id, task_queue=task_queue
    )
    await second.result()
    page = await context.new_page()
    await page.goto(run_url(base, workflow_id, first.result_run_id))
    await page.get_by_role("link", name=second.result_run_id).click()
    await expect(page.locator("section.summary")).to_contain_text(second.result_run_id)
    await expect(page.locator("section.summary")).not_to_contain_text("Latest run")
    assert json.loads(await page.locator("#input-h + .payload pre").inner_text()) == {"customer": "B"}


def test_dev_operator_needs_a_loopback_host_name(console_dev):
    """A site whose name resolves to 127.0.0.1 (DNS rebinding) does not get the dev operator's console:
    only requests naming a loopback host do; others are sent to sign in."""
    import urllib.error
    import urllib.request

    _, base = console_dev

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    port = base.rsplit(":", 1)[1]
    for host, expected in [(f"127.0.0.1:{port}", 200), (f"localhost:{port}", 200), ("rebound.example", 302)]:
        request = urllib.request.Request(base + "/namespaces/default/workflows", headers={"Host": host})
        try:
            status = opener.open(request).status
        except urllib.error.HTTPError as e:
            status = e.code
        assert (host, status) == (host, expected)
