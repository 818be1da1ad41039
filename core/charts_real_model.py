"""Chart builders for the "Inside a real model" lesson: DataFrame in, Altair chart out.

Colours: viridis on a fixed 0..1 scale for weights (colour-blind safe), as in core.charts.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

GRID_DATA = "real_model_grid"  # the grid's one dataset name (the page sends it as an Arrow table)
HEAD_SELECTION = "head_pick"  # click selection (fields layer, head) on the grid and the measures map
QUERY_HIGHLIGHT = "query_pick"  # click on a query token in the line view (drawn in the browser only)
ZERO_COLOUR = "#440154"  # viridis at 0: the grid's panel background where cells were dropped
_WEIGHT_SCALE = alt.Scale(scheme="viridis", domain=[0, 1])


def head_grid(num_tokens: int, num_layers: int, num_heads: int, panel: int = 54) -> alt.FacetChart:
    """All heads as small heatmaps: one row of panels per layer, one column per head.

    Its data is the named dataset GRID_DATA: layer, head, query_index, key_index, query, key,
    weight (cells under the floor already dropped, see core.real_model_lesson.grid_frame).
    Positions are quantitative with a fixed domain, so a dropped cell leaves the background
    (the colour of 0) in its place.
    A click on a panel selects its (layer, head).
    """
    pick = alt.selection_point(name=HEAD_SELECTION, fields=["layer", "head"], on="click", empty=False)
    domain = [0, num_tokens]
    no_axis = alt.Axis(labels=False, ticks=False, grid=False, title=None, domain=False)
    cells = (
        alt.Chart()
        .mark_rect()
        .transform_calculate(key_end="datum.key_index + 1", query_end="datum.query_index + 1")
        .encode(
            x=alt.X("key_index:Q", scale=alt.Scale(domain=domain, nice=False, zero=True), axis=no_axis),
            x2="key_end:Q",
            y=alt.Y("query_index:Q", scale=alt.Scale(domain=domain, nice=False, reverse=True), axis=no_axis),
            y2="query_end:Q",
            color=alt.Color("weight:Q", scale=_WEIGHT_SCALE, title="weight", legend=alt.Legend(orient="bottom")),
            tooltip=[
                alt.Tooltip("layer:O"),
                alt.Tooltip("head:O"),
                alt.Tooltip("query:N", title="query"),
                alt.Tooltip("key:N", title="key"),
                alt.Tooltip("weight:Q", format=".3f"),
            ],
        )
        .add_params(pick)
        .properties(width=panel, height=panel)
    )
    return (
        cells.facet(
            data=alt.NamedData(name=GRID_DATA),
            row=alt.Row("layer:O", title="layer", sort=list(range(num_layers)), header=alt.Header(labelAngle=0)),
            column=alt.Column("head:O", title="head", sort=list(range(num_heads))),
            spacing=4,
        )
        .configure_view(fill=ZERO_COLOUR, stroke=None)
        .properties(title="Every head of every layer (rows: queries, columns: keys); click one to open it")
    )


def head_grid_to_dict(frame: pd.DataFrame, num_tokens: int, num_layers: int, num_heads: int) -> dict:
    """The grid's full Vega-Lite spec with its values as records (validated by Altair)."""
    spec = head_grid(num_tokens, num_layers, num_heads).to_dict()
    spec["datasets"] = {GRID_DATA: frame.to_dict(orient="records")}
    return spec


def head_lines(lines: pd.DataFrame, tokens: pd.DataFrame, title: str) -> alt.LayerChart:
    """One head as lines from each query (left) to the keys it attends to (right).

    lines: query_index, key_index, query, key, weight. tokens: position, token.
    Thicker, darker lines carry more weight; a click on a token on the left shows only its lines.
    """
    num_tokens = max(len(tokens), 1)
    y_scale = alt.Scale(domain=[-0.5, num_tokens - 0.5], reverse=True, nice=False, zero=False)
    x_scale = alt.Scale(domain=[0, 1], nice=False)
    hidden = alt.Axis(labels=False, ticks=False, grid=False, title=None, domain=False)
    pick = alt.selection_point(name=QUERY_HIGHLIGHT, fields=["query_index"], on="click", empty=True)
    strokes = (
        alt.Chart(lines)
        .mark_rule(strokeCap="round", color="#3b528b")
        .encode(
            x=alt.datum(0.0, scale=x_scale, axis=hidden),
            x2=alt.datum(1.0),
            y=alt.Y("query_index:Q", scale=y_scale, axis=hidden),
            y2="key_index:Q",
            strokeWidth=alt.StrokeWidth("weight:Q", scale=alt.Scale(domain=[0, 1], range=[0.5, 7]), legend=None),
            opacity=alt.condition(
                pick,
                alt.Opacity("weight:Q", scale=alt.Scale(domain=[0, 1], range=[0.25, 1]), legend=None),
                alt.value(0.03),
            ),
            tooltip=[
                alt.Tooltip("query:N", title="query"),
                alt.Tooltip("key:N", title="key"),
                alt.Tooltip("weight:Q", format=".3f"),
            ],
        )
    )
    base = alt.Chart(tokens.rename(columns={"position": "query_index"})).encode(
        y=alt.Y("query_index:Q", scale=y_scale, axis=hidden), text="token:N"
    )
    left = (
        base.mark_text(align="right", dx=-6, fontSize=12)
        .encode(x=alt.datum(0.0, scale=x_scale, axis=hidden), opacity=alt.condition(pick, alt.value(1), alt.value(0.4)))
        .add_params(pick)
    )
    right = base.mark_text(align="left", dx=6, fontSize=12).encode(x=alt.datum(1.0, scale=x_scale, axis=hidden))
    return alt.layer(strokes, left, right).properties(
        title=title, width=260, height=max(120, 20 * num_tokens), padding={"left": 90, "right": 90}
    )


def measure_map(frame: pd.DataFrame, title: str, value_title: str, show_values: bool = True) -> alt.LayerChart:
    """One measure for every head: layer x head cells, coloured by value, clickable like the grid.

    frame: layer, head, value.
    """
    pick = alt.selection_point(name=HEAD_SELECTION, fields=["layer", "head"], on="click", empty=False)
    base = alt.Chart(frame).encode(
        x=alt.X("head:O", title="head", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("layer:O", title="layer"),
    )
    rect = (
        base.mark_rect()
        .encode(
            color=alt.Color("value:Q", scale=alt.Scale(scheme="viridis"), title=value_title),
            stroke=alt.value("#e45756"),
            strokeWidth=alt.condition(pick, alt.value(3), alt.value(0)),
            tooltip=["layer:O", "head:O", alt.Tooltip("value:Q", format=".3f", title=value_title)],
        )
        .add_params(pick)
    )
    layers = [rect]
    if show_values:
        midpoint = float(frame["value"].min() + frame["value"].max()) / 2 if len(frame) else 0.0
        layers.append(
            base.mark_text(fontSize=10).encode(
                text=alt.Text("value:Q", format=".2f"),
                color=alt.condition(alt.datum.value > midpoint, alt.value("black"), alt.value("white")),
            )
        )
    return alt.layer(*layers).properties(title=title, width=alt.Step(46), height=alt.Step(30))
