"""How the pages display in a real browser: projector, laptop and phone, light and dark.

One server for the module; for each of the three sizes (issue 13: 1400x900, a 1920x1080
projector at 150% = 1280x720 CSS px at deviceScaleFactor 1.5, a 390x844 phone) in each colour
scheme that VIEWS pairs with it, every page is opened once and checked for:
- no sideways scroll of the page, no chart or formula wider than the screen, no chart squeezed
  so flat that its marks vanish, and every chart with its text description (alt);
- the page background follows the scheme (the app no longer forces the light theme);
- every number shown in a heatmap cell is at least MIN_CELL_FONT_PX high (at the projector size
  at least one heatmap per heatmap page must show its numbers, so the check is never vacuous),
  and contrasts at least 4.5:1 with the colour of the cell it sits on, as rendered.
axe-core (node_modules/, `npm ci`) runs on every page in both schemes at the laptop size:
no serious or critical violation. The other sizes get the layout checks only, to keep the
module at a few minutes on a 2-core machine.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from core.app import registry
from core.charts.heatmap import MIN_CELL_FONT_PX
from tests import support

CHROMIUM = Path(support.CHROMIUM)
AXE = support.ROOT / "node_modules" / "axe-core" / "axe.min.js"
# Every page, and each lesson again on every model weight source it takes: a real head of all-MiniLM-L6-v2
# (?weights=pretrained, lessons 2, 4, 5 and 7) and of SmolLM2-135M (?weights=decoder, lessons 2, 4 and 5).
PRETRAINED_PAGES = [
    f"{spec.slug}?weights={source.value}"
    for spec in registry.PAGES
    for source in spec.weight_sources
    if source.is_model
]
PAGES = [*support.PAGE_URLS, *PRETRAINED_PAGES]
# Pages with at least one heatmap whose numbers must be readable on the projector.
HEATMAP_PAGES = {
    "overview",
    "without_weights",
    "trainable_weights",
    "causal_dropout",
    "multi_head",
    "cross_attention",
    # The pretrained multi-head page draws its twelve heads as small pattern maps; its numbers are a table.
    # Lessons 2 and 7 on a model show their weights (the heatmap with numbers) only once the question
    # above it is answered (predict, then reveal), so on opening they have none.
    *(name for name in PRETRAINED_PAGES if name.startswith("causal_dropout")),
}
SIZES = {
    "laptop": {"viewport": {"width": 1400, "height": 900}, "device_scale_factor": 1},
    "projector": {"viewport": {"width": 1280, "height": 720}, "device_scale_factor": 1.5},
    "phone": {
        "viewport": {"width": 390, "height": 844},
        "device_scale_factor": 3,
        "is_mobile": True,
        "has_touch": True,
    },
}
# Violations inside Streamlit's own markup that the app cannot change: (axe rule, the container its
# nodes must sit in to be excused, why). Any other node of the same rule still fails the test.
AXE_EXCUSED = [
    ("list", '[data-testid="stSidebarNav"]', "Streamlit's page menu puts section headers between its <li>s"),
    ("listitem", '[data-testid="stSidebarNav"]', "the same page menu: its <li>s sit in a <div> per section"),
    (
        "color-contrast",
        '.stElementContainer:has(:disabled, [aria-disabled="true"]) [data-testid="stWidgetLabel"]',
        "Streamlit greys out a disabled control's label; WCAG 1.4.3 exempts inactive controls",
    ),
]
# ATTENTION_LAB_SCREENSHOTS=tests/screenshots also saves the README's dark-theme picture of this page.
SHOTS = os.environ.get("ATTENTION_LAB_SCREENSHOTS")
DARK_SHOT = "trainable_weights"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed"),
]
playwright_api = pytest.importorskip("playwright.sync_api")


def open_page(page, url: str) -> None:
    """Open a page and wait until its script has run and every visible chart has drawn."""
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector('[data-testid="stSidebar"] [data-testid="stSlider"]', state="attached", timeout=60_000)
    page.wait_for_selector(support.IDLE, timeout=60_000)
    support.answer_every_question(page)  # what a page displays includes what its answers unlock
    page.wait_for_function(
        """() => [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')]
                 .filter(c => c.checkVisibility()).every(c => c.querySelector('svg'))""",
        timeout=30_000,
    )
    page.wait_for_timeout(500)  # Vega re-lays out once after its container's width settles


LAYOUT = """() => {
  const right = innerWidth + 1;
  const wide = [...document.querySelectorAll('[data-testid="stVegaLiteChart"] svg, .katex-display')]
    .filter(e => e.checkVisibility() && e.getBoundingClientRect().right > right)
    .map(e => e.closest('[data-testid="stVegaLiteChart"]')?.getAttribute('aria-label') || e.textContent.slice(0, 40));
  // A chart whose marks are squeezed to nothing (e.g. axes and legend eating a fixed total height).
  const collapsed = [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')]
    .filter(c => c.checkVisibility() && c.querySelector('g.role-mark'))
    .filter(c => Math.max(...[...c.querySelectorAll('g.role-mark')].map(g => g.getBoundingClientRect().height)) < 40)
    .map(c => c.getAttribute('aria-label'));
  const unlabelled = [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')]
    .filter(c => !(c.getAttribute('aria-label') || '').trim()).length;
  const main = document.querySelector('[data-testid="stMain"]');
  const app = document.querySelector('[data-testid="stApp"]');
  return {scrollWidth: document.scrollingElement.scrollWidth, mainScroll: main.scrollWidth - main.clientWidth,
          innerWidth, wide, collapsed, unlabelled, background: getComputedStyle(app).backgroundColor};
}"""

# Every number drawn in a heatmap cell (Vega's text marks; axis and legend labels are other groups),
# with its size and colour and the fill of the cell under its centre.
CELL_NUMBERS = """() => {
  const out = [];
  for (const chart of document.querySelectorAll('[data-testid="stVegaLiteChart"]')) {
    if (!chart.checkVisibility()) continue;
    chart.scrollIntoView({block: 'center'});  // elementsFromPoint only sees what is on screen
    for (const text of chart.querySelectorAll('g.mark-text.role-mark text')) {
      const style = getComputedStyle(text);
      const size = parseFloat(style.fontSize);
      if (!(size > 0) || text.getAttribute('opacity') === '0' || !text.textContent.trim()) continue;
      const box = text.getBoundingClientRect();
      const x = box.left + box.width / 2, y = box.top + box.height / 2;
      // the cell the number is drawn on: a visible rect, not a near-transparent click target over it
      const seen = e => {
        const style = getComputedStyle(e);
        return parseFloat(style.opacity) * parseFloat(style.fillOpacity) > 0.5;
      };
      const cell = document.elementsFromPoint(x, y)
        .find(e => e.tagName === 'path' && e.closest('g.mark-rect') && seen(e));
      out.push({text: text.textContent, size, height: box.height, colour: style.fill,
                cell: cell ? getComputedStyle(cell).fill : null});
    }
  }
  return out;
}"""


def rgb(css: str) -> tuple[float, float, float]:
    """'rgb(12, 34, 56)' -> (r, g, b) in 0..1."""
    r, g, b = (int(v) for v in re.findall(r"\d+", css)[:3])
    return r / 255, g / 255, b / 255


def luminance(colour: tuple[float, float, float]) -> float:
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in colour]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(rgb(a)), luminance(rgb(b))), reverse=True)
    return (high + 0.05) / (low + 0.05)


AXE_RUN = """async (excused) => {
  const result = await axe.run(document, {resultTypes: ['violations']});
  const isExcused = (rule, target) => excused.some(([id, container]) =>
    id === rule && typeof target === 'string' && document.querySelector(target)?.closest(container));
  return result.violations
    .filter(v => v.impact === 'serious' || v.impact === 'critical')
    .map(v => ({id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.map(n => n.target[0]).filter(t => !isExcused(v.id, t))}))
    .filter(v => v.nodes.length > 0);
}"""


def axe_problems(page) -> list[str]:
    """Serious and critical axe-core violations on the open page, less AXE_EXCUSED's nodes."""
    page.add_script_tag(path=str(AXE))
    violations = page.evaluate(AXE_RUN, [[rule, container] for rule, container, _ in AXE_EXCUSED])
    return [f"{v['id']} ({v['impact']}): {v['help']}: {v['nodes'][:3]}" for v in violations]


# Each size once and each scheme at two sizes: the laptop in both (axe-core's contrast rules see both
# schemes there), the projector light (its room is lit) and the phone dark. The six pairs took 18 minutes
# of CI's 90 (lesson 11 made every pass longer); the checks that depend on the size (layout, the numbers'
# size) do not change with the scheme, and those that depend on the scheme (background, contrast) run at
# a large and a small size.
VIEWS = [("laptop", "light"), ("laptop", "dark"), ("projector", "light"), ("phone", "dark")]


@pytest.mark.parametrize(("size", "scheme"), VIEWS, ids=[f"{size}-{scheme}" for size, scheme in VIEWS])
def test_every_page_displays_right(server: str, browser, size: str, scheme: str) -> None:
    if size == "laptop" and not AXE.exists():
        pytest.skip("axe-core is not installed: run `npm ci`")
    context = browser.new_context(color_scheme=scheme, **SIZES[size])
    page = context.new_page()
    js_errors: list[str] = []
    page.on("pageerror", lambda error: js_errors.append(str(error)))
    problems: list[str] = []
    for name in PAGES:
        open_page(page, f"{server}/{name}")
        assert page.locator('[data-testid="stException"]').count() == 0, name
        layout = page.evaluate(LAYOUT)
        if layout["scrollWidth"] > layout["innerWidth"] or layout["mainScroll"] > 1:
            problems.append(f"{name}: scrolls sideways ({layout})")
        if layout["unlabelled"]:
            problems.append(f"{name}: {layout['unlabelled']} charts without a text description")
        # The real models' overviews of every head (72 in lesson 6, 270 in lesson 10) are small by design on a
        # phone (they shrink to the screen rather than scroll sideways); any head opens large below them.
        grids = ("A grid of 6 by 12", "A grid of 30 by 9")
        squeezed = [alt for alt in layout["collapsed"] if not (alt or "").startswith(grids)]
        if squeezed:
            problems.append(f"{name}: charts with no room for their marks: {squeezed}")
        if layout["wide"]:
            problems.append(f"{name}: wider than the screen: {layout['wide']}")
        background = luminance(rgb(layout["background"]))
        if (background < 0.5) != (scheme == "dark"):
            problems.append(f"{name}: background {layout['background']} in the {scheme} scheme")
        numbers = page.evaluate(CELL_NUMBERS)
        for number in numbers:
            if number["size"] < MIN_CELL_FONT_PX or number["height"] < MIN_CELL_FONT_PX:
                problems.append(f"{name}: cell number {number['text']} is {number['size']:.1f} px")
            if number["cell"] and contrast(number["colour"], number["cell"]) < 4.5:
                problems.append(f"{name}: {number['text']} in {number['colour']} on {number['cell']}")
        if size == "projector" and name in HEATMAP_PAGES and not numbers:
            problems.append(f"{name}: no heatmap shows its numbers on the projector")
        if size == "laptop":
            problems += [f"{name}: axe {p}" for p in axe_problems(page)]
        if SHOTS and size == "laptop" and scheme == "dark" and name == DARK_SHOT:
            page.locator('[data-testid="stMain"]').evaluate("main => main.scrollTo(0, 0)")
            page.screenshot(path=str(Path(SHOTS) / f"dark_{name}.jpg"), type="jpeg", quality=55)
    context.close()
    assert not problems, "\n".join(problems)
    assert not js_errors, js_errors
