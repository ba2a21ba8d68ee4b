"""The workflows list's time range, picked columns (custom search attributes included, remembered for the
person) and saved views (stored server-side, listed beside the query bar, names shown inert)."""

from __future__ import annotations

import uuid

import grpc
from playwright.async_api import expect
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError

from tests.browser.conftest import PageWatch, screenshot_path
from tests.browser.workflows import ConsoleOrder

REGION = SearchAttributeKey.for_keyword("ListRegion")
XSS_NAME = "<img src=x onerror=window.__view_xss=1> EU orders"


async def test_time_range_columns_and_saved_views(
    console_dev, dev_client, console_worker, task_queue, context
):
    _, base = console_dev
    tag = uuid.uuid4().hex[:6]
    try:
        await dev_client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace="default",
                search_attributes={"ListRegion": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD},
            )
        )
    except RPCError as e:
        if e.grpc_status.code != grpc.StatusCode.ALREADY_EXISTS.value[0]:  # type: ignore[attr-defined]
            raise
    for n, region in enumerate(["eu", "eu", "us"]):
        await dev_client.execute_workflow(
            ConsoleOrder.run,
            {"customer": f"c{n}"},
            id=f"list-{tag}-{n}",
            task_queue=task_queue,
            search_attributes=TypedSearchAttributes([SearchAttributePair(REGION, region)]),
        )
    page = await context.new_page()
    watch = PageWatch(page)
    rows = page.locator("table.runs tbody tr")
    await page.goto(base + "/namespaces/default/workflows")

    # A time range composes with the filter: the last hour holds the three runs, a day in 2020 none.
    await page.get_by_label("List filter").fill(f'WorkflowId STARTS_WITH "list-{tag}-"')
    await page.get_by_label("Time range").select_option("1h")
    await page.get_by_role("button", name="Search").click()
    await expect(rows).to_have_count(3)
    await expect(page.locator(".effective-query code")).to_contain_text(
        f'(WorkflowId STARTS_WITH "list-{tag}-") AND StartTime >= "'
    )
    assert "range=1h" in page.url
    await page.get_by_label("Time range").select_option("custom")
    await page.get_by_label("From (UTC)").fill("2020-01-01T00:00")
    await page.get_by_label("To (UTC)").fill("2020-01-02T00:00")
    await page.get_by_label("by", exact=True).select_option("CloseTime")
    await page.get_by_role("button", name="Search").click()
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_contain_text("No runs match this filter.")
    await expect(page.locator(".effective-query code")).to_contain_text(
        'CloseTime BETWEEN "2020-01-01T00:00:00Z" AND "2020-01-02T00:00:00Z"'
    )
    await page.get_by_label("Time range").select_option("1h")
    await page.get_by_role("button", name="Search").click()
    await expect(rows).to_have_count(3)

    # Columns: Run ID off, the custom attribute on; remembered for this person on a fresh page.
    await page.locator("#columns-picker summary").click()
    await page.get_by_label("Run ID").uncheck()
    await page.get_by_label("ListRegion").check()
    await page.get_by_role("button", name="Apply columns").click()
    headers = page.locator("table.runs thead th")
    await expect(headers.filter(has_text="ListRegion")).to_have_count(1)
    await expect(headers.filter(has_text="Run ID")).to_have_count(0)
    await expect(rows).to_have_count(3)  # back on the same filtered list
    await expect(page.locator("table.runs tbody td", has_text="us")).to_have_count(1)
    fresh = await context.new_page()
    await fresh.goto(base + "/namespaces/default/workflows")
    await expect(fresh.locator("table.runs thead th").filter(has_text="ListRegion")).to_have_count(1)
    await fresh.close()

    # A saved view keeps the filter, the range and the columns; its name is shown as text.
    await page.get_by_label("List filter").fill(f'WorkflowId STARTS_WITH "list-{tag}-" AND ListRegion = "eu"')
    await page.get_by_role("button", name="Search").click()
    await expect(rows).to_have_count(2)
    await page.get_by_label("Save this view as").fill(XSS_NAME)
    await page.get_by_label("Save this view as").press("Enter")
    views = page.get_by_role("complementary", name="Saved views")
    link = views.get_by_role("link", name=XSS_NAME)
    await expect(link).to_have_attribute("aria-current", "page")
    assert "view=" in page.url
    await expect(rows).to_have_count(2)
    await page.screenshot(path=screenshot_path("workflows-saved-view"), full_page=True)

    await views.get_by_role("link", name="All workflows").click()
    await expect(page.get_by_label("List filter")).to_have_value("")
    await link.focus()
    await page.keyboard.press("Enter")
    await expect(page.get_by_label("List filter")).to_have_value(
        f'WorkflowId STARTS_WITH "list-{tag}-" AND ListRegion = "eu"'
    )
    await expect(page.get_by_label("Time range")).to_have_value("1h")
    await expect(rows).to_have_count(2)
    await expect(page.locator("table.runs thead th").filter(has_text="ListRegion")).to_have_count(1)
    assert await page.evaluate("window.__view_xss") is None

    # A view without a name is refused with the form's message; deleting the view removes it.
    await page.get_by_label("Save this view as").fill("   ")
    await page.get_by_role("button", name="Save view").click()
    await expect(page.locator("#view-error")).to_have_text("a saved view needs a name")
    await page.goto(base + "/namespaces/default/workflows")
    await views.get_by_role("button", name=f"Delete saved view {XSS_NAME}").click()
    await expect(views.get_by_role("link", name=XSS_NAME)).to_have_count(0)
    assert await page.evaluate("window.__view_xss") is None
    # The operator's columns back to the default, for the other tests of this session's server.
    await page.locator("#columns-picker summary").click()
    await page.get_by_label("Run ID").check()
    await page.get_by_label("ListRegion").uncheck()
    await page.get_by_role("button", name="Apply columns").click()
    await expect(page.locator("table.runs thead th").filter(has_text="Run ID")).to_have_count(1)
    assert watch.errors == []
