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
