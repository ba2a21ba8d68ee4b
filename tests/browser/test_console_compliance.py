"""The namespace settings page's data protection in a browser, against the production processes
(`perdura api`, Celery, `perdura web` on Postgres): the owner of an organisation erases a data subject
whose runs the official SDK made (one completed, one waiting for a signal), after a confirmation that
counts them; the completed run's page then shows its input and result as erased, the waiting run is
terminated by the erasure, and another subject's run reads as before. Then the owner rotates the
namespace's data key and watches the re-encryption's progress reach done on the page. Screenshots go to
frontend/screenshots/ (and .test-output/)."""

from __future__ import annotations

import json
import re
import secrets
import shutil
import uuid

import pytest
from playwright.async_api import expect
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from temporalio.worker import Worker

from tests.browser.conftest import PageWatch, screenshot_path
from tests.browser.test_console import run_url
from tests.browser.test_console_auth import signup
from tests.browser.workflows import ACTIVITIES, WORKFLOWS, ConsoleOrder
from tests.support import servers

SCREENSHOTS = servers.ROOT / "frontend" / "screenshots"
SUBJECT = SearchAttributeKey.for_keyword("PerduraDataSubject")


def _subject(value: str) -> TypedSearchAttributes:
    return TypedSearchAttributes([SearchAttributePair(SUBJECT, value)])


async def _shot(page, name: str) -> None:  # type: ignore[no-untyped-def]
    await page.screenshot(path=str(screenshot_path(name)), full_page=True)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(screenshot_path(name), SCREENSHOTS / f"{name}.png")


@pytest.fixture(scope="module")
def compliance_web(tmp_path_factory: pytest.TempPathFactory):
    """The production processes with `perdura web`, every process looking for a new data key version
    each second (so a rotation's re-encryption starts 3 s after it): (server, base URL)."""
    with (
        servers.postgres_database() as url,
        servers.production(
            tmp_path_factory.mktemp("compliance-web"), url, env={"PERDURA_DATAKEY_REFRESH_SECONDS": "1"}
        ) as running,
    ):
        running.env["PERDURA_SECRET_KEY"] = secrets.token_urlsafe(40)
        running.env["PERDURA_EMAIL_BACKEND"] = "django.core.mail.backends.console.EmailBackend"
        running.env["PERDURA_WEB_THROTTLE"] = "memory"
        port = servers.free_port()
        proc = running.spawn("web", ["web", "--ip", "127.0.0.1", "--port", str(port), "--workers", "1"])
        servers.wait_for_port(port, proc, running.logs["web"])
        yield running, f"http://127.0.0.1:{port}"


async def test_erase_a_subject_then_rotate_the_key_and_watch_the_reencryption(compliance_web, browser):
    running, base = compliance_web
    org = "hooli"  # short: the screenshots show it in the header
    context = await signup(browser, running, base, f"ann@{org}.example", org)
    context.set_default_timeout(15_000)
    page = await context.new_page()
    await page.set_viewport_size({"width": 1360, "height": 900})
    watch = PageWatch(page)

    namespace = f"orders.{org}"
    client = await Client.connect(running.address, namespace=namespace)
    queue = f"dpo-{uuid.uuid4().hex[:6]}"
    async with Worker(client, task_queue=queue, workflows=WORKFLOWS, activities=ACTIVITIES):
        done = await client.start_workflow(
            ConsoleOrder.run,
            {"customer": "Alice Example", "items": ["alice-secret-item"]},
            id=f"alice-done-{queue}",
            task_queue=queue,
            search_attributes=_subject("alice"),
        )
        await done.result()
        waiting = await client.start_workflow(
            ConsoleOrder.run,
            {"customer": "Alice Example", "signals": 1},
            id=f"alice-waiting-{queue}",
            task_queue=queue,
            search_attributes=_subject("alice"),
        )
        bob = await client.start_workflow(
            ConsoleOrder.run,
            {"customer": "Bob Example"},
            id=f"bob-{queue}",
            task_queue=queue,
            search_attributes=_subject("bob"),
        )
        await bob.result()
        # Until both of alice's runs are listed (the shard worker indexes them after commit).
        for _ in range(100):
            if (await client.count_workflows("PerduraDataSubject = 'alice'")).count == 2:
                break
            await page.wait_for_timeout(100)

        # The run page shows the payloads before the erasure.
        await page.goto(run_url(base, done.id, done.result_run_id, namespace=namespace))
        await expect(page.locator("#input-h + .payload pre")).to_contain_text("Alice Example")

        # Settings → the erasure form → the confirmation, counting alice's runs.
        await page.goto(f"{base}/namespaces/{namespace}/settings")
        await page.get_by_role("textbox", name="Data subject").fill("alice")
        await page.get_by_role("button", name="Review erasure…").click()
        await expect(page.locator("h1")).to_contain_text("Erase a data subject")
        await expect(page.locator("#erase-subject-name")).to_have_text("alice")
        await expect(page.locator("#erase-runs")).to_have_text("2")
        await expect(page.locator("#erase-running")).to_have_text("1")
        await expect(page.locator(".erase-effects")).to_contain_text("archives and exports")
        await expect(page.locator(".erase-effects")).to_contain_text("cannot be undone")
        await _shot(page, "erase-confirm")
        await page.get_by_role("button", name="Erase this data subject").click()
        await expect(page.get_by_role("status")).to_contain_text("1 key destroyed, 1 running run terminated")
        assert "alice" not in page.url

    # The run page shows each of alice's payloads as erased; bob's reads as before.
    await page.goto(run_url(base, done.id, done.result_run_id, namespace=namespace))
    await expect(page.locator("#input-h + .payload .payload-erased")).to_have_text("erased")
    await expect(page.locator("#input-h + .payload")).to_contain_text("binary/x-perdura-erased")
    assert await page.locator("text=Alice Example").count() == 0
    assert await page.locator("text=alice-secret-item").count() == 0
    await _shot(page, "run-erased")
    described = await waiting.describe()
    assert described.status == WorkflowExecutionStatus.TERMINATED
    await page.goto(run_url(base, bob.id, bob.result_run_id, namespace=namespace))
    shown = json.loads(await page.locator("#input-h + .payload pre").inner_text())
    assert shown["customer"] == "Bob Example"

    # The data key: version 1; rotate, then the re-encryption waits for every process, runs, finishes.
    settings = f"{base}/namespaces/{namespace}/settings"
    await page.goto(settings)
    await expect(page.locator("#data-key-version")).to_have_text("1")
    await page.get_by_role("button", name="Rotate data key").click()
    await expect(page.get_by_role("status")).to_contain_text("Data key version 2 now seals new writes")
    await expect(page.locator("#data-key-version")).to_have_text("2")
    await expect(page.locator("#reencryption-state")).to_have_text(re.compile("Waiting|Running|Done"))
    await expect(page.locator("#reencryption-state")).to_have_text("Done", timeout=60_000)
    await expect(page.locator("#reencryption-runs")).to_have_text("3 of 3")
    await expect(page.locator("#reencryption-bar")).to_have_attribute("value", "3")
    await expect(page.get_by_role("button", name="Rotate data key")).to_be_visible()
    await page.locator("#data-key").scroll_into_view_if_needed()
    await _shot(page, "namespace-data-key")
    # Old data reads, through the SDK, after the move.
    assert (await bob.result())["greeting"] == "Hello, Bob Example!"
    assert watch.errors == []
    await context.close()
