"""Issue 41 item 6 in Chromium: a chart's "Save for slides" menu downloads its SVG and its PNG, named after the
page, the chart and the settings (Streamlit hides Vega-Embed's own menu; ui/draw.py `save_for_slides`)."""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree

import pytest

from core.charts.export import PNG_SIGNATURE
from tests import support
from tests.support import wait_for_rerun

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(support.CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]
pytest.importorskip("playwright.sync_api")
CONVERT_TIMEOUT_MS = 90_000  # the server's first conversion starts vl-convert's JavaScript runtime (~6-10 s)


def test_save_for_slides_downloads_a_charts_svg_and_png(server: str, browser, tmp_path: Path) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 1200}, accept_downloads=True)
    page = context.new_page()
    js_errors: list[str] = []
    page.on("pageerror", lambda error: js_errors.append(str(error)))
    page.goto(f"{server}/why_scale?multiplier=16.0", wait_until="domcontentloaded")
    page.wait_for_selector('[data-testid="stVegaLiteChart"]', timeout=60_000)
    wait_for_rerun(page)
    saved: dict[str, bytes] = {}
    for label in ("Save SVG", "Save PNG"):
        page.get_by_role("button", name="Save for slides").first.click()
        with page.expect_download(timeout=CONVERT_TIMEOUT_MS) as download:
            page.get_by_role("button", name=label).first.click()
        path = tmp_path / download.value.suggested_filename
        download.value.save_as(path)
        saved[download.value.suggested_filename] = path.read_bytes()
        page.keyboard.press("Escape")  # the menu closes, as after any choice
    names = sorted(saved)
    assert [Path(name).suffix for name in names] == [".png", ".svg"], names
    assert all(name.startswith("attention-lab_why_scale_") and "multiplier-16.0" in name for name in names), names
    assert Path(names[0]).stem == Path(names[1]).stem  # one chart, both files
    svg, png = saved[names[1]], saved[names[0]]
    assert ElementTree.fromstring(svg).tag == "{http://www.w3.org/2000/svg}svg" and b"<svg" in svg
    assert png.startswith(PNG_SIGNATURE) and len(png) > 1_000
    assert page.locator('[data-testid="stException"]').count() == 0
    assert not js_errors, js_errors
    context.close()
