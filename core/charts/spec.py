"""What every chart builder returns and `ui.draw.draw` draws: a Vega-Lite template and its data.

A template is the chart's JSON with no values in it: built once per look by Altair and cached
(building and serialising an Altair chart costs far more than a rerun's numbers; bench/NOTES.md).
It is a `str`, so nobody can mutate a cached template by accident. The data are the named datasets
it reads, and the slots are the few parts of the spec that follow the values but are not data: a
heatmap's colour domain, its cell-number size, the order of the tokens on an axis. Keeping those
out of the template means a new sentence or a new seed never builds a new one.

No streamlit here: tests call `VegaChart.spec()` for exactly what the page sends.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeAlias, TypedDict

import altair as alt
import pandas as pd
import pyarrow as pa

Dataset: TypeAlias = pd.DataFrame | pa.Table | list[dict]
SpecPath = tuple[str | int, ...]  # keys into the spec, e.g. ("layer", 0, "encoding", "x", "sort")


# Axis and legend text in the page's own text colour: SVG's currentColor is the colour Streamlit's
# theme gives the chart's container (near-black in light, near-white in dark). Streamlit's chart
# theme uses a grey that reaches only 3.8:1 on white, and 12 px labels are too small on a projector.
class TextStyle(TypedDict):
    """Keyword arguments of Altair's configure_axis / configure_legend (typed, so the call is checked)."""

    labelColor: str
    titleColor: str
    labelFontSize: int
    titleFontSize: int


READABLE_TEXT: dict[str, TextStyle] = {
    "axis": {"labelColor": "currentColor", "titleColor": "currentColor", "labelFontSize": 14, "titleFontSize": 14},
    "legend": {"labelColor": "currentColor", "titleColor": "currentColor", "labelFontSize": 14, "titleFontSize": 14},
}


def readable(spec: dict) -> dict:
    """A copy of `spec` with axis and legend text in the page's text colour (its own config wins)."""
    config = dict(spec.get("config", {}))
    for part, style in READABLE_TEXT.items():
        config[part] = {**style, **config.get(part, {})}
    # Streamlit's theme colours the title but not a subtitle, which Vega draws near-black: unreadable on the dark
    # theme (lesson 10's map of all heads, an independent review).
    config["title"] = {"subtitleColor": "currentColor", **config.get("title", {})}
    return {**spec, "config": config}


def as_arrow(rows: Dataset) -> pa.Table:
    """A dataset as an Arrow table, which Streamlit sends as it is (records and DataFrames converted)."""
    if isinstance(rows, pd.DataFrame):
        return pa.Table.from_pandas(rows, preserve_index=False)
    if isinstance(rows, list):
        return pa.Table.from_pylist(rows)
    return rows


@dataclass(frozen=True)
class VegaChart:
    """A chart as a page draws it: `spec()` is the Vega-Lite spec handed to st.vega_lite_chart."""

    template: str  # Vega-Lite JSON without values, cached per look (never parsed in place)
    data: Mapping[str, Dataset]  # the named datasets the template reads
    slots: Mapping[SpecPath, object] = field(default_factory=dict)  # written into the template's copy

    def spec(self) -> dict:
        """A fresh spec: the template, its slots filled, its datasets as Arrow tables."""
        spec = json.loads(self.template)
        for path, value in self.slots.items():
            *parents, last = path
            node = spec
            for key in parents:
                node = node[key]
            node[last] = copy.deepcopy(value)  # a caller may change its spec; the chart stays as it was
        spec["datasets"] = {name: as_arrow(rows) for name, rows in self.data.items()}
        return spec


def template(chart: alt.TopLevelMixin, *, make_readable: bool = True) -> str:
    """An Altair chart whose data are named datasets, as a template.

    Serialised without Altair's jsonschema validation (the costly part): tests/app/test_charts.py
    validates every builder's spec against the Vega-Lite schema instead.
    """
    spec = chart.to_dict(validate=False)
    return json.dumps(readable(spec) if make_readable else spec)


def from_altair(chart: alt.TopLevelMixin) -> VegaChart:
    """A chart built with its data inline (one that is built once and cached, not per rerun) as a
    template and the datasets Altair named for it."""
    spec = readable(chart.to_dict(validate=False))
    data = spec.pop("datasets", {})
    return VegaChart(json.dumps(spec), data)


def has_colour_ramp(node: object) -> bool:
    """Whether a spec (or any part of it) draws a colour ramp: a quantitative colour channel whose legend is shown.

    Vega's SVG renderer paints the ramp with `url(<address at draw time>#gradient_N)`; once the address bar
    changes (a presentation step, a setting bound to the link), Chromium reads that as another document's
    gradient and paints nothing. `ui.draw.draw` redraws such charts when the address changes.
    """
    if isinstance(node, list):
        return any(has_colour_ramp(item) for item in node)
    if not isinstance(node, dict):
        return False
    colour = node.get("color")
    if isinstance(colour, dict) and _quantitative(colour) and colour.get("legend", {}) is not None:
        return True
    return any(has_colour_ramp(value) for key, value in node.items() if key not in ("datasets", "data"))


def _quantitative(channel: dict) -> bool:
    """A colour channel on a quantitative field, itself or inside its condition (alt.condition puts it either way)."""
    condition = channel.get("condition")
    inner = condition if isinstance(condition, dict) else {}
    return channel.get("type") == "quantitative" or inner.get("type") == "quantitative"


# A saved chart's file name (ui/draw.py's Save for slides; the files are made by core/charts/export.py).
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
MAX_NAME = 150  # characters: well within every file system's limit


def download_name(page: str, title: str, settings: Mapping[str, str]) -> str:
    """A file name for a saved chart that says what it shows: the lab, the page, the chart, the settings.

    "attention-lab_why_scale_peakiness_multiplier-16_seed-7": a teacher's slides keep where a figure came from.
    Only letters, digits, dot, dash and underscore survive, whatever a setting (a student's sentence) holds.
    """
    parts = ["attention-lab", page, title, *(f"{key}-{value}" for key, value in sorted(settings.items()))]
    cleaned = [_UNSAFE.sub("-", part).strip("-") for part in parts]
    return "_".join(part for part in cleaned if part)[:MAX_NAME]


# A hint for the page's reader ("; click one to open it") means nothing in a saved file or its name.
_CLICK_HINT = re.compile(r"[;,]\s*click (one|a head)\b.*$")


def slide_title(text: str) -> str:
    """A chart's title for a saved file: without the page's click hint."""
    return _CLICK_HINT.sub("", text)


PHONE_TITLE_CHARS = 36  # about what a 390-px phone's chart shows of a title before Vega cuts it with "…"


def phone_title(title: str, limit: int = PHONE_TITLE_CHARS) -> str | list[str]:
    """A title a phone shows whole: as it is when short, else two lines split at the space nearest the middle.

    Vega cuts a title wider than its chart with "…" (lessons 1, 4, 9 and 10 on a phone); a list is drawn one
    line under the other.
    """
    if len(title) <= limit or " " not in title:
        return title
    spaces = [i for i, char in enumerate(title) if char == " "]
    middle = min(spaces, key=lambda i: abs(i - len(title) / 2))
    return [title[:middle], title[middle + 1 :]]


def chart_title(spec: dict) -> str:
    """The chart's own title as plain text ("chart" if it has none): the first layer's or the top's."""
    title = spec.get("title") or next((layer.get("title") for layer in spec.get("layer", []) if layer.get("title")), "")
    if isinstance(title, dict):
        title = title.get("text", "")
    if isinstance(title, list):
        title = " ".join(map(str, title))
    return slide_title(str(title)) or "chart"
