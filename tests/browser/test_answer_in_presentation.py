"""Answering a question in presentation mode keeps the step box readable (a real browser sends an integer
box's value as int_value; the forged-value check dropped it and put a warning on every answered page)."""

from __future__ import annotations

import pytest

from tests import support

playwright_api = pytest.importorskip("playwright.sync_api")


def test_answering_in_presentation_mode_warns_of_nothing(server: str, browser) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 720}, device_scale_factor=1.5)
    page = context.new_page()
    # Step 2 holds the question (step 1 is the lesson's opening paragraph).
    page.goto(f"{server}/trainable_weights?present=1&step=2", wait_until="domcontentloaded")
    page.wait_for_selector(support.IDLE, timeout=60_000)
    support.answer_every_question(page)
    page.wait_for_selector(support.IDLE, timeout=60_000)
    page.wait_for_timeout(1000)
    chosen = page.locator('[role="radiogroup"][aria-label="Your prediction"] [data-selected="true"]')
    assert chosen.count() >= 1  # the question was answered (its option is marked)
    assert page.get_by_text("A control sent a value the app cannot read").count() == 0
    page.get_by_role("button", name="Next →").click()
    page.wait_for_url("**step=3**", timeout=30_000)
    page.wait_for_selector(support.IDLE, timeout=60_000)
    assert page.get_by_text("A control sent a value the app cannot read").count() == 0
    context.close()
