"""On a 390 px phone no heatmap clips its token labels (issue 30, defect 10: lesson 6's large heatmap clipped
its key labels; lesson 5's heads are small multiples that must shrink with their labels, not cut them)."""

from __future__ import annotations

import pytest

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


def test_no_formula_is_cut_on_a_phone(server: str, browser) -> None:
    # Lesson 1's three formulas on one line and lesson 5's MultiHead line ran past a 390 px screen.
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    cut: list[str] = []
    for name in ("without_weights", "multi_head", "multi_head?weights=pretrained"):
        page.goto(f"{server}/{name}", wait_until="domcontentloaded")
        page.wait_for_selector(support.IDLE, timeout=60_000)
        support.answer_every_question(page)
        page.wait_for_timeout(800)
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
