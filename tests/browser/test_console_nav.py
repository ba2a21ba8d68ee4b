"""The console's side navigation in a real browser against `perdura dev`: its button (clicked, or pressed from
the keyboard) collapses it to a rail of icons whose links keep their names, the content widening by what the
nav gives up, and expands it back; the choice holds across a reload, in the page as served (so nothing
flashes); at a phone's width the nav is a strip above the content that never takes its width. Screenshots of
both states go to .test-output/ and frontend/screenshots/."""

from __future__ import annotations

import re
import shutil
import uuid

from playwright.async_api import expect

from tests.browser.conftest import PageWatch, screenshot_path
from tests.browser.workflows import ConsoleOrder
from tests.support import servers

SCREENSHOTS = servers.ROOT / "frontend" / "screenshots"
LINKS = ("Workflows", "Schedules", "Batch operations")
COLLAPSED = re.compile(r"\bnav-collapsed\b")


def _keep(name: str) -> None:
    """Copy a screenshot into frontend/screenshots/."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(screenshot_path(name), SCREENSHOTS / f"{name}.png")


async def _widths(page) -> tuple[float, float]:
    """The side navigation's width and the main content's."""
    nav, main = await page.evaluate(
        "() => [document.querySelector('nav.sidenav'), document.querySelector('main')]"
        ".map(e => e.getBoundingClientRect().width)"
    )
    return nav, main


async def _label_widths(page) -> list[float]:
    return await page.locator("nav.sidenav .navlink .navlabel").evaluate_all(
        "labels => labels.map(l => l.getBoundingClientRect().width)"
    )


async def test_side_nav_collapses_to_a_rail_and_back(
    console_dev, dev_client, console_worker, task_queue, context
):
    _, base = console_dev
    tag = uuid.uuid4().hex[:6]
    for customer in ("Ada", "Grace"):
        await dev_client.execute_workflow(
            ConsoleOrder.run,
            {"customer": customer, "items": ["tea"]},
            id=f"nav-{tag}-{customer.lower()}",
            task_queue=task_queue,
        )
    page = await context.new_page()
    watch = PageWatch(page)
    await page.goto(base + "/namespaces/default/workflows")
    await expect(page.get_by_role("link", name=f"nav-{tag}-ada", exact=True)).to_be_visible()
    html = page.locator("html")
    nav = page.get_by_role("navigation", name="Console")
    toggle = nav.get_by_role("button")  # its only one
    await expect(toggle).to_have_accessible_name("Collapse navigation")
    await expect(toggle).to_have_attribute("aria-expanded", "true")
    await expect(toggle).to_have_attribute("aria-controls", "sidenav")
    assert await page.locator("#sidenav").evaluate("e => e.tagName") == "NAV"
    nav_open, main_open = await _widths(page)
    assert nav_open == 184, nav_open  # as before the rail existed
    assert min(await _label_widths(page)) > 20  # the labels show
    await page.screenshot(path=screenshot_path("console-nav-expanded"), animations="disabled")
    _keep("console-nav-expanded")

    # Collapsed with the button: a rail of icons, and the content takes what the nav gave up.
    await toggle.click()
    await expect(toggle).to_have_attribute("aria-expanded", "false")
    await expect(toggle).to_have_accessible_name("Expand navigation")
    await expect(html).to_have_class(COLLAPSED)
    nav_rail, main_wide = await _widths(page)
    assert nav_rail <= 64, nav_rail
    assert main_wide - main_open >= nav_open - nav_rail - 1, (main_open, main_wide)
    assert max(await _label_widths(page)) <= 1  # hidden, yet each link keeps its name
    for name in LINKS:
        link = nav.get_by_role("link", name=name, exact=True)
        await expect(link).to_be_visible()
        box = await link.bounding_box()
        assert box is not None
        assert box["width"] <= 48, (name, box)
    await expect(nav.get_by_role("link", name="Workflows")).to_have_attribute("aria-current", "page")
    await page.mouse.move(nav_open + 300, 600)
    await page.screenshot(path=screenshot_path("console-nav-collapsed"), animations="disabled")
    _keep("console-nav-collapsed")
    # Hovering or focusing an icon shows its name beside the rail.
    schedules = nav.get_by_role("link", name="Schedules", exact=True)
    await schedules.hover()
    tip = schedules.locator(".navlabel")
    tip_box = await tip.bounding_box()
    assert tip_box is not None
    assert tip_box["width"] > 40, tip_box
    assert tip_box["x"] >= nav_rail, tip_box  # beside the rail, not under it
    await page.screenshot(path=screenshot_path("console-nav-collapsed-hover"), animations="disabled")
    await page.mouse.move(nav_open + 300, 600)

    # The choice holds across a reload, and it is in the page as served: no expanded frame first.
    served = await (await page.request.get(page.url)).text()
    assert '<html lang="en" class="nav-collapsed">' in served
    assert 'aria-expanded="false"' in served
    await page.reload()
    await expect(html).to_have_class(COLLAPSED)
    await expect(toggle).to_have_attribute("aria-expanded", "false")
    await expect(toggle).to_have_accessible_name("Expand navigation")
    assert await _widths(page) == (nav_rail, main_wide)

    # From the keyboard: Tab reaches the button after the namespace switcher; Enter expands, Space
    # collapses, Enter expands again, each as the click did.
    await page.locator("details.switcher summary").focus()
    await page.keyboard.press("Tab")
    await expect(toggle).to_be_focused()
    await page.keyboard.press("Enter")
    await expect(toggle).to_have_attribute("aria-expanded", "true")
    await expect(toggle).to_have_accessible_name("Collapse navigation")
    assert await _widths(page) == (nav_open, main_open)
    await page.keyboard.press("Space")
    await expect(toggle).to_have_attribute("aria-expanded", "false")
    assert await _widths(page) == (nav_rail, main_wide)
    await page.keyboard.press("Enter")
    await expect(toggle).to_have_attribute("aria-expanded", "true")
    await expect(toggle).to_be_focused()
    assert await _widths(page) == (nav_open, main_open)
    await page.reload()
    await expect(html).not_to_have_class(COLLAPSED)
    assert await _widths(page) == (nav_open, main_open)
    assert watch.errors == []


async def test_side_nav_at_phone_width_leaves_the_content_its_width(console_dev, context):
    _, base = console_dev
    page = await context.new_page()
    watch = PageWatch(page)
    await page.goto(base + "/namespaces/default/schedules")
    nav = page.get_by_role("navigation", name="Console")
    toggle = nav.get_by_role("button")
    await expect(toggle).to_have_attribute("aria-expanded", "true")

    # Down to a phone: the nav is a strip of icons above the content, which has the whole width.
    await page.set_viewport_size({"width": 390, "height": 844})
    await expect(toggle).to_have_attribute("aria-expanded", "false")
    await expect(toggle).to_have_accessible_name("Expand navigation")
    nav_box, main_box = await nav.bounding_box(), await page.locator("main").bounding_box()
    assert nav_box is not None
    assert main_box is not None
    assert nav_box["height"] <= 52, nav_box  # one row
    assert nav_box["y"] + nav_box["height"] <= main_box["y"] + 1, (nav_box, main_box)
    assert main_box["x"] == 0
    assert main_box["width"] == 390
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390
    for name in LINKS:
        await expect(nav.get_by_role("link", name=name, exact=True)).to_be_visible()
    assert max(await _label_widths(page)) <= 1
    await page.screenshot(path=screenshot_path("console-nav-phone"), animations="disabled")

    # Opened, the links show their labels; the content stays below at full width.
    await toggle.click()
    await expect(toggle).to_have_attribute("aria-expanded", "true")
    await expect(toggle).to_have_accessible_name("Collapse navigation")
    assert min(await _label_widths(page)) > 20
    nav_box, main_box = await nav.bounding_box(), await page.locator("main").bounding_box()
    assert nav_box is not None
    assert main_box is not None
    assert nav_box["y"] + nav_box["height"] <= main_box["y"] + 1, (nav_box, main_box)
    assert main_box["width"] == 390
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390
    await page.screenshot(path=screenshot_path("console-nav-phone-open"), animations="disabled")
    # Opening it on a phone is not the wide screen's choice: back at 1440 px it is as it was.
    await page.set_viewport_size({"width": 1440, "height": 900})
    await expect(toggle).to_have_attribute("aria-expanded", "true")
    assert await page.evaluate("document.cookie.includes('perdura_nav')") is False
    assert watch.errors == []
