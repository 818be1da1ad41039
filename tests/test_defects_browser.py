"""What a teacher met in Chromium (issue 19): presentation links, shared heads, charts on a projector and a phone.

One server and one Chromium for the module (tests/conftest.py); each test opens its own contexts.
"""

from __future__ import annotations

import pytest

from tests.test_browser import CHROMIUM, wait_for_rerun

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed"),
]
playwright_api = pytest.importorskip("playwright.sync_api")

PROJECTOR = {"viewport": {"width": 1280, "height": 720}, "device_scale_factor": 1.5}
PHONE = {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 3, "is_mobile": True, "has_touch": True}


def visit(context, url: str):  # noqa: ANN201 - a Playwright page
    page = context.new_page()
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector("h1", timeout=60_000)
    wait_for_rerun(page)
    return page


def shown(page, text: str) -> bool:
    found = page.get_by_text(text, exact=False).first
    return found.count() > 0 and found.is_visible()


# ------------------------------------------------------------------ item 1: presentation links
def test_a_present_1_link_stays_a_presentation_link_after_next(server: str, browser) -> None:
    teacher_context = browser.new_context(**PROJECTOR)
    teacher = visit(teacher_context, f"{server}/causal_dropout?present=1")
    assert "present=true" in teacher.url, teacher.url  # the toggle's own spelling: it keeps it in the link
    for step in (2, 3):
        teacher.get_by_role("button", name="Next →").click()
        teacher.wait_for_url(f"**step={step}**", timeout=30_000)
        wait_for_rerun(teacher)
    assert "present=true" in teacher.url and "step=3" in teacher.url, teacher.url
    teacher.get_by_text("Two ways to mask").first.wait_for(state="hidden", timeout=30_000)
    assert shown(teacher, "Inputs and targets")

    student_context = browser.new_context(**PHONE)
    student = visit(student_context, teacher.url)
    student.get_by_text("Inputs and targets").first.wait_for(state="visible", timeout=30_000)
    # One step, not the whole lesson (the step's style lands just after the page's first paint).
    student.get_by_text("Two ways to mask").first.wait_for(state="hidden", timeout=30_000)
    assert "present=true" in student.url and "step=3" in student.url, student.url
    assert student.locator('[data-testid="stException"]').count() == 0
    teacher_context.close()
    student_context.close()


# ------------------------------------------------------------------ item 2: a shared real-model head
def test_a_shared_head_is_outlined_in_the_grid_on_first_paint(server: str, browser) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 2400})
    page = visit(context, f"{server}/real_model?real_layer=3&real_head=5")
    grid = page.locator('[data-testid="stVegaLiteChart"]').filter(has_text="click one to open it")
    outline = grid.locator('path[stroke="#e45756"]')
    outline.first.wait_for(state="attached", timeout=120_000)  # the model loads once per server
    head_box = page.locator('[data-testid="stSelectbox"]').filter(has_text="Head").locator("input").first
    layer_box = page.locator('[data-testid="stSelectbox"]').filter(has_text="Layer").locator("input").first
    assert (layer_box.input_value(), head_box.input_value()) == ("3", "5")
    assert outline.count() == 1
    box = outline.first.bounding_box()
    cell = grid.locator('path[aria-label*="layer: 3; head: 5;"]').first.bounding_box()
    centre_x, centre_y = cell["x"] + cell["width"] / 2, cell["y"] + cell["height"] / 2
    assert box["x"] <= centre_x <= box["x"] + box["width"] and box["y"] <= centre_y <= box["y"] + box["height"]
    context.close()

