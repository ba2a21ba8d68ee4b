"""Browser fixtures: `perdura dev` with its web port, an SDK worker, and Debian's Chromium under Playwright.

Browsers cannot be downloaded here, so Playwright drives the system's /usr/bin/chromium
(infra/scripts/ensure-services.sh installs it for `make test`). Screenshots go to
`.test-output/browser/` at the repository root (or PERDURA_TEST_OUTPUT).
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.worker import Worker

from tests.browser.workflows import ACTIVITIES, WORKFLOWS
from tests.support import servers

CHROMIUM = os.environ.get("PERDURA_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
OUTPUT = Path(os.environ.get("PERDURA_TEST_OUTPUT") or servers.ROOT / ".test-output") / "browser"


@pytest.fixture(scope="session")
def console_dev(tmp_path_factory: pytest.TempPathFactory):
    """`perdura dev` serving the console on a web port of its own: (server, base URL)."""
    ui_port = servers.free_port()
    with servers.dev_server(tmp_path_factory.mktemp("console"), extra=("--ui-port", str(ui_port))) as running:
        servers.wait_for_port(ui_port, running.processes["dev"], running.logs["dev"])
        yield running, f"http://127.0.0.1:{ui_port}"


@pytest.fixture(scope="session")
def task_queue() -> str:
    return f"console-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
async def dev_client(console_dev) -> Client:
    running, _ = console_dev
    return await Client.connect(running.address, namespace="default")


@pytest.fixture(scope="session")
async def console_worker(dev_client, task_queue):
    async with Worker(
        dev_client, task_queue=task_queue, workflows=WORKFLOWS, activities=ACTIVITIES
    ) as worker:
        yield worker


@pytest.fixture(scope="session")
async def browser():
    from playwright.async_api import async_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make services` installs Chromium (apt-get install chromium)")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        yield launched
        await launched.close()


class PageWatch:
    """What a page reported: console errors (a CSP violation is one) and uncaught exceptions. Pages that
    answer 4xx on purpose (a bad filter is a 400) log a failed load, which is not counted."""

    def __init__(self, page) -> None:
        self.errors: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def _console(self, message) -> None:
        expected = re.match(r"Failed to load resource: .* status of 4\d\d", message.text)
        if message.type == "error" and not expected:
            self.errors.append(message.text)


@pytest.fixture
async def context(browser):
    ctx = await browser.new_context(viewport={"width": 1440, "height": 900})
    ctx.set_default_timeout(10_000)
    yield ctx
    await ctx.close()


def screenshot_path(name: str) -> Path:
    OUTPUT.mkdir(parents=True, exist_ok=True)
    return OUTPUT / f"{name}.png"
