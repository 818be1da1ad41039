"""The one way a chart reaches the page: `draw`, plus the heatmap helpers the lessons share.

A chart comes from core.charts (pure builders, no streamlit) as one of: a cached template
(a JSON string, never mutated) whose named datasets this run supplies as DataFrames; a ready
Vega-Lite spec (a dict, its datasets inside); or an Altair chart. `draw` turns each into one
st.vega_lite_chart call: Streamlit's theme (light or dark, as the viewer's) with axis and legend
text in the page's text colour, the column's full width, a text description for screen readers,
and every dataset as an Arrow table (which Streamlit sends as it is).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

import altair as alt
import pandas as pd
import pyarrow as pa
import streamlit as st

from core import charts
from core.charts import QUERY_SELECTION

Chart = str | dict | alt.TopLevelMixin  # a template (JSON), a spec, or an Altair chart


def _arrow(rows: object) -> object:
    """A dataset as an Arrow table (records and DataFrames converted; Arrow tables kept)."""
    if isinstance(rows, pd.DataFrame):
        return pa.Table.from_pandas(rows, preserve_index=False)
    if isinstance(rows, list):
        return pa.Table.from_pylist(rows)
    return rows


def draw(
    chart: Chart,
    description: str,
    *,
    data: Mapping[str, pd.DataFrame] | None = None,
    key: str | None = None,
    on_select: Callable[[], None] | None = None,
) -> object:
    """Draw `chart` the house way; `data` fills a template's named datasets.

    Templates are already readable (their builders applied `charts.readable` where they want it);
    specs and Altair charts get it here. Altair charts are serialised without its jsonschema
    validation: tests/unit/test_charts.py validates every builder's spec instead. The caller's
    spec is never changed (a new dict is built).
    """
    if isinstance(chart, str):
        spec = json.loads(chart)
    elif isinstance(chart, dict):
        spec = charts.readable(chart)
    else:
        spec = charts.readable(chart.to_dict(validate=False))
    datasets = {**spec.get("datasets", {}), **(data or {})}
    if datasets:
        spec = {**spec, "datasets": {name: _arrow(rows) for name, rows in datasets.items()}}
    if on_select is None:
        return st.vega_lite_chart(spec=spec, theme="streamlit", width="stretch", alt=description)
    return st.vega_lite_chart(
        spec=spec, theme="streamlit", width="stretch", alt=description, key=key, on_select=on_select
    )


def heatmap(frame, title: str, description: str, *, key: str | None = None, on_select=None, **options) -> object:
    """Draw `core.charts.heatmap_spec(frame, title, **options)`: the one heatmap path.

    Options (see core.charts.heatmap_spec): signed, value_title, show_values, select_rows,
    highlight_row (the query's row, outlined), x_title, y_title, domain (e.g.
    charts.shared_domain(a, b) to put two heatmaps on one colour scale), min_magnitude.
    """
    return draw(charts.heatmap_spec(frame, title, **options), description, key=key, on_select=on_select)


def select_query_from_chart(chart_key: str, target: str) -> None:
    """on_select callback: a click on a heatmap row makes that row the query.

    Runs before the page (outside its error handler), so a selection the chart could not have
    sent (forged: a missing field, a row that is not a number) is ignored, not raised.
    """
    row = _picked(chart_key, QUERY_SELECTION, "row_index")
    if row is not None:
        st.session_state[target] = row["row_index"]


def select_head_from_chart(chart_key: str, selection: str, layer_key: str, head_key: str) -> None:
    """on_select callback: a click on a head's cell or panel makes it the chosen (layer, head)."""
    picked = _picked(chart_key, selection, "layer", "head")
    if picked is not None:
        st.session_state[layer_key], st.session_state[head_key] = picked["layer"], picked["head"]


def _picked(chart_key: str, selection: str, *fields: str) -> dict[str, int] | None:
    """The first point of a chart's selection as whole numbers, or None if it has no such point."""
    try:
        point = st.session_state[chart_key]["selection"][selection][0]
        return {name: int(point[name]) for name in fields}
    except (KeyError, IndexError, TypeError, ValueError, OverflowError):
        return None


def query_weights_heatmap(
    frame, title: str, description: str, *, chart_key: str, picker_key: str, highlight_row: int
) -> object:
    """The attention weights, whose rows a click makes the query of the picker `picker_key`.

    The outlined row is the picker's current query (`highlight_row`), not the last clicked one.
    """
    return heatmap(
        frame,
        title,
        description,
        value_title="weight",
        select_rows=True,
        highlight_row=highlight_row,
        key=chart_key,
        on_select=lambda: select_query_from_chart(chart_key, picker_key),
    )


def grouped_bars(frame: pd.DataFrame, x: str, value: str, group: str, title: str, description: str) -> object:
    """`charts.grouped_bars_template` (built once per look, not per rerun) with this frame's values."""
    template = charts.grouped_bars_template(tuple(dict.fromkeys(frame[x])), x, value, group, title)
    return draw(template, description, data={charts.BARS_DATA: frame})


def leakage_bars(frame: pd.DataFrame, position: int, description: str) -> object:
    """`charts.leakage_template` (built once per sentence and position) with this frame's values."""
    template = charts.leakage_template(tuple(frame["token"]), position)
    return draw(template, description, data={charts.BARS_DATA: frame})
