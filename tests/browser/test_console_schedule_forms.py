"""A schedule created and then edited in the console: cron spec, workflow type, task queue, JSON input
and overlap policy, each change with a reason and a ticked confirmation, audited with the person; the
SDK describes what the forms set, and the schedule starts the workflow with its input."""

from __future__ import annotations

import sqlite3
import uuid
from datetime import timedelta

import pytest
from playwright.async_api import expect
from temporalio.client import ScheduleOverlapPolicy
from temporalio.service import RPCError

from tests.browser.conftest import PageWatch, screenshot_path


def _audit(db_file, target: str) -> list[tuple[str, str, str, str]]:
    with sqlite3.connect(db_file) as db:
        return db.execute(
            "SELECT action, outcome, actor_kind || ':' || actor_id, via FROM tenants_auditevent"
            " WHERE target = ? ORDER BY id",
            (target,),
        ).fetchall()


async def test_create_and_edit_a_schedule(console_dev, dev_client, console_worker, task_queue, context):
    running, base = console_dev
    schedule_id = f"weekday-{uuid.uuid4().hex[:6]}"
    page = await context.new_page()
    watch = PageWatch(page)
    await page.goto(base + "/namespaces/default/schedules")
    await page.get_by_role("link", name="Create schedule…").click()
    await page.get_by_label("Schedule ID", exact=True).fill(schedule_id)
    await page.get_by_label("On a cron expression").check()
    await page.get_by_role("textbox", name="Cron expression").fill("61 9 * * Mon-Fri")  # no 61st minute
    await page.get_by_label("Workflow type").fill("ConsoleOrder")
    await page.get_by_label("Task queue").fill(task_queue)
    await page.get_by_label("Input").fill('{"customer": "<b>Sched</b>"}')
    await page.get_by_label("If the previous run is still going").select_option(label="Buffer One")
    await page.get_by_label("Reason").fill("weekday orders digest")
    await page.get_by_label("Create this schedule").check()
    await page.get_by_role("button", name="Create schedule").click()
    # The spec's own rules refuse it, and the form keeps what was typed.
    await expect(page.locator("#schedule-problem")).to_contain_text("Invalid schedule spec")
    await expect(page.get_by_label("Schedule ID", exact=True)).to_have_value(schedule_id)
    await expect(page.get_by_label("Input")).to_have_value('{"customer": "<b>Sched</b>"}')
    await page.get_by_role("textbox", name="Cron expression").fill("30 9 * * Mon-Fri")
    await page.get_by_label("Create this schedule").check()
    await page.screenshot(path=screenshot_path("schedule-create"), full_page=True)
    await page.get_by_role("button", name="Create schedule").click()

    await expect(page.locator(".notice")).to_have_text("Schedule created.")
    await expect(page.locator("h1")).to_have_text(schedule_id)
    await expect(page.locator("section[aria-labelledby=spec-h]")).to_contain_text("0 30 9 1-31 1-12 Mon-Fri")
    handle = dev_client.get_schedule_handle(schedule_id)
    described = await handle.describe()
    action = described.schedule.action
    assert action.workflow == "ConsoleOrder"  # type: ignore[union-attr]
    assert action.task_queue == task_queue  # type: ignore[union-attr]
    assert action.id == schedule_id  # type: ignore[union-attr]
    assert described.schedule.policy.overlap == ScheduleOverlapPolicy.BUFFER_ONE
    assert _audit(running.db_file, f"schedule/{schedule_id}") == [
        ("CreateSchedule", "failed", "operator:loopback", "console"),
        ("CreateSchedule", "ok", "operator:loopback", "console"),
    ]

    # Edit: an interval instead of the cron, another queue's worth of settings, a new input.
    await page.get_by_role("link", name="Edit…").click()
    await expect(page.get_by_label("Keep the current times")).to_be_checked()
    await expect(page.get_by_role("textbox", name="Cron expression")).to_have_value("30 9 * * Mon-Fri")
    await expect(page.get_by_label("Input")).to_have_value('{\n  "customer": "<b>Sched</b>"\n}')
    await page.get_by_label("Every interval").check()
    await page.get_by_role("textbox", name="Interval").fill("1h30m")
    await page.get_by_label("Workflow ID").fill(f"{schedule_id}-run")
    await page.get_by_label("Input").fill('{"customer": "Edited"}')
    await page.get_by_label("If the previous run is still going").select_option(label="Allow All")
    await page.get_by_label("Reason").fill("every 90 minutes now")
    await page.get_by_label("Replace this schedule").check()
    await page.get_by_role("button", name="Save schedule").click()
    await expect(page.locator(".notice")).to_have_text("Schedule updated.")
    await expect(page.locator("section[aria-labelledby=spec-h]")).to_contain_text("every 1h 30m")
    described = await handle.describe()
    assert described.schedule.spec.intervals[0].every == timedelta(minutes=90)
    assert not described.schedule.spec.calendars
    assert described.schedule.policy.overlap == ScheduleOverlapPolicy.ALLOW_ALL

    # A form opened before another change is refused rather than overwriting it.
    await page.get_by_role("link", name="Edit…").click()
    await handle.pause(note="paused elsewhere")
    await page.get_by_label("Reason").fill("late edit")
    await page.get_by_label("Replace this schedule").check()
    await page.get_by_role("button", name="Save schedule").click()
    await expect(page.locator("#schedule-problem")).to_contain_text(
        "the schedule changed since this form was opened"
    )
    await handle.unpause()

    # The edited action runs: triggered, it starts ConsoleOrder with the new input, which completes.
    await page.goto(f"{base}/namespaces/default/schedules/{schedule_id}")
    await page.get_by_text("Trigger now…").click()
    await page.get_by_role("button", name="Start a run now").click()
    await expect(page.locator(".notice")).to_have_text("Schedule triggered.")
    recent = page.locator("table.recent tbody tr a")
    await expect(recent).to_have_count(1)
    await expect(recent).to_contain_text(f"{schedule_id}-run")
    run_id = (await handle.describe()).info.recent_actions[0].action.workflow_id  # type: ignore[attr-defined]
    result = await dev_client.get_workflow_handle(run_id).result()
    assert result["greeting"] == "Hello, Edited!"
    await page.screenshot(path=screenshot_path("schedule-edited"), full_page=True)
    # (The SDK's pause and unpause are audited too, via the gRPC API.)
    assert [(a[0], a[1], a[3]) for a in _audit(running.db_file, f"schedule/{schedule_id}")][2:] == [
        ("UpdateSchedule", "ok", "console"),
        ("PatchSchedule", "ok", "grpc"),
        ("UpdateSchedule", "failed", "console"),
        ("PatchSchedule", "ok", "grpc"),
        ("PatchSchedule", "ok", "console"),
    ]

    # Delete, with a reason and the confirmation: gone from the list, audited with the reason.
    await page.get_by_text("Delete…").click()
    await page.get_by_label("Reason (written to the audit log)").fill("digest retired")
    await page.get_by_label(f"Delete {schedule_id}").check()
    await page.get_by_role("button", name="Delete schedule").click()
    await expect(page.locator(".notice")).to_contain_text(f"Schedule {schedule_id} deleted.")
    await expect(page.locator("table.schedules tbody tr", has_text=schedule_id)).to_have_count(0)
    with pytest.raises(RPCError):
        await handle.describe()
    assert _audit(running.db_file, f"schedule/{schedule_id}")[-1] == (
        "DeleteSchedule",
        "ok",
        "operator:loopback",
        "console",
    )
    assert watch.errors == []
