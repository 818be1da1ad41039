"""Lesson 9 in a real browser: a deep link opens the page at its settings, a block-size change redraws
the tile picture and its counts and goes into the link, and a predict question reveals its answer."""

from __future__ import annotations

import re

import pytest

from core.lessons import attention_at_scale as lesson
from tests.support import CHROMIUM_PATH as CHROMIUM
from tests.support import answer_every_question, choose, wait_for_rerun

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed"),
]


def test_attention_at_scale_in_a_real_browser(server: str, browser) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    js_errors: list[str] = []
    page.on("pageerror", lambda error: js_errors.append(str(error)))
    page.goto(f"{server}/attention_at_scale?scale_longest=1024&scale_generated=64", wait_until="domcontentloaded")
    page.wait_for_selector('[data-testid="stSidebar"] [data-testid="stSlider"]', state="attached", timeout=60_000)
    wait_for_rerun(page)
    answer_every_question(page)  # the bill, the charts and the tiles answer the page's questions
    main = page.locator('[data-testid="stMain"]')
    assert page.locator('[data-testid="stException"]').count() == 0
    assert main.get_by_text("64.0 GiB", exact=True).count() == 1  # 131,072² float32 scores, one head
    charts = main.locator('[data-testid="stVegaLiteChart"] svg')
    charts.first.wait_for(timeout=30_000)
    assert charts.count() == 4  # time, memory, tiles, generation

    expected = lesson.tiling_lesson(123, 4, 8, True)
    choose(page, "Query block (rows)", "4")
    assert "scale_block_q=4" in page.url
    # The page's third question (after the doubling and the online softmax) asks about the tiles; new blocks
    # ask it again, and the tile counts answer it, so they appear once it is answered.
    question = main.locator('[role="radiogroup"][aria-label="Your prediction"]').nth(2)
    question.get_by_text(str(expected.skipped), exact=True).click()
    wait_for_rerun(page)
    counts = f"{expected.computed} of {len(expected.tiles)} tiles computed, {expected.skipped} skipped"
    main.get_by_text(re.compile(re.escape(counts))).wait_for(timeout=30_000)
    assert main.get_by_text(re.compile(rf"^Right\. {expected.skipped} of {len(expected.tiles)} are skipped")).count()
    assert page.locator('[data-testid="stException"]').count() == 0
    assert not js_errors, js_errors
    context.close()
