"""On a 390 px phone no heatmap clips its token labels (issue 30, defect 10: lesson 6's large heatmap clipped
its key labels; lesson 5's heads are small multiples that must shrink with their labels, not cut them)."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from PIL import Image

from tests import support

playwright_api = pytest.importorskip("playwright.sync_api")

# Axis labels whose box ends outside their chart or the screen, by more than SLACK_PX (a rotated label's
# anti-aliased tail may pass its chart's edge by a pixel or two).
SLACK_PX = 3
CLIPPED = """(slack) => {
  const out = [];
  for (const chart of document.querySelectorAll('[data-testid="stVegaLiteChart"]')) {
    if (!chart.checkVisibility()) continue;
    const box = chart.getBoundingClientRect();
    for (const label of chart.querySelectorAll('g.role-axis-label text')) {
      const b = label.getBoundingClientRect();
      if (b.width === 0) continue;
      if (b.left < Math.max(box.left, 0) - slack || b.right > Math.min(box.right, innerWidth) + slack)
        out.push(`${chart.getAttribute('aria-label').slice(0, 50)}: "${label.textContent}"`);
    }
  }
  return out;
}"""
PAGES = ["real_model", "real_model?weights=pretrained", "multi_head?weights=pretrained", "multi_head?num_heads=8"]


def test_no_heatmap_clips_its_labels_on_a_phone(server: str, browser) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    clipped: list[str] = []
    for name in PAGES:
        page.goto(f"{server}/{name}", wait_until="domcontentloaded")
        page.wait_for_selector(support.IDLE, timeout=60_000)
        support.answer_every_question(page)
        page.wait_for_function(
            """() => [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')]
                     .filter(c => c.checkVisibility()).every(c => c.querySelector('svg'))""",
            timeout=30_000,
        )
        page.wait_for_timeout(800)
        labels = page.evaluate("() => document.querySelectorAll('g.role-axis-label text').length")
        assert labels > 0, name  # the check below has something to check
        clipped += [f"{name}: {label}" for label in page.evaluate(CLIPPED, SLACK_PX)]
    context.close()
    assert not clipped, "\n".join(clipped)


FORMULA_PAGES = (
    "overview",
    "without_weights",
    "trainable_weights",
    "trainable_weights?weights=decoder",  # its Q, K, V line with the model's shapes was cut (the s19 review)
    "why_scale",
    "causal_dropout",
    "multi_head",
    "multi_head?weights=pretrained",
    "multi_head?weights=decoder",
    "real_model",
    "cross_attention",
    "attention_at_scale",
)


def each_formula_page(page, server: str) -> Iterator[str]:  # noqa: ANN001 - a Playwright page
    """Opens each page with a formula in turn, every question answered (some formulas wait for one)."""
    for name in FORMULA_PAGES:
        page.goto(f"{server}/{name}", wait_until="domcontentloaded")
        page.wait_for_selector(support.IDLE, timeout=60_000)
        support.answer_every_question(page)
        page.wait_for_timeout(800)
        yield name


def test_no_formula_is_cut_on_a_phone(server: str, browser) -> None:
    # Lesson 1's three formulas on one line and lesson 5's MultiHead line ran past a 390 px screen.
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    cut: list[str] = []
    # Lesson 6's head_i = softmax(...) V_i with Q_i, K_i, V_i on one line was cut at the right (review #17).
    # Lesson 4's dropout formula, with its Bernoulli draw on the same line, was cut too (review 5): every page
    # with a formula is checked.
    for name in each_formula_page(page, server):
        cut += [
            f"{name}: {width}"
            for width in page.evaluate(
                """() => [...document.querySelectorAll('.katex-display')]
                       .filter(k => k.checkVisibility() && k.scrollWidth > k.clientWidth + 2)
                       .map(k => k.textContent.slice(0, 40))"""
            )
        ]
    context.close()
    assert not cut, cut


INK = 128  # a pixel darker than this grey (0-255) on the light theme is a glyph's ink


def _ink_on_an_edge(png: bytes) -> bool:
    """Whether a formula's screenshot has ink in its top or bottom row: a glyph its box cuts off."""
    image = Image.open(io.BytesIO(png)).convert("L")
    width, height = image.size
    edges = [image.getpixel((x, y)) for x in range(width) for y in (0, height - 1)]
    return min(edges) < INK  # type: ignore[type-var]  # "L" pixels are ints


def test_no_formula_is_cut_at_its_top_or_bottom_on_a_phone(server: str, browser) -> None:
    # The sixth review: lesson 4's stacked fraction stood 2 px taller than the formula's box, which hides what
    # overflows: the top of "m_ij α_ij" was shaved off on a phone and a laptop.
    context = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=3)
    page = context.new_page()
    cut: list[str] = []
    for name in each_formula_page(page, server):
        formulas = page.locator(".katex-display")
        for index in range(formulas.count()):
            formula = formulas.nth(index)
            if formula.is_visible() and _ink_on_an_edge(formula.screenshot()):
                cut.append(f"{name}: {formula.text_content()[:40]}")
    context.close()
    assert not cut, cut


# The centre x of every panel header ("head 0" ... "head 11") of the chart whose description holds the text given.
PANEL_HEADERS = """(description) => {
  const chart = [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')]
    .find(c => (c.getAttribute('aria-label') || '').includes(description));
  if (!chart) return null;
  const heads = [...chart.querySelectorAll('text')].filter(t => /^head \\d+$/.test(t.textContent.trim()));
  const centre = t => { const b = t.getBoundingClientRect(); return b.left + b.width / 2; };
  return {visible: chart.checkVisibility(), x: heads.map(centre).sort((a, b) => a - b),
          right: chart.getBoundingClientRect().right};
}"""
LAYER_VIEW = "heads of layer"  # lesson 6's one layer, larger, on a phone


@pytest.mark.parametrize("width", [390, 1400])
def test_on_a_phone_the_real_models_heads_of_one_layer_come_larger(server: str, browser, width: int) -> None:
    """Review #17: on a 390 px phone the 72-head grid shrinks to squares of about 24 px. A phone also gets the
    chosen head's layer, three heads a row, each about four times as wide; a laptop keeps the grid alone."""
    context = browser.new_context(viewport={"width": width, "height": 844})
    page = context.new_page()
    page.goto(f"{server}/real_model?real_layer=2&real_head=5", wait_until="domcontentloaded")
    page.wait_for_selector(support.IDLE, timeout=120_000)
    support.answer_every_question(page)
    grid = page.locator('[data-testid="stVegaLiteChart"][aria-label*="A grid of 6 by 12"]').first
    grid.locator("svg").first.wait_for(state="attached", timeout=60_000)
    assert grid.is_visible()  # the grid stays on every screen
    page.locator(f'[data-testid="stVegaLiteChart"][aria-label*="{LAYER_VIEW}"] svg').first.wait_for(
        state="attached", timeout=60_000
    )
    page.wait_for_timeout(800)  # Vega lays out once more after its column's width settles
    view = page.evaluate(PANEL_HEADERS, "heads of layer 2,")
    assert view is not None, "the chosen head's layer (2) is the one drawn"
    if width > 640:
        assert not view["visible"]
        assert not page.get_by_text("On a small screen the squares above are small").first.is_visible()
        context.close()
        return
    assert view["visible"] and len(view["x"]) == 12 and view["right"] <= width
    columns = sorted(set(round(x) for x in view["x"]))
    assert len(columns) == 3, columns  # three heads a row
    panel = columns[1] - columns[0]
    grid_panel = grid.bounding_box()["width"] / 12
    assert panel >= 90 and panel >= 3 * grid_panel, (panel, grid_panel)
    context.close()
