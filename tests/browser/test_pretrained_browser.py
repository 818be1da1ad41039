"""Lessons 2, 4, 5 and 7 with ?weights=pretrained in a real browser (Debian's Chromium through Playwright).

Each opens from a link without an exception or a JavaScript error, shows the pretrained view, keeps
`weights=pretrained` in the address bar, and switching the sidebar's Weights control goes back to the
sources' random draw. ATTENTION_LAB_SCREENSHOTS=tests/screenshots saves the README's pictures
(<n>_<slug>_pretrained.jpg).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.app import registry
from tests import support as harness

CHROMIUM = Path(harness.CHROMIUM)
PRETRAINED = [spec for spec in registry.PAGES if spec.pretrained is not None]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed"),
]
playwright_api = pytest.importorskip("playwright.sync_api")


def open_and_wait(page, url: str) -> None:
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector('[data-testid="stSidebar"] [data-testid="stSlider"]', timeout=60_000)
    page.wait_for_selector(harness.IDLE, timeout=60_000)
    page.wait_for_timeout(500)


def test_pretrained_lessons_in_a_real_browser(server: str, browser, tmp_path: Path) -> None:
    shots = Path(os.environ.get("ATTENTION_LAB_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    js_errors: list[str] = []
    page.on("pageerror", lambda error: js_errors.append(str(error)))
    for spec in PRETRAINED:
        open_and_wait(page, f"{server}/{spec.slug}?weights=pretrained")
        assert page.locator('[data-testid="stException"]').count() == 0, spec.slug
        assert page.get_by_text("Pretrained weights.", exact=False).count() >= 1, spec.slug
        assert "weights=pretrained" in page.url, page.url
        assert page.locator('.st-key-weights label[data-selected="true"]').inner_text().strip() == "pretrained"
        # The head's pattern appears once its question is answered (predict, then reveal): answer it first.
        page.locator('[class*="st-key-predict_"] [data-testid="stRadioOption"]').first.click()
        page.wait_for_selector(harness.IDLE, timeout=60_000)
        page.locator('[data-testid="stVegaLiteChart"]').first.wait_for(timeout=60_000)
        page.wait_for_function(
            """() => [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')]
                     .filter(c => c.checkVisibility()).every(c => c.querySelector('svg'))""",
            timeout=60_000,
        )
        # The picture shows the lesson's first chart (its real head's pattern), not only the prose above it.
        page.locator('[data-testid="stVegaLiteChart"]').first.evaluate("c => c.scrollIntoView({block: 'center'})")
        page.wait_for_timeout(300)
        page.screenshot(path=str(shots / f"{spec.number}_{spec.slug}_pretrained.jpg"), type="jpeg", quality=55)
    assert not js_errors, js_errors
    context.close()


def test_switching_the_weights_control_changes_the_lesson_and_the_link(server: str, browser) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    open_and_wait(page, f"{server}/multi_head")
    assert page.get_by_text("Pretrained weights.", exact=False).count() == 0
    page.locator('.st-key-weights [data-testid="stRadioOption"]').filter(has_text="pretrained").click()
    page.wait_for_url("**weights=pretrained**", timeout=30_000)
    page.wait_for_selector(harness.IDLE, timeout=60_000)
    page.get_by_text("Pretrained weights.", exact=False).first.wait_for(timeout=60_000)
    assert page.locator('[data-testid="stException"]').count() == 0
    heads = page.locator('[data-testid="stSidebar"] [data-testid="stSlider"]').filter(has_text="Heads")
    assert heads.get_by_role("slider").is_disabled()  # the model fixes 12 heads per layer
    context.close()
