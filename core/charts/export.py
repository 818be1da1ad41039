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

_SCHEMA_VERSION = re.compile(r"/vega-lite/v(\d+\.\d+)")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# The page's text colour (spec.READABLE_TEXT's currentColor) outside a page: a file has no container to
# inherit a colour from, and a PNG renderer reads currentColor as black anyway; say so explicitly.
FILE_TEXT = "#262730"  # Streamlit's light theme text colour: dark text on the white file background


def file_spec(spec: dict) -> dict:
    """The spec a page draws (`VegaChart.spec()`), as plain JSON with its data inlined, for a file.

    The page sends Arrow tables beside the spec; a converter reads only JSON values. Streamlit's theme
    is not applied (the file keeps Vega's defaults: white background), and currentColor becomes FILE_TEXT.
    """
    datasets = {
        name: rows.to_pylist() if isinstance(rows, pa.Table) else rows
        for name, rows in spec.get("datasets", {}).items()
    }
    spec = {**spec, "datasets": datasets}  # the caller's spec keeps its Arrow tables
    # json round trip: numpy scalars and the like become plain JSON, and no part is shared with the chart
    text = json.dumps(spec, default=str).replace('"currentColor"', json.dumps(FILE_TEXT))
    return json.loads(text)


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
