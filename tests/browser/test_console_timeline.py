"""The run page's timeline, history export and the schedules page in a real browser against `perdura dev`:
a run's activities (one retried), timer and signal are bars, and a signal's bar appears without a reload;
the exported history replays with the SDK's Replayer; a schedule created by the SDK is listed, paused with
a note and triggered."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from datetime import timedelta

import pytest
from playwright.async_api import expect
from temporalio.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleSpec,
    WorkflowHistory,
)
from temporalio.worker import Replayer, Worker

from tests.browser.conftest import PageWatch, screenshot_path
from tests.browser.test_console import run_url
from tests.browser.test_console_live import LIVE_OPEN, assert_not_reloaded, mark_no_reload
from tests.browser.timeline_workflows import ACTIVITIES, WORKFLOWS, ScheduledPing, TimelineOrder
from tests.browser.workflows import ConsoleCharge
from tests.support.reference import TEMPORAL


@pytest.fixture(scope="session")
def timeline_queue() -> str:
    return f"timeline-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
async def timeline_worker(dev_client, timeline_queue):
    async with Worker(
        dev_client, task_queue=timeline_queue, workflows=WORKFLOWS, activities=ACTIVITIES
    ) as worker:
        yield worker


async def _waiting_run(dev_client, queue: str, workflow_id: str):
    """A TimelineOrder run that has reserved, charged (third attempt), slept and now waits for `ship`."""
    handle = await dev_client.start_workflow(TimelineOrder.run, "book", id=workflow_id, task_queue=queue)
    async for event in handle.fetch_history_events(wait_new_event=True):
        if event.HasField("timer_fired_event_attributes"):
            break
    return handle


async def test_the_timeline_shows_bars_and_grows_live_on_a_signal(
    console_dev, dev_client, timeline_worker, timeline_queue, context
):
    _, base = console_dev
    workflow_id = f"timeline-{uuid.uuid4().hex[:6]}"
    handle = await _waiting_run(dev_client, timeline_queue, workflow_id)
    page = await context.new_page()
    watch = PageWatch(page)
    await page.goto(run_url(base, workflow_id, handle.result_run_id))
    await expect(page.locator(LIVE_OPEN)).to_have_count(1)
    timeline = page.locator("#timeline")
    rows = timeline.locator("li.tl-row")
    await expect(rows.locator(".tl-label")).to_have_text(
        ["Workflow: TimelineOrder", "Activity: reserve_stock", "Activity: charge_flaky ×3", "Timer: 1"]
    )
    # Each bar is drawn: the workflow's runs to now, the retried activity shows its earlier attempts.
    await expect(timeline.locator("li.tl-row.kind-workflow.open rect.seg-run")).to_have_count(1)
    charge = timeline.locator("li.tl-row.kind-activity", has_text="charge_flaky")
    await expect(charge.locator("rect.seg-retries")).to_have_count(1)
    await expect(charge.locator("rect.seg-run")).to_have_count(1)
    assert "attempt 3" in (await charge.locator("svg").get_attribute("aria-label"))
    await expect(timeline.locator("li.tl-row.kind-timer.state-fired rect.seg-run")).to_have_count(1)
    await page.locator("#timeline").screenshot(path=str(screenshot_path("run-timeline-waiting")))

    await mark_no_reload(page)
    await handle.signal(TimelineOrder.ship_now)
    await handle.result()
    # The signal's mark and the activity it led to appear, and the run's bar closes, with no reload.
    await expect(rows.locator(".tl-label")).to_have_text(
        [
            "Workflow: TimelineOrder",
            "Activity: reserve_stock",
            "Activity: charge_flaky ×3",
            "Timer: 1",
            "Signal: ship_now",
            "Activity: ship_parcel",
            "Child workflow: ScheduledPing",
        ]
    )
    child = timeline.locator("li.tl-row.kind-child")
    await expect(child).to_have_attribute("data-state", "Completed")
    assert f"/workflows/{workflow_id}-ping/" in await child.locator(".tl-label a").get_attribute("href")
    await expect(timeline.locator("li.tl-row.kind-signal circle.tl-point")).to_have_count(1)
    await expect(timeline.locator("li.tl-row.kind-workflow")).to_have_attribute("data-state", "Completed")
    await expect(timeline.locator("li.open")).to_have_count(0)
    await assert_not_reloaded(page)
    await page.screenshot(path=str(screenshot_path("run-detail-timeline")), full_page=True)
    # A bar's label leads to its events in the history.
    await rows.nth(4).locator(".tl-label a").click()
    await expect(page.locator("#history ol.full > li").first.locator(".etype")).to_have_text(
        "WorkflowExecutionSignaled"
    )
    assert watch.errors == []


async def test_the_exported_history_replays_with_the_sdk(
    console_dev, dev_client, timeline_worker, timeline_queue, context
):
    _, base = console_dev
    workflow_id = f"export-{uuid.uuid4().hex[:6]}"
    handle = await _waiting_run(dev_client, timeline_queue, workflow_id)
    await handle.signal(TimelineOrder.ship_now)
    assert await handle.result() == "shipped book"
    page = await context.new_page()
    watch = PageWatch(page)
    await page.goto(run_url(base, workflow_id, handle.result_run_id))
    async with page.expect_download() as downloading:
        await page.get_by_role("link", name="Export history").click()
    download = await downloading.value
    assert download.suggested_filename == f"{workflow_id}_{handle.result_run_id}_history.json"
    saved = await download.path()
    text = saved.read_text()
    document = json.loads(text)
    # The temporal CLI's history-file reader (1.9 has no `workflow show --input`) parses it as a History.
    read = subprocess.run(
        [str(TEMPORAL), "workflow", "fix-history-json", "--source", str(saved)],
        capture_output=True,
        text=True,
    )
    assert read.returncode == 0, read.stderr
    assert len(json.loads(read.stdout)["events"]) == len(document["events"])
    assert document["events"][0]["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED"
    history = WorkflowHistory.from_json(workflow_id, text)
    result = await Replayer(workflows=[TimelineOrder]).replay_workflow(history)
    assert result.replay_failure is None
    # The replay would fail against different workflow code: the history really is this run's.
    with pytest.raises(Exception):  # noqa: B017, PT011 (the SDK's nondeterminism error)
        await Replayer(workflows=[ScheduledPing]).replay_workflow(history)
    assert watch.errors == []


async def test_schedules_page_lists_an_sdk_schedule_pauses_it_with_a_note_and_triggers_it(
    console_dev, dev_client, timeline_worker, timeline_queue, context
):
    _, base = console_dev
    schedule_id = f"nightly-{uuid.uuid4().hex[:6]}"
    await dev_client.create_schedule(
        schedule_id,
        Schedule(
            action=ScheduleActionStartWorkflow(
                ScheduledPing.run, id=f"{schedule_id}-run", task_queue=timeline_queue
            ),
            spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(hours=6))]),
        ),
    )
    page = await context.new_page()
    watch = PageWatch(page)
    await page.goto(base + "/namespaces/default/workflows")
    await page.get_by_role("link", name="Schedules", exact=True).click()
    row = page.locator("table.schedules tbody tr", has_text=schedule_id)
    await expect(row.locator(".badge")).to_have_text("Running")
    await expect(row).to_contain_text("ScheduledPing")
    await expect(row).to_contain_text("every 6h")
    await page.screenshot(path=str(screenshot_path("schedules-list")), full_page=True)

    await row.get_by_role("link", name=schedule_id).click()
    await expect(page.locator("h1")).to_have_text(schedule_id)
    await expect(page.locator("ol.upcoming li")).not_to_have_count(0)
    # Pause: the button opens the form; its own submit confirms, with the note.
    await page.get_by_text("Pause…").click()
    await page.get_by_label("Why is it paused?").fill("<b>maintenance</b> window")
    await page.get_by_role("button", name="Pause schedule").click()
    await expect(page.locator("#schedule-state")).to_have_text("Paused")
    await expect(page.locator("#schedule-notes")).to_have_text("<b>maintenance</b> window")
    described = await dev_client.get_schedule_handle(schedule_id).describe()
    assert described.schedule.state.paused
    assert described.schedule.state.note == "<b>maintenance</b> window"

    await page.get_by_text("Trigger now…").click()
    await page.get_by_role("button", name="Start a run now").click()
    await expect(page.locator(".notice")).to_have_text("Schedule triggered.")
    recent = page.locator("table.recent tbody tr")
    await expect(recent).to_have_count(1)
    await expect(recent.locator("a")).to_contain_text(f"{schedule_id}-run")
    await page.screenshot(path=str(screenshot_path("schedule-detail")), full_page=True)
    described = await dev_client.get_schedule_handle(schedule_id).describe()
    assert described.info.num_actions == 1

    await page.get_by_text("Unpause…").click()
    await page.get_by_role("button", name="Unpause schedule").click()
    await expect(page.locator("#schedule-state")).to_have_text("Running")
    assert watch.errors == []


async def test_a_pending_retried_activity_is_drawn_to_now_with_its_attempt_and_failure(
    console_dev, dev_client, console_worker, task_queue, context
):
    _, base = console_dev
    workflow_id = f"retrying-{uuid.uuid4().hex[:6]}"
    handle = await dev_client.start_workflow(
        ConsoleCharge.run, "no funds", id=workflow_id, task_queue=task_queue
    )
    try:
        page = await context.new_page()
        watch = PageWatch(page)
        await page.goto(run_url(base, workflow_id, handle.result_run_id))
        await expect(page.locator(LIVE_OPEN)).to_have_count(1)
        row = page.locator("#timeline li.tl-row.kind-activity")
        await expect(row).to_have_class(re.compile(r"\bopen\b"))
        # The attempt counts up live as the retries fail; the bar runs to now, marked there.
        await expect(row.locator(".tl-attempt")).to_have_text(re.compile(r"×([3-9]|\d\d+)"))
        await expect(row.locator("circle.tl-now")).to_have_count(1)
        await expect(row.locator("rect.seg-retries")).to_have_count(1)
        assert "card declined: no funds" in await row.locator("svg").get_attribute("aria-label")
        assert watch.errors == []
    finally:
        await handle.terminate("test over")
