"""A drawn chart as an SVG or PNG file, converted on the server (the "Save for slides" buttons, ui/draw.py).

Streamlit 1.67 keeps only theme, renderer and padding of a spec's usermeta.embedOptions, so Vega-Embed's own
export menu cannot be turned back on from the spec; the files are made here instead, with vl-convert: the
Vega project's converter (what Altair's `chart.save` uses), which runs Vega in an embedded JavaScript runtime
and needs no browser and no network.

No streamlit here, and vl_convert is imported inside the functions: the app's start-up does not pay for it
(its first conversion starts the runtime, about 6 s), only the first click does.
"""

from __future__ import annotations

import json
import re

import pyarrow as pa

from core.charts.spec import slide_title

_SCHEMA_VERSION = re.compile(r"/vega-lite/v(\d+\.\d+)")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# The page's text colour (spec.READABLE_TEXT's currentColor) outside a page: a file has no container to
# inherit a colour from, and a PNG renderer reads currentColor as black anyway; say so explicitly.
FILE_TEXT = "#262730"  # Streamlit's light theme text colour: dark text on the white file background
# A page stretches a chart to its column; a file has no column, and Vega then drew every such chart 300 px wide
# (portrait maps, titles cut on the left, slanted labels printed over one another: an independent review).
SLIDE_WIDTH = 880  # px: the content width of a 16:9 slide 960 px wide, less its margins
_COMPOSITE = ("facet", "hconcat", "vconcat", "concat", "repeat")


def _title_for_file(title: object) -> object:
    """One line for a file (a phone's two-line title reads as one at slide width), without the click hint."""
    if isinstance(title, dict):
        return {**title, "text": _title_for_file(title.get("text", ""))}
    if isinstance(title, list):
        title = " ".join(map(str, title))
    return slide_title(title) if isinstance(title, str) else title


def _slide_sized(spec: dict) -> dict:
    """The spec with a slide's width where the page would have stretched it, and titles for a file."""
    spec = dict(spec)
    if "title" in spec:
        spec["title"] = _title_for_file(spec["title"])
    if "layer" in spec:
        spec["layer"] = [{**layer, "title": _title_for_file(layer["title"])} if "title" in layer else layer
                         for layer in spec["layer"]]  # fmt: skip
    if not any(key in spec for key in _COMPOSITE) and spec.get("width", "container") == "container":
        spec["width"] = SLIDE_WIDTH
    inner = spec.get("spec")
    if "facet" in spec and isinstance(inner, dict) and inner.get("width", "container") == "container":
        spec["spec"] = {**inner, "width": SLIDE_WIDTH // max(int(spec.get("columns", 1)), 1)}
    return spec


def file_spec(spec: dict) -> dict:
    """The spec a page draws (`VegaChart.spec()`), as plain JSON with its data inlined, for a file.

    The page sends Arrow tables beside the spec; a converter reads only JSON values. Streamlit's theme
    is not applied (the file keeps Vega's defaults: white background), and currentColor becomes FILE_TEXT.
    A chart the page stretches to its column is SLIDE_WIDTH wide, and its title one line without click hints.
    """
    datasets = {
        name: rows.to_pylist() if isinstance(rows, pa.Table) else rows
        for name, rows in spec.get("datasets", {}).items()
    }
    spec = {**spec, "datasets": datasets}  # the caller's spec keeps its Arrow tables
    # json round trip: numpy scalars and the like become plain JSON, and no part is shared with the chart
    text = json.dumps(spec, default=str).replace('"currentColor"', json.dumps(FILE_TEXT))
    return _slide_sized(json.loads(text))


def vega_lite_version(spec: dict) -> str | None:
    """The Vega-Lite version a spec was written for ("v6.4" from Altair's $schema ".../v6.4.1.json"), so the
    converter draws it with the library the page's own Vega-Embed would; None (the converter's latest) if unsaid."""
    found = _SCHEMA_VERSION.search(str(spec.get("$schema", "")))
    return f"v{found.group(1)}" if found else None


def to_svg(spec: dict) -> bytes:
    """A chart's spec (`VegaChart.spec()`) as an SVG file (UTF-8 bytes)."""
    import vl_convert as vlc  # lazily: see the module's docstring

    return vlc.vegalite_to_svg(file_spec(spec), vl_version=vega_lite_version(spec)).encode("utf-8")


def to_png(spec: dict, scale: float = 2) -> bytes:
    """A chart's spec (`VegaChart.spec()`) as a PNG file, `scale` times its size in pixels (2: sharp on a
    projector and in slides)."""
    import vl_convert as vlc  # lazily: see the module's docstring

    return vlc.vegalite_to_png(file_spec(spec), vl_version=vega_lite_version(spec), scale=scale)
