"""Archived runs in the console: `perdura dev` archiving to moto's S3 server with a 2 s retention; once
retention has deleted the runs, the workflows list's Archived tab finds them with the list filter (each
badged "archived"), and an archived run's page opens from its archive, badged "Archived", with its summary,
memo and history, and no action but export, whose file (the signed export, read from the archive)
the SDK replays. Ids and memo values carrying markup stay inert there too."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
import uuid
from urllib.parse import quote

import pytest
from playwright.async_api import expect
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer, Worker

from tests.browser.conftest import PageWatch, screenshot_path
from tests.browser.test_console import XSS
from tests.browser.workflows import ACTIVITIES, WORKFLOWS, ConsoleOrder
from tests.conftest import SERVER_ENV
from tests.support import servers
from tests.support.s3 import moto_s3

BUCKET = "perdura-console-archive"
SCREENSHOTS = servers.ROOT / "frontend" / "screenshots"


@pytest.fixture(scope="module")
def archiving_console(tmp_path_factory: pytest.TempPathFactory):
    """`perdura dev` with its console, its default namespace kept 2 s and archived to moto's S3 server:
    (server, base URL)."""
    with moto_s3() as store:
        store.client().create_bucket(Bucket=BUCKET)
        ui_port = servers.free_port()
        with servers.dev_server(
            tmp_path_factory.mktemp("console-archive"),
            extra=("--ui-port", str(ui_port)),
            env={**SERVER_ENV, **store.env},
        ) as running:
            servers.wait_for_port(ui_port, running.processes["dev"], running.logs["dev"])
            running.cli(
                "namespace",
                "update",
                "default",
                "--retention",
                "2s",
                "--history-archival-state",
                "enabled",
                "--history-uri",
                f"s3://{BUCKET}/history",
                "--visibility-archival-state",
                "enabled",
                "--visibility-uri",
                f"s3://{BUCKET}/visibility",
            )
            yield running, f"http://127.0.0.1:{ui_port}"


def boto3_client(server):  # type: ignore[no-untyped-def]
    """A client of the S3 server the Perdura under test archives to (boto3's standard environment)."""
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=server.env["AWS_ENDPOINT_URL_S3"],
        aws_access_key_id="test",
        aws_secret_access_key="test",
        region_name="us-east-1",
    )


async def _wait_deleted(client: Client, query: str, seconds: float = 30) -> None:
    """Until the live visibility has none of the runs left (retention deleted them after archiving)."""
    deadline = time.monotonic() + seconds
    while (await client.count_workflows(query)).count:
        assert time.monotonic() < deadline, "retention did not delete the runs in time"
        await asyncio.sleep(0.5)


async def test_archived_runs_are_listed_and_open_from_the_archive(archiving_console, context):
    server, base = archiving_console
    client = await Client.connect(server.address, namespace="default")
    tag = uuid.uuid4().hex[:6]
    queue = f"arc-console-{tag}"
    async with Worker(client, task_queue=queue, workflows=WORKFLOWS, activities=ACTIVITIES):
        marked = await client.start_workflow(
            ConsoleOrder.run,
            {"customer": XSS, "items": [XSS]},
            id=f"arc-{tag}-{XSS}",
            task_queue=queue,
            memo={"note": XSS},
        )
        await marked.result()
        plain = await client.start_workflow(
            ConsoleOrder.run, {"customer": "plain"}, id=f"arc-{tag}-plain", task_queue=queue
        )
        await plain.result()
    history = await marked.fetch_history()
    query = f'WorkflowId STARTS_WITH "arc-{tag}"'
    await _wait_deleted(client, query)

    page = await context.new_page()
    watch = PageWatch(page)

    async def assert_inert() -> None:
        assert await page.evaluate("window.__xss") is None
        assert await page.locator("img[src=x]").count() == 0
        assert await page.locator("script:not([src])").count() == 0

    rows = page.locator("table.runs tbody tr")
    await page.goto(base + "/namespaces/default/workflows?query=" + quote(query))
    await expect(page.locator("#tab-live")).to_have_attribute("aria-current", "page")
    await expect(rows.locator("td.empty")).to_have_text(
        "No runs match this filter."
    )  # gone from the hot store

    # The Archived tab keeps the filter and lists the archive index; each row is badged.
    await page.locator("#tab-archived").click()
    await expect(page.locator("#tab-archived")).to_have_attribute("aria-current", "page")
    assert "archived=1" in page.url
    await expect(page.get_by_label("List filter")).to_have_value(query)
    await expect(rows).to_have_count(2)
    await expect(rows.locator(".badge.archived")).to_have_count(2)
    await expect(page.locator("#chips")).to_have_count(0)  # the archive is listed, not counted
    # The same filter language, sent again from the query bar: the archived tab stays selected.
    await page.get_by_label("List filter").fill(f'WorkflowId = "arc-{tag}-plain"')
    await page.get_by_role("button", name="Search").click()
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_contain_text(f"arc-{tag}-plain")
    assert "archived=1" in page.url
    await page.get_by_label("List filter").fill(query)
    await page.get_by_role("button", name="Search").click()
    await expect(rows).to_have_count(2)
    await assert_inert()
    await page.screenshot(path=str(screenshot_path("workflows-archived")), full_page=True)

    # The run page opens from the archive: badged, summarised, its history whole, no actions but export.
    await page.get_by_role("link", name=f"arc-{tag}-{XSS}", exact=True).click()
    await expect(page.locator("#run-archived")).to_have_text("Archived")
    await expect(page.locator("#run-status")).to_have_text("Completed")
    await expect(page.locator("h1")).to_have_text(f"arc-{tag}-{XSS}")
    await expect(page.locator("#run-summary")).to_contain_text("ConsoleOrder")
    await expect(page.locator("#run-summary")).to_contain_text(queue)
    await expect(page.locator("#run-summary")).to_contain_text(f"{len(history.events)} events")
    await expect(page.locator("#memo-h + dl")).to_contain_text(json.dumps(XSS))  # the memo as JSON
    assert json.loads(await page.locator("#input-h + .payload pre").inner_text())["customer"] == XSS
    await expect(page.locator("ol.full > li")).to_have_count(len(history.events))
    await expect(page.locator("#run-actions")).to_have_count(0)
    await expect(page.locator("#run-export")).to_be_visible()
    await assert_inert()
    await page.screenshot(path=str(screenshot_path("run-archived")), full_page=True)
    # Export reads the archive too: the signed document of the whole history, which the SDK replays.
    async with page.expect_download() as downloading:
        await page.locator("#run-export").click()
    text = (await (await downloading.value).path()).read_text()
    document = json.loads(text)
    assert document["run"]["archived"] is True
    assert document["run"]["status"] == "WORKFLOW_EXECUTION_STATUS_COMPLETED"
    assert len(document["events"]) == len(history.events)
    replayed = await Replayer(workflows=[ConsoleOrder]).replay_workflow(
        WorkflowHistory.from_json(marked.id, text)
    )
    assert replayed.replay_failure is None
    await page.get_by_role("link", name="Compact").click()
    await expect(page.locator("ol.compact")).to_be_visible()
    await assert_inert()
    assert watch.errors == []

    # An archive gone from its bucket: the run page says why it cannot be shown (503), it does not fail.
    store = boto3_client(server)
    key = next(
        o["Key"]
        for o in store.list_objects_v2(Bucket=BUCKET, Prefix="history/")["Contents"]
        if o["Key"].endswith(f"/{plain.result_run_id}.history")
    )
    store.delete_object(Bucket=BUCKET, Key=key)
    response = await page.goto(
        f"{base}/namespaces/default/workflows/arc-{tag}-plain/{plain.result_run_id}/history"
    )
    assert response is not None
    assert response.status == 503
    await expect(page.locator("body")).to_contain_text("its archive cannot be read now")
    await expect(page.locator("body")).to_contain_text("is missing")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for name in ("workflows-archived", "run-archived"):
        shutil.copyfile(screenshot_path(name), SCREENSHOTS / f"{name}.png")
