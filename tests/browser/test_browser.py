"""A real browser: Debian's Chromium driven by Playwright against `streamlit run` on loopback.

Opens every page, moves a sidebar slider, and checks that no exception element and no
JavaScript error appears; saves a screenshot of each page (JPEG, small). Set
ATTENTION_LAB_SCREENSHOTS=tests/screenshots to refresh the README's pictures.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlencode

import pytest

from core.app import registry
from tests import support
from tests.support import answer_every_question, wait_for_rerun

CHROMIUM = Path(support.CHROMIUM)
PAGES = support.PAGE_URLS

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed"),
]
playwright_api = pytest.importorskip("playwright.sync_api")


def d_out_slider(page):
    container = page.locator('[data-testid="stSidebar"] [data-testid="stSlider"]').filter(has_text="d_out")
    return container.get_by_role("slider")


def test_every_page_in_a_real_browser(server: str, browser, tmp_path: Path) -> None:
    shots = Path(os.environ.get("ATTENTION_LAB_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    js_errors: list[str] = []
    page.on("pageerror", lambda error: js_errors.append(str(error)))
    # Twice round: a fresh server serves the first deep link in legacy pages/ mode (see
    # ui/frame.py `frame`), every later one through st.navigation; both must work.
    numbered = [(spec.number, spec.slug) for spec in registry.PAGES]  # screenshots named as the lessons
    for index, name in [*numbered, *numbered]:
        page.goto(f"{server}/{name}", wait_until="domcontentloaded")
        page.wait_for_selector("h1", timeout=60_000)
        # A fresh server's first deep link runs once without the frame, then again with it
        # (ui/frame.py `frame`): the sidebar's sliders mark the second run.
        page.wait_for_selector('[data-testid="stSidebar"] [data-testid="stSlider"]', timeout=60_000)
        wait_for_rerun(page)
        assert page.locator('[data-testid="stException"]').count() == 0, name
        assert page.locator('[role="dialog"]').count() == 0, name  # e.g. "Page not found"
        assert page.locator('[data-testid="stSidebar"] [data-testid="stSlider"]').count() >= 3, name
        answer_every_question(page)  # the screenshot shows what the answers unlock
        assert page.locator('[data-testid="stException"]').count() == 0, name
        page.screenshot(path=str(shots / f"{index}_{name}.jpg"), type="jpeg", quality=55)
    assert not js_errors, js_errors
    # The page menu lists the lessons in their numbers' order and shows each number (lesson 10 was listed
    # second under "Going further", with no numbers, while the overview says "the numbers in the navigation").
    menu = page.locator('[data-testid="stSidebarNav"] a').all_inner_texts()
    lessons = [text.split("\n")[-1].strip() for text in menu if "·" in text]
    assert lessons == [spec.heading for spec in registry.lessons()], menu
    context.close()


def test_moving_a_slider_reruns_and_updates_the_link(server: str, browser) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    js_errors: list[str] = []
    page.on("pageerror", lambda error: js_errors.append(str(error)))
    page.goto(f"{server}/trainable_weights", wait_until="domcontentloaded")
    page.wait_for_selector("h1", timeout=60_000)
    wait_for_rerun(page)
    assert "0.3061, 0.8210" in page.inner_text("body")  # the book's z(2)
    d_out = d_out_slider(page)
    d_out.focus()
    d_out.press("ArrowRight")
    page.wait_for_url("**d_out=3**", timeout=30_000)
    wait_for_rerun(page)
    assert page.locator('[data-testid="stException"]').count() == 0
    assert "0.3061, 0.8210" not in page.inner_text("body")  # the numbers changed with d_out
    # The link reopens exactly this setting in a fresh tab.
    other = context.new_page()
    other.goto(page.url, wait_until="domcontentloaded")
    other.wait_for_selector("h1", timeout=60_000)
    wait_for_rerun(other)
    assert d_out_slider(other).input_value() == "3"  # the slider is an <input type="range">
    assert "0.3061, 0.8210" not in other.inner_text("body")
    assert not js_errors, js_errors
    context.close()


def test_clicking_a_heatmap_row_selects_the_query(server: str, browser) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 2400})
    page = context.new_page()
    page.goto(f"{server}/without_weights", wait_until="domcontentloaded")
    page.wait_for_selector("h1", timeout=60_000)
    wait_for_rerun(page)
    assert "z for “journey”" in page.inner_text("body")  # the book's query token
    answer_every_question(page)  # the weights heatmap answers the page's question
    weights = page.locator('[data-testid="stVegaLiteChart"]').filter(has_text="click a row")
    # Vega labels each cell for screen readers with its tooltip fields.
    weights.locator('path[aria-label*="query: step"]').first.click()
    page.wait_for_function("document.body.innerText.includes('z for “step”')", timeout=30_000)
    wait_for_rerun(page)
    assert page.locator('[data-testid="stException"]').count() == 0
    context.close()


def test_clicking_a_head_in_the_real_models_grid_opens_it(server: str, browser) -> None:
    """The grid is a faceted chart with a click selection: only a browser can click it."""
    context = browser.new_context(viewport={"width": 1400, "height": 2400})
    page = context.new_page()
    js_errors: list[str] = []
    page.on("pageerror", lambda error: js_errors.append(str(error)))
    page.goto(f"{server}/real_model", wait_until="domcontentloaded")
    page.wait_for_selector("h1", timeout=60_000)
    wait_for_rerun(page)
    answer_every_question(page)  # the grid answers the page's question
    head_box = page.locator('[data-testid="stSelectbox"]').filter(has_text="Head").locator("input").first
    layer_box = page.locator('[data-testid="stSelectbox"]').filter(has_text="Layer").locator("input").first
    assert (layer_box.input_value(), head_box.input_value()) != ("4", "9")
    grid = page.locator('[data-testid="stVegaLiteChart"]').filter(has_text="click one to open it")
    grid.locator('path[aria-label*="layer: 4; head: 9;"]').first.click()  # Vega labels cells by their tooltip
    playwright_api.expect(head_box).to_have_value("9", timeout=30_000)
    wait_for_rerun(page)
    assert (layer_box.input_value(), head_box.input_value()) == ("4", "9")
    assert page.locator('[data-testid="stException"]').count() == 0
    assert not js_errors, js_errors
    context.close()


def test_clicking_a_head_in_the_gpts_overview_opens_it_and_its_layer(server: str, browser) -> None:
    """Lesson 10's 270 heads, each a small map of blocks (issue 40): a click on one still opens it, with its
    layer's nine heads in full. At the 64-token cap, where the old grid of every weight broke the page."""
    context = browser.new_context(viewport={"width": 1400, "height": 2400})
    page = context.new_page()
    js_errors: list[str] = []
    page.on("pageerror", lambda error: js_errors.append(str(error)))
    link = urlencode({"gpt_prompt": "own", "gpt_text": support.PROMPT_64, "gpt_layer": 3, "gpt_head": 5})
    page.goto(f"{server}/inside_gpt?{link}", wait_until="domcontentloaded")
    overview = page.locator('[data-testid="stVegaLiteChart"]').filter(has_text="click one to open it")
    outline = overview.locator('path[stroke="#e45756"]')
    outline.first.wait_for(state="attached", timeout=300_000)  # the model loads once per server, then 64 tokens
    page.wait_for_selector(support.IDLE, timeout=300_000)
    assert outline.count() == 1  # the link's head, outlined
    head_box = page.locator('[data-testid="stSelectbox"]').filter(has_text="Head").locator("input").first
    layer_box = page.locator('[data-testid="stSelectbox"]').filter(has_text="Layer").locator("input").first
    assert (layer_box.input_value(), head_box.input_value()) == ("3", "5")
    # A head's square, labelled by its tooltip; the blocks drawn over it let the click through.
    overview.locator('path[aria-label*="layer: 17; head: 2;"]').first.click()
    playwright_api.expect(layer_box).to_have_value("17", timeout=120_000)
    page.wait_for_selector(support.IDLE, timeout=300_000)
    assert (layer_box.input_value(), head_box.input_value()) == ("17", "2")
    layer_panels = '[data-testid="stVegaLiteChart"][aria-label^="Small heatmaps of the 9 heads of layer 17,"]'
    assert page.locator(layer_panels).count() == 1  # the layer's panels followed
    assert "gpt_layer=17" in page.url and "gpt_head=2" in page.url
    assert page.locator('[data-testid="stException"]').count() == 0
    assert not js_errors, js_errors
    context.close()


def test_a_class_arriving_at_once_gets_the_frame_and_keeps_its_links(browser) -> None:
    """Six students open six deep links on a server nobody has visited yet, all at once.

    Every session whose first run starts before st.navigation has run once in the process is
    served as a legacy pages/ page; each must rerun into the frame with its link's seed (a
    regression: only the first one did, the others showed the page without the sidebar, and
    their next page switch dropped the link's values).
    """
    process, url = support.start_server()  # its own server: the race is on a fresh process
    try:
        seeds = [1000 + 17 * i for i in range(6)]
        pages = []
        for i, seed in enumerate(seeds):
            page = browser.new_context(viewport={"width": 1200, "height": 800}).new_page()
            page.goto(f"{url}/{PAGES[1 + i]}?seed={seed}", wait_until="commit")  # don't wait: arrive together
            pages.append(page)
        for page, seed in zip(pages, seeds, strict=True):
            page.wait_for_function(
                "([box, seed]) => document.querySelector(box)?.value === seed",
                arg=[support.SEED_BOX, str(seed)],
                timeout=120_000,
            )
        for i, (page, seed) in enumerate(zip(pages, seeds, strict=True)):
            target = PAGES[1 + (i + 1) % 6]  # another lesson, through the sidebar as a student would
            page.locator(f'[data-testid="stSidebarNav"] a[href$="/{target}"]').first.click()
            page.wait_for_url(f"**/{target}?*seed={seed}*", timeout=60_000)
            wait_for_rerun(page)
            assert page.locator(support.SEED_BOX).input_value() == str(seed), (target, seed)
            assert page.locator('[data-testid="stException"]').count() == 0
            page.context.close()
    finally:
        process.terminate()
        process.wait(timeout=30)
