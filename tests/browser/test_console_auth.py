"""Who may see what, in production: `perdura web` (uvicorn, ASGI) on Postgres beside the production
processes. Every page needs a signed-in person; each sees the namespaces their organisation roles reach,
and another tenant's run URL answers 404, like a run that does not exist."""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import uuid

import pytest
from playwright.async_api import expect
from temporalio.client import Client

from tests.browser.conftest import OUTPUT, PageWatch
from tests.browser.test_console import run_url
from tests.browser.test_console_live import latency_figures, signal_latencies
from tests.browser.workflows import ConsoleOrder
from tests.support import servers

PASSWORD = "correct horse battery staple"
SIGNALS_PRODUCTION = 50


@pytest.fixture(scope="module")
def production_web(tmp_path_factory: pytest.TempPathFactory):
    """The production processes with `perdura web`: (server, base URL)."""
    with (
        servers.postgres_database(schema=True) as url,
        servers.production(tmp_path_factory.mktemp("prod-web"), url) as running,
    ):
        running.env["PERDURA_SECRET_KEY"] = secrets.token_urlsafe(40)
        # Sign-up confirmation links are read from the web log, as a person reads them from their mail.
        running.env["PERDURA_EMAIL_BACKEND"] = "django.core.mail.backends.console.EmailBackend"
        # Sign-ups are throttled per address (20 an hour); counted in Redis, every run of this module on
        # the machine's shared test Redis would count against the next. One web process: memory counts.
        running.env["PERDURA_WEB_THROTTLE"] = "memory"
        port = servers.free_port()
        proc = running.spawn("web", ["web", "--ip", "127.0.0.1", "--port", str(port), "--workers", "1"])
        servers.wait_for_port(port, proc, running.logs["web"])
        yield running, f"http://127.0.0.1:{port}"


async def signup(browser, running, base: str, email: str, organization: str):
    """A browser context signed in as a new person who owns a new organisation with one namespace."""
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(10_000)
    request = context.request
    await request.get(base + "/api/v1/auth/csrf/")
    token = next(c["value"] for c in await context.cookies() if c["name"] == "csrftoken")
    headers = {"X-CSRFToken": token}
    answer = await request.post(
        base + "/api/v1/auth/signup/",
        data={"email": email, "password": PASSWORD, "organization": organization},
        headers=headers,
    )
    assert answer.status == 202, await answer.text()
    link = re.findall(r"signup/confirm/\?token=(\S+)", running.logs["web"].read_text())[-1]
    answer = await request.post(base + "/api/v1/auth/signup/confirm/", data={"token": link}, headers=headers)
    assert answer.status in (200, 201), await answer.text()
    token = next(c["value"] for c in await context.cookies() if c["name"] == "csrftoken")  # rotated at login
    answer = await request.post(
        base + "/api/v1/namespaces/", data={"name": "orders"}, headers={"X-CSRFToken": token}
    )
    assert answer.status == 201, await answer.text()
    return context


async def test_other_tenants_run_answers_404(production_web, browser):
    running, base = production_web
    ann = await signup(browser, running, base, "ann@acme.example", "acme")
    bob = await signup(browser, running, base, "bob@globex.example", "globex")
    client = await Client.connect(running.address, namespace="orders.globex")
    handle = await client.start_workflow(
        ConsoleOrder.run, {"customer": "Bob"}, id=f"globex-{uuid.uuid4().hex[:6]}", task_queue="nobody-polls"
    )
    url = run_url(base, handle.id, handle.result_run_id, namespace="orders.globex")

    # Bob, in globex, sees the run (the positive control: the URL is right).
    page = await bob.new_page()
    watch = PageWatch(page)
    response = await page.goto(url)
    assert response is not None
    assert response.status == 200
    await expect(page.locator("h1")).to_have_text(handle.id)
    await page.goto(base + "/")
    assert page.url == f"{base}/namespaces/orders.globex/workflows"
    await expect(page.locator(".switcher li")).to_have_text(["orders.globex"])
    assert watch.errors == []

    # Ann, in acme, gets 404 for globex's run and namespace, as for a run that does not exist.
    page = await ann.new_page()
    response = await page.goto(url)
    assert response is not None
    assert response.status == 404
    assert handle.id not in await page.content()
    response = await page.goto(base + "/namespaces/orders.globex/workflows")
    assert response is not None
    assert response.status == 404
    response = await page.goto(run_url(base, handle.id, handle.result_run_id, namespace="orders.acme"))
    assert response is not None
    assert response.status == 404
    # Neither the operator's `default` namespace: the loopback operator is a `perdura dev` allowance.
    response = await page.goto(base + "/namespaces/default/workflows")
    assert response is not None
    assert response.status == 404
    response = await page.goto(base + "/")
    assert page.url == f"{base}/namespaces/orders.acme/workflows"
    await expect(page.locator(".switcher li")).to_have_text(["orders.acme"])

    # Nobody signed in: every page sends the browser to sign in; a wrong password is refused; the
    # right one lands on the page asked for. A login post without its CSRF token is refused.
    anonymous = await browser.new_context()
    page = await anonymous.new_page()
    await page.goto(url)
    assert page.url.startswith(f"{base}/login/?next=")
    await page.get_by_label("Email").fill("ann@acme.example")
    await page.get_by_label("Password").fill("wrong password!")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("alert")).to_have_text("Wrong email or password.")
    await page.get_by_label("Password").fill(PASSWORD)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.locator("h1")).to_have_text("Not Found")
    assert page.url == url
    forged = await anonymous.request.post(
        base + "/login/", form={"email": "ann@acme.example", "password": PASSWORD}
    )
    assert forged.status == 403
    # Signing out ends the session.
    await page.goto(base + "/")
    await page.get_by_role("button", name="Sign out").click()
    assert "/login/" in page.url
    for context in (ann, bob, anonymous):
        await context.close()


SOCKET_OUTCOME = """(path) => new Promise((resolve) => {
  const socket = new WebSocket("ws://" + location.host + path);
  socket.onopen = () => { socket.close(); resolve("open"); };
  socket.onclose = () => resolve("refused");
})"""


async def test_live_updates_travel_from_api_to_web_through_redis(production_web, browser):
    """`perdura api` commits the signal; the hint reaches `perdura web`'s socket through the Redis channel
    layer and the open page shows the event, with no reload. Sockets obey the pages' rules: another
    tenant's run and namespace are refused, and so is everything once the person signs out."""
    running, base = production_web
    cy = await signup(browser, running, base, "cy@initech.example", "initech")
    dee = await signup(browser, running, base, "dee@umbrella.example", "umbrella")
    client = await Client.connect(running.address, namespace="orders.initech")
    workflow_id = f"initech-{uuid.uuid4().hex[:6]}"
    handle = await client.start_workflow(
        ConsoleOrder.run, {"customer": "Cy"}, id=workflow_id, task_queue="nobody-polls"
    )
    url = run_url(base, workflow_id, handle.result_run_id, namespace="orders.initech")
    live_path = "/live" + url.removeprefix(base)

    page = await cy.new_page()
    watch = PageWatch(page)
    await page.add_init_script(
        "window.__renders = 0; document.addEventListener('perdura:live', () => { window.__renders++; });"
    )
    # The list: it tells the namespace's version it shows; nothing changed since, so nothing is re-read
    # or sent; then a run started through `perdura api` appears.
    await page.goto(base + "/namespaces/orders.initech/workflows")
    await expect(page.locator("[data-live][data-state=open]")).to_have_count(1)
    await asyncio.sleep(1)
    assert await page.evaluate("window.__renders") == 0
    await expect(page.locator("table.runs tbody tr")).to_have_count(1)
    second = await client.start_workflow(
        ConsoleOrder.run, {"customer": "Cy"}, id=f"{workflow_id}-2", task_queue="nobody-polls"
    )
    await expect(page.get_by_role("link", name=second.id, exact=True)).to_be_visible()
    # The run page, likewise: the run has not changed since the page read it.
    await page.goto(url)
    await expect(page.locator("[data-live][data-state=open]")).to_have_count(1)
    await asyncio.sleep(1)
    assert await page.evaluate("window.__renders") == 0
    await page.evaluate("window.__noReload = 1")
    history = page.locator("#history")
    await expect(history.locator("h2 .count")).to_have_text("2")
    latencies = await signal_latencies(page, handle, prefix="prod", count=SIGNALS_PRODUCTION)
    await expect(history.locator("h2 .count")).to_have_text(str(2 + SIGNALS_PRODUCTION))
    assert await page.evaluate("window.__renders") >= SIGNALS_PRODUCTION
    assert await page.evaluate("window.__noReload") == 1
    assert watch.errors == []
    figures = latency_figures(latencies, mode="production: perdura api -> Redis channel layer -> perdura web")
    OUTPUT.mkdir(parents=True, exist_ok=True)
    (OUTPUT / "live-latency-production.json").write_text(json.dumps(figures, indent=2))
    print("live latency, signal RPC return -> DOM:", figures)
    assert figures["p99_ms"] < 1500, figures

    # Another tenant's run and namespace: refused, as their pages answer 404.
    other = await dee.new_page()
    await other.goto(base + "/namespaces/orders.umbrella/workflows")
    assert await other.evaluate(SOCKET_OUTCOME, live_path) == "refused"
    assert await other.evaluate(SOCKET_OUTCOME, "/live/namespaces/orders.initech/workflows") == "refused"
    assert await other.evaluate(SOCKET_OUTCOME, "/live/namespaces/orders.umbrella/workflows") == "open"
    # Signed out: the open page stops getting updates (its socket is closed at the next render and
    # refused on reconnect), as its pages send the browser to sign in.
    assert await page.evaluate(SOCKET_OUTCOME, live_path) == "open"
    await cy.request.post(
        base + "/logout/",
        headers={"X-CSRFToken": next(c["value"] for c in await cy.cookies() if c["name"] == "csrftoken")},
    )
    assert await page.evaluate(SOCKET_OUTCOME, live_path) == "refused"
    await handle.signal("after-logout")
    await expect(page.locator("[data-live]")).to_have_attribute("data-state", "closed")
    assert await history.locator("ol.full > li", has_text="after-logout").count() == 0
    for context in (cy, dee):
        await context.close()
