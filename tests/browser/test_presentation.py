"""Presentation mode (one step at a time, the step in the link) and predict-then-reveal questions."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from core.app import registry
from tests import support
from tests.support import app, assert_clean

pytestmark = pytest.mark.usefixtures("navigation_not_pages_directory")
LESSONS = [pytest.param(spec, id=spec.slug) for spec in registry.lessons()]


@pytest.mark.parametrize("spec", LESSONS)
def test_every_lesson_asks_a_question_and_hides_the_answer_until_a_choice(spec: registry.PageSpec) -> None:
    at = app(spec.file)
    assert_clean(at)
    radio = next((r for r in at.radio if r.key and r.key.startswith("predict_")), None)
    assert radio is not None, f"{spec.slug} has no predict-then-reveal question"
    before = len(at.success) + len(at.warning)
    waiting = sum("Choose an answer" in c.value for c in at.caption)  # one per question (lesson 9 asks five)
    assert waiting >= 1
    radio.set_value(0).run()
    assert_clean(at)
    assert len(at.success) + len(at.warning) >= before + 1  # the verdict appeared (and what it unlocks, e.g. a check)
    assert sum("Choose an answer" in c.value for c in at.caption) == waiting - 1  # only this one revealed


def test_presentation_mode_steps_and_writes_the_step_into_the_link() -> None:
    # (Opening a link at a given step is checked in the browser test below: AppTest's page switch
    # starts on the overview.)
    at = app(registry.page("causal_dropout").file, present="1")
    assert_clean(at)
    at.number_input(key="step").set_value(3).run()
    assert any(b.label == "Next →" for b in at.button)
    at.button[[b.label for b in at.button].index("Next →")].click().run()
    assert at.number_input(key="step").value == 4
    assert at.query_params["step"] in ("4", ["4"])


def test_presentation_mode_is_off_by_default() -> None:
    at = app(registry.page("causal_dropout").file)
    assert not any(b.label == "Next →" for b in at.button)


# ---------------------------------------------------------------- in a real browser: what is on screen
playwright_api = pytest.importorskip("playwright.sync_api")
browser_only = [
    pytest.mark.browser,
    pytest.mark.skipif(not support.Path(support.CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]


@pytest.mark.browser
@pytest.mark.skipif(not support.Path(support.CHROMIUM).exists(), reason="Debian's chromium is not installed")
def test_presentation_shows_one_step_steps_forward_and_back_and_a_question_reveals(server: str) -> None:
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=support.CHROMIUM, args=support.CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1280, "height": 720}).new_page()

        def settle() -> None:
            page.wait_for_selector(support.IDLE, timeout=60_000)
            page.wait_for_timeout(500)

        def shown(text: str) -> bool:
            found = page.get_by_text(text, exact=False).first
            return found.count() > 0 and found.is_visible()

        page.goto(f"{server}/causal_dropout?present=1&step=2")
        page.wait_for_selector("h1", timeout=60_000)
        settle()
        assert shown("Causal attention and dropout")  # the title stays
        page.get_by_text("Does anything leak").first.wait_for(state="hidden", timeout=30_000)
        assert shown("Two ways to mask") and not shown("Does anything leak") and not shown("Training mode")
        assert page.locator('[data-testid="stSidebar"][aria-expanded="true"]').count() == 0  # sidebar closed
        page.get_by_role("button", name="Next →").click()
        page.wait_for_url("**step=3**", timeout=30_000)
        settle()
        # The two methods' difference on a screen of its own (under both maps the step was 1,956 px, the s27 review).
        assert shown("Largest difference between the two methods") and not shown("Two ways to mask")
        page.get_by_role("button", name="Next →").click()
        page.wait_for_url("**step=4**", timeout=30_000)
        settle()
        # The chapter's replay on screens of its own: inside the masking step it made that step 5,432 px (the s25
        # review); its second half, the scores masked before the softmax, opens the next (3,863 px, the s27 review).
        assert shown("The book chapter's printed causal example") and not shown("Two ways to mask")
        assert not shown("masked before the softmax") and not shown("Inputs and targets")
        page.get_by_role("button", name="Next →").click()
        page.wait_for_url("**step=5**", timeout=30_000)
        settle()
        assert shown("masked before the softmax") and not shown("The book chapter's printed causal example")
        assert not shown("Inputs and targets")
        for back in ("4", "3", "2"):
            page.get_by_role("button", name="← Back").click()
            page.wait_for_url(f"**step={back}**", timeout=30_000)
            settle()
        assert shown("Two ways to mask")

        # A student opening the teacher's link sees the same step.
        student = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
        student.goto(page.url)
        student.wait_for_selector(support.IDLE, timeout=60_000)
        student.wait_for_timeout(500)
        assert student.get_by_text("Two ways to mask").first.is_visible()

        # Predict, then reveal (step 1 holds the question).
        page.goto(f"{server}/causal_dropout?present=1&step=1")
        settle()
        assert not shown("Row i only mixes")
        page.get_by_text("Every row", exact=True).click()
        settle()
        assert shown("Row i only mixes")
        browser.close()


@pytest.mark.browser
@pytest.mark.skipif(not support.Path(support.CHROMIUM).exists(), reason="Debian's chromium is not installed")
def test_a_shared_link_restores_the_page_controls_too(server: str) -> None:
    """The teacher moves a page's own controls; the student who opens the link sees the same screen."""
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=support.CHROMIUM, args=support.CHROMIUM_ARGS)
        teacher = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
        teacher.goto(f"{server}/causal_dropout?dropout=0.5")
        teacher.wait_for_selector(support.IDLE, timeout=60_000)
        teacher.get_by_text("Training mode (dropout on)").click()
        teacher.wait_for_url("**training=true**", timeout=30_000)
        teacher.wait_for_selector(support.IDLE, timeout=60_000)
        teacher.wait_for_timeout(500)
        support.answer_every_question(teacher)  # the kept fraction's count of unmasked weights tells the answer
        kept = teacher.locator('[data-testid="stMetric"]').filter(has_text="weights the mask lets through")
        teacher_value = kept.locator('[data-testid="stMetricValue"]').inner_text()

        student = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
        student.goto(teacher.url)
        student.wait_for_selector(support.IDLE, timeout=60_000)
        student.wait_for_timeout(500)
        support.answer_every_question(student)
        kept = student.locator('[data-testid="stMetric"]').filter(has_text="weights the mask lets through")
        assert kept.locator('[data-testid="stMetricValue"]').inner_text() == teacher_value

        student.goto(f"{server}/why_scale?multiplier=16.0")
        student.wait_for_selector(support.IDLE, timeout=60_000)
        support.answer_every_question(student)  # the metric answers the page's question
        # The metric's label names the link's multiplier (the box's default is ×8).
        student.get_by_text("largest weight at ×16").first.wait_for(state="visible", timeout=60_000)
        browser.close()


@pytest.mark.browser
@pytest.mark.skipif(not support.Path(support.CHROMIUM).exists(), reason="Debian's chromium is not installed")
def test_on_a_projector_the_step_box_starts_below_the_fixed_header(server: str) -> None:
    # At 3.25rem of top padding the step box's top edge sat 10 px under Streamlit's 75 px header (issue 30, 6).
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=support.CHROMIUM, args=support.CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1280, "height": 720}, device_scale_factor=1.5).new_page()
        for path in ("causal_dropout?present=1", "trainable_weights?weights=decoder&present=1"):
            page.goto(f"{server}/{path}", wait_until="domcontentloaded")
            page.wait_for_selector(support.IDLE, timeout=60_000)
            page.wait_for_selector(".st-key-al-bar input", timeout=30_000)
            edges = page.evaluate(
                """() => {
                  const box = document.querySelector('.st-key-al-bar input')
                    .closest('[data-testid="stNumberInputContainer"]');
                  return {header: document.querySelector('[data-testid="stHeader"]').getBoundingClientRect().bottom,
                          box: box.getBoundingClientRect().top};
                }"""
            )
            assert edges["box"] >= edges["header"], (path, edges)
        browser.close()


@pytest.mark.browser
@pytest.mark.skipif(not support.Path(support.CHROMIUM).exists(), reason="Debian's chromium is not installed")
def test_a_colour_legend_shown_after_next_has_its_ramp_painted(server: str) -> None:
    # An independent review saw lesson 5's heads on a projector with a legend of numbers and no ramp. Vega's SVG
    # ramp fills with url(<address when drawn>#gradient_N); the step box wrote the new step into the address after
    # the page's charts were sent, so every ramp shown after Next named the old address and Chromium painted none.
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=support.CHROMIUM, args=support.CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1280, "height": 720}, device_scale_factor=1.5).new_page()
        page.goto(f"{server}/multi_head?present=1&step=2")
        page.wait_for_selector(support.IDLE, timeout=90_000)
        support.answer_every_question(page)
        page.get_by_role("button", name="Next →").click()
        page.wait_for_url("**step=3**", timeout=30_000)
        page.wait_for_selector(support.IDLE, timeout=60_000)
        ramp = page.locator('[data-testid="stVegaLiteChart"] .role-legend-gradient path').locator("visible=true").first
        ramp.wait_for(timeout=30_000)
        page.wait_for_timeout(1_000)  # Vega draws after the chart's element mounts
        fill = ramp.get_attribute("fill") or ""
        assert fill.startswith("url(") and fill.split("#")[0][4:] == page.evaluate("location.href.split('#')[0]"), fill
        # And painted: the ramp runs from dark purple to yellow, so its pixels are far from one colour.
        ramp.scroll_into_view_if_needed()
        low, high = Image.open(io.BytesIO(ramp.screenshot())).convert("L").getextrema()  # Pillow: Streamlit's own
        assert high - low > 100, f"the ramp is one colour ({low}..{high}): not painted"
        browser.close()
