"""Codec server decoding on the run page: payloads a client's PayloadCodec encoded stay encoded on the
server, the browser posts them to the namespace's codec server (the Temporal UI's protocol) and shows
them decoded -- input, result, a failure's details, signal and update arguments in the history -- and
says so plainly when the codec server cannot be reached."""

from __future__ import annotations

import dataclasses
import json
import urllib.request
import uuid
from urllib.parse import quote

from playwright.async_api import expect
from temporalio.client import Client, WorkflowFailureError
from temporalio.converter import DataConverter
from temporalio.worker import Worker

from tests.browser.codec_support import ENCODING, Base64Codec, CodecServer
from tests.browser.codec_workflows import CodecOrder
from tests.browser.conftest import PageWatch, screenshot_path

XSS = "<img src=x onerror=window.__codec_xss=1>"


def _run_url(base: str, namespace: str, workflow_id: str, run_id: str) -> str:
    return f"{base}/namespaces/{namespace}/workflows/{quote(workflow_id, safe='')}/{run_id}/history"


async def test_codec_server_decodes_in_the_browser(console_dev, context):
    running, base = console_dev
    tag = uuid.uuid4().hex[:6]
    namespace = f"codec-{tag}"
    codec = CodecServer()
    running.cli("namespace", "create", namespace)
    running.cli("namespace", "update", namespace, "--codec-server-url", codec.url)
    client = await Client.connect(
        running.address,
        namespace=namespace,
        data_converter=dataclasses.replace(DataConverter.default, payload_codec=Base64Codec()),
    )
    queue = f"codec-{tag}"
    async with Worker(client, task_queue=queue, workflows=[CodecOrder]):
        handle = await client.start_workflow(
            CodecOrder.run, {"total": 42, "card": f"4242 {XSS}"}, id=f"order-{tag}", task_queue=queue
        )
        noted = await handle.execute_update(CodecOrder.note, "gift wrap, please")
        assert noted == "noted 1"
        await handle.signal(CodecOrder.approve, {"by": "Ada Lovelace"})
        result = await handle.result()
        assert result["approved_by"] == "Ada Lovelace"
        rejected = await client.start_workflow(
            CodecOrder.run, {"total": 7}, id=f"order-{tag}-rejected", task_queue=queue
        )
        await rejected.signal(CodecOrder.approve, {"reject": "over the credit limit"})
        try:
            await rejected.result()
        except WorkflowFailureError:
            pass
        else:
            raise AssertionError("the rejected order completed")

    url = _run_url(base, namespace, handle.id, handle.result_run_id or "")
    # What the server sends is the payloads as stored: the codec's encoding, never the values.
    with urllib.request.urlopen(url) as plain:
        html = plain.read().decode()
        csp = plain.headers["Content-Security-Policy"]
    assert ENCODING.decode() in html
    assert "Ada Lovelace" not in html
    assert "gift wrap" not in html
    assert f"connect-src 'self' {codec.url};" in csp
    assert "unsafe-inline" not in csp
    # Only this namespace's run pages may connect to its codec server.
    with urllib.request.urlopen(f"{base}/namespaces/{namespace}/workflows") as listed:
        assert "connect-src 'self';" in listed.headers["Content-Security-Policy"]

    page = await context.new_page()
    watch = PageWatch(page)
    with codec.running():
        await page.goto(url)
        note = page.locator("#codec")
        await expect(note).to_have_attribute("data-state", "decoded")
        await expect(note).to_contain_text(f"decoded by the codec server {codec.url}")
        input_card = page.locator("section[aria-labelledby=input-h]")
        await expect(input_card.locator("pre")).to_contain_text('"total": 42')
        await expect(input_card.locator("pre")).to_contain_text(XSS)  # shown as text, inert
        await expect(input_card.locator(".codec-state")).to_have_text(
            "decoded by the codec server · json/plain"
        )
        await expect(page.locator("#run-outcome pre")).to_contain_text('"approved_by": "Ada Lovelace"')
        history = page.locator("#history [data-codec-state=decoded] pre")
        await expect(history.filter(has_text="Ada Lovelace")).not_to_have_count(0)
        await expect(history.filter(has_text="gift wrap, please")).not_to_have_count(0)
        await expect(history.filter(has_text="noted 1")).not_to_have_count(0)
        await (
            page.locator("#history .event", has=page.locator(".etype", has_text="WorkflowExecutionSignaled"))
            .locator("summary")
            .first.click()
        )
        await page.screenshot(path=screenshot_path("run-codec-decoded"), full_page=True)
        assert await page.evaluate("window.__codec_xss") is None
        assert watch.errors == []
        assert codec.requests, "the codec server was never asked"
        assert {r["namespace"] for r in codec.requests} == {namespace}
        assert {r["origin"] for r in codec.requests} == {base}

        # The failure's details are decoded too.
        await page.goto(_run_url(base, namespace, rejected.id, rejected.result_run_id or ""))
        await expect(page.locator("#codec")).to_have_attribute("data-state", "decoded")
        await expect(page.locator("#run-outcome .failure-message")).to_have_text("order rejected")
        await expect(page.locator("#run-outcome [data-codec-state=decoded] pre")).to_contain_text(
            '"why": "over the credit limit"'
        )

        # A signal that arrives while the page is open is decoded as it appears (live, no reload).
        async with Worker(client, task_queue=queue, workflows=[CodecOrder]):
            waiting = await client.start_workflow(
                CodecOrder.run, {"total": 1}, id=f"order-{tag}-live", task_queue=queue
            )
            await page.goto(_run_url(base, namespace, waiting.id, waiting.result_run_id or ""))
            await expect(page.locator("#codec")).to_have_attribute("data-state", "decoded")
            await expect(page.locator("[data-live][data-state=open]")).to_have_count(1)
            await page.evaluate("window.__sameDocument = true")
            await waiting.signal(CodecOrder.approve, {"by": "Grace Hopper"})
            signaled = page.locator(
                "#history li.event", has=page.locator(".etype", has_text="WorkflowExecutionSignaled")
            )
            await expect(signaled.locator("[data-codec-state=decoded] pre")).to_contain_text("Grace Hopper")
            await expect(page.locator("#run-outcome pre")).to_contain_text('"approved_by": "Grace Hopper"')
            assert await page.evaluate("window.__sameDocument") is True

    # The codec server is gone: the page says so and shows the payloads as stored.
    await page.goto(url)
    note = page.locator("#codec")
    await expect(note).to_have_attribute("data-state", "failed")
    await expect(note).to_contain_text(f"The codec server {codec.url} could not decode")
    input_card = page.locator("section[aria-labelledby=input-h]")
    await expect(input_card.locator(".codec-state")).to_have_text("base64 · codec server unreachable")
    shown = await input_card.locator("pre").text_content()
    assert shown is not None
    assert "total" not in shown
    assert json.loads('"' + shown.strip() + '"')  # base64 text, as stored
    await page.screenshot(path=screenshot_path("run-codec-unreachable"), full_page=True)
