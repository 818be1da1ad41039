"""Every chart can be saved as SVG or PNG under a name that says what it shows (issue 30, defect 12; issue 41
item 6: the files are made on the server by core/charts/export.py, since Streamlit hides Vega-Embed's menu)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree

import numpy as np
import pandas as pd
import torch

from core.charts import common as charts
from core.charts import export
from core.charts import heatmap as heatmaps
from core.charts.spec import download_name
from core.lessons.common import matrix_frame


def test_the_file_name_holds_the_page_the_chart_and_the_settings_and_nothing_unsafe() -> None:
    name = download_name("why_scale", "Peakiness vs d_k", {"seed": "7", "multiplier": "16.0"})
    assert name == "attention-lab_why_scale_Peakiness-vs-d_k_multiplier-16.0_seed-7"
    hostile = download_name("real_model", "x", {"real_sentence": "../../etc/passwd <b>" + "a" * 500})
    assert "/" not in hostile and "<" not in hostile and len(hostile) <= 150


def test_a_heatmap_saves_as_an_svg_with_its_title_and_cells_and_as_a_png() -> None:
    frame = matrix_frame(torch.arange(9.0).reshape(3, 3) / 9, ["your", "journey", "starts"], list("xyz"))
    spec = heatmaps.heatmap(frame, "Weights of the saved heatmap").spec()
    svg = export.to_svg(spec)
    root = ElementTree.fromstring(svg)  # a well-formed SVG file
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    text = svg.decode()
    assert "Weights of the saved heatmap" in text and "journey" in text  # the title and the data were drawn
    assert "currentColor" not in text  # a file has no page to take its text colour from
    png = export.to_png(spec)
    assert png.startswith(export.PNG_SIGNATURE)
    width = int.from_bytes(png[16:20], "big")  # the IHDR chunk's width: twice the chart's (scale=2)
    assert width == 2 * int(float(root.attrib["width"]))
    assert "datasets" in spec and not isinstance(next(iter(spec["datasets"].values())), list)  # caller's unchanged


def test_a_chart_the_page_stretches_is_saved_slide_wide_with_its_title_whole_and_no_click_hint() -> None:
    """An independent review found every stretched chart saved 300 px wide: portrait maps, the title cut on the
    left, slanted labels over one another, and "click one" in the title and the file's name."""
    from core.charts import to_the_answer as charts_answer
    from core.charts.spec import chart_title
    from core.lessons.to_the_answer_frames import head_map_frame

    frame = head_map_frame(np.array([[0.1, -0.2], [2.88, 0.0]]), 1, 0)  # (L, H) = (2, 2), layer 1 head 0 chosen
    title = "Each head's direct effect on ' Mary' - ' John'; click one"
    spec = charts_answer.head_map(frame, title, "effect").spec()
    assert spec["width"] == "container"  # the page's: stretched to its column
    assert export.file_spec(spec)["width"] == export.SLIDE_WIDTH
    assert chart_title(spec) == "Each head's direct effect on ' Mary' - ' John'"  # the file's name
    svg = export.to_svg(spec).decode()
    assert float(ElementTree.fromstring(svg).attrib["width"]) >= export.SLIDE_WIDTH
    assert "click one" not in svg and "direct effect on" in svg
    # A phone's two-line title is one line in the file, and a chart with its own width keeps it.
    assert export.file_spec({"title": ["a long", "title"], "width": 120})["title"] == "a long title"
    assert export.file_spec({"title": "t", "width": 120})["width"] == 120


def test_a_causal_heatmaps_legend_title_is_saved_whole() -> None:
    # The s22 review: the saved PNG read "weight (grey: masked fut…", cut at Vega's 180 px.
    frame = matrix_frame(torch.full((3, 3), 0.5).tril(), ["Life", "is", "short"], ["Life", "is", "short"])
    spec = heatmaps.heatmap(frame, "softmax, masked", causal=True, value_title="weight").spec()
    svg = export.to_svg(spec).decode()
    assert "weight (grey: masked future)" in svg and "…" not in svg


def test_a_file_spec_inlines_the_arrow_datasets_as_records() -> None:
    frame = pd.DataFrame({"token": ["a", "b"], "method": ["m", "m"], "weight": [0.4, 0.6]})
    spec = charts.grouped_bars(frame, "token", "weight", "method", "Weights for “a”").spec()
    inlined = export.file_spec(spec)
    assert [row["weight"] for rows in inlined["datasets"].values() for row in rows] == [0.4, 0.6]
    assert re.fullmatch(r"v6\.\d+", export.vega_lite_version(spec) or "")  # from $schema .../vega-lite/v6.4.1.json


def test_the_server_converts_one_chart_at_a_time() -> None:
    """Forty students clicking at once queue for ui.draw's one conversion slot instead of running side by side."""
    import threading
    import time

    from ui import draw

    running, most = 0, 0
    count = threading.Lock()

    def slow_convert(spec: dict) -> bytes:
        nonlocal running, most
        with count:
            running += 1
            most = max(most, running)
        time.sleep(0.02)
        with count:
            running -= 1
        return b"<svg/>"

    chart = charts.grouped_bars(
        pd.DataFrame({"token": ["a"], "method": ["m"], "weight": [1.0]}), "token", "weight", "method", "t"
    )
    clicks = [threading.Thread(target=draw._converted, args=(slow_convert, chart)) for _ in range(8)]
    for click in clicks:
        click.start()
    for click in clicks:
        click.join()
    assert most == 1
