"""Chart builders for the "Inside a real model" lesson: DataFrames in, `VegaChart` out.

Each chart reads named datasets, so its structure depends only on a few sizes: its template is
built once per look with Altair (bench/NOTES.md) and kept as JSON; each rerun brings only its data
(core.charts.spec). The tests validate each chart with its data against the Vega-Lite schema.

Colours: viridis on a fixed 0..1 scale for weights (colour-blind safe), as in core.charts.colours; a measure map
of a signed quantity (lesson 11's effects and shares) is blue-orange, centred at 0.
"""

from __future__ import annotations

import functools
from typing import Any, cast

import altair as alt
import pandas as pd

from core.charts.colours import BLUE_ORANGE, text_switches
from core.charts.heatmap import LEGEND_FORMAT, _domain_stops, cell_font_expr, legend_format, legend_values
from core.charts.spec import SpecPath, VegaChart, phone_title, template

GRID_DATA = "real_model_grid"  # layer, head, query_index, key_index, query, key, weight, chosen
LINES_DATA = "real_model_lines"  # query_index, key_index, query, key, weight
TOKENS_DATA = "real_model_tokens"  # query_index, token
MEASURE_DATA = "real_model_measure"  # layer, head, value, chosen
HEAD_SELECTION = "head_pick"  # click selection (fields layer, head) on the grid and the measures map
QUERY_HIGHLIGHT = "query_pick"  # click on a query token in the line view (drawn in the browser only)
ZERO_COLOUR = "#440154"  # viridis at 0: the grid's panel background where cells were dropped
CHOSEN_COLOUR = "#e45756"  # the outline of the chosen head
MEASURE_LABEL_CHARS = 5  # the widest number a measure map prints: "12.34" (format .2f)
_WEIGHT_SCALE = alt.Scale(scheme="viridis", domain=[0, 1])
_NO_AXIS = alt.Axis(labels=False, ticks=False, grid=False, title=None, domain=False)


def head_grid(num_tokens: int, num_layers: int, num_heads: int, panel: int = 54) -> alt.FacetChart:
    """All heads as small heatmaps: one row of panels per layer, one column per head.

    Data: GRID_DATA (see core.lessons.real_model_frames.grid_frame; cells under the floor dropped).
    Positions are quantitative with a fixed domain, so a dropped cell leaves the background
    (the colour of 0) in its place. The chosen head (rows with chosen = true) gets an outline;
    a click on a panel selects its (layer, head).
    """
    pick = alt.selection_point(name=HEAD_SELECTION, fields=["layer", "head"], on="click", empty=False)
    x_scale = alt.Scale(domain=[0, num_tokens], nice=False, zero=True)
    y_scale = alt.Scale(domain=[0, num_tokens], nice=False, reverse=True)
    cells = (
        alt.Chart()
        .mark_rect()  # each cell keeps its ARIA label (layer, head, query, key, weight): the browser test clicks by it
        .transform_calculate(key_end="datum.key_index + 1", query_end="datum.query_index + 1")
        .encode(
            x=alt.X("key_index:Q", scale=x_scale, axis=_NO_AXIS),
            x2="key_end:Q",
            y=alt.Y("query_index:Q", scale=y_scale, axis=_NO_AXIS),
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
    )
    outline = (
        alt.Chart()
        .transform_filter("datum.chosen")
        .transform_aggregate(cells="count()", groupby=["layer", "head"])
        # The outline is decoration: without ARIA it is no unlabelled image to a screen reader (axe svg-img-alt).
        .mark_rect(fillOpacity=0, stroke=CHOSEN_COLOUR, strokeWidth=4, aria=False)
        .encode(
            x=alt.datum(0, scale=x_scale, axis=_NO_AXIS),
            x2=alt.datum(num_tokens),
            y=alt.datum(0, scale=y_scale, axis=_NO_AXIS),
            y2=alt.datum(num_tokens),
        )
    )
    return (
        alt.layer(cells, outline)
        .properties(width=panel, height=panel)
        .facet(
            data=alt.NamedData(name=GRID_DATA),
            row=alt.Row("layer:O", title="layer", sort=list(range(num_layers)), header=alt.Header(labelAngle=0)),
            column=alt.Column("head:O", title="head", sort=list(range(num_heads))),
            spacing=4,
        )
        .configure_view(fill=ZERO_COLOUR, stroke=None)
        .properties(title="Every head of every layer (rows: queries, columns: keys); click one to open it")
    )


def label_padding(label_chars: int) -> int:
    """Room beside the lines for word pieces of `label_chars` characters at 14 px (~8.5 px a character)."""
    return int(8.5 * max(label_chars, 3)) + 12


LINE_ROW_PX = 30  # height per word piece in the lines chart: a row a finger or a projector pointer can hit
LINE_TARGET_PX = 60  # how far a row's click target reaches left of the lines


def head_lines(num_tokens: int, title: str, label_chars: int = 10) -> alt.LayerChart:
    """One head as lines from each query (left) to the keys it attends to (right).

    Data: LINES_DATA (one row per line) and TOKENS_DATA (the labels down both sides).
    Thicker, more opaque lines carry more weight; a click on a token on the left shows only its lines.
    The labels leave exactly the room the longest piece needs (`label_chars`): a fixed 90 px each
    side left the lines about 30 px wide in a narrow column. Labels and title are drawn in the
    page's text colour (currentColor), so they stay readable in dark mode. The lines take the
    first colour of the theme's category palette (one constant category, no legend), which
    Streamlit's theme sets per light or dark: a dark blue on white, a light blue on black. A fixed
    viridis blue (#3b528b) reached only 2.5:1 on the dark background, and its thin lines all but
    vanished (a rule ignores the theme's `mark.color`: Vega-Lite's own default draws it black).
    """
    num_tokens = max(num_tokens, 1)
    y_scale = alt.Scale(domain=[-0.5, num_tokens - 0.5], reverse=True, nice=False, zero=False)
    x_scale = alt.Scale(domain=[0, 1], nice=False)
    pick = alt.selection_point(name=QUERY_HIGHLIGHT, fields=["query_index"], on="click", empty=True)
    weight_opacity = alt.Opacity("weight:Q", scale=alt.Scale(domain=[0, 1], range=[0.25, 1]), legend=None)
    strokes = (
        alt.Chart(alt.NamedData(name=LINES_DATA))
        .mark_rule(strokeCap="round")
        .transform_calculate(line_colour="'weight'")  # one category: the theme's first colour (see above)
        .encode(
            color=alt.Color("line_colour:N", legend=None),
            x=alt.datum(0.0, scale=x_scale, axis=_NO_AXIS),
            x2=alt.datum(1.0),
            y=alt.Y("query_index:Q", scale=y_scale, axis=_NO_AXIS),
            y2="key_index:Q",
            strokeWidth=alt.StrokeWidth("weight:Q", scale=alt.Scale(domain=[0, 1], range=[0.5, 7]), legend=None),
            opacity=alt.condition(pick, weight_opacity, alt.value(0.03)),
            tooltip=[
                alt.Tooltip("query:N", title="query"),
                alt.Tooltip("key:N", title="key"),
                alt.Tooltip("weight:Q", format=".3f"),
            ],
        )
    )
    # Every mark names its own tooltip: with none, Streamlit's default tooltip listed raw fields ("query_index").
    piece = [alt.Tooltip("token:N", title="word piece")]
    labels = alt.Chart(alt.NamedData(name=TOKENS_DATA)).encode(
        y=alt.Y("query_index:Q", scale=y_scale, axis=_NO_AXIS), text="token:N", tooltip=piece
    )
    # The click target: a wide, nearly invisible bar over each query's row on the left (the text alone
    # was a target a few pixels tall); the query's label dims the others once picked.
    targets = (
        alt.Chart(alt.NamedData(name=TOKENS_DATA))
        .mark_tick(
            orient="horizontal",
            thickness=LINE_ROW_PX - 4,
            size=LINE_TARGET_PX,
            xOffset=-LINE_TARGET_PX // 2,
            opacity=0.001,
            cursor="pointer",
        )
        .encode(
            x=alt.datum(0.0, scale=x_scale, axis=_NO_AXIS),
            y=alt.Y("query_index:Q", scale=y_scale, axis=_NO_AXIS),
            tooltip=[alt.Tooltip("token:N", title="click to follow")],
        )
        .add_params(pick)
    )
    left = labels.mark_text(align="right", dx=-6, fontSize=15, color="currentColor", cursor="pointer").encode(
        x=alt.datum(0.0, scale=x_scale, axis=_NO_AXIS),
        opacity=alt.condition(pick, alt.value(1), alt.value(0.4)),
    )
    right = labels.mark_text(align="left", dx=6, fontSize=15, color="currentColor").encode(
        x=alt.datum(1.0, scale=x_scale, axis=_NO_AXIS)
    )
    pad = label_padding(label_chars)
    # cast: alt.layer() returns a FacetChart only for layers with shared facet channels (none here).
    return cast(alt.LayerChart, alt.layer(strokes, targets, left, right)).properties(
        title=alt.TitleParams(title, color="currentColor"),
        width=260,
        height=max(320, LINE_ROW_PX * num_tokens),  # about 240 px before: too small to aim at on a projector
        padding={"left": pad, "right": pad},
    )


# On a signed map black text reads better between these fractions of the blue-orange scale (its light middle),
# white outside them (its dark ends): computed from the scale's own stops, as the heatmaps pick each cell's.
SIGNED_DARK_TEXT = text_switches(BLUE_ORANGE)  # (from, until): about (0.105, 0.936)


def signed_title(value_title: str) -> str:
    """A signed map's legend title: the colour is the value with its sign, not a size."""
    return f"{value_title}, signed (blue −, orange +)"


LAYERS_ACROSS_ROW_PX = 24  # a map with the layers across: 9 rows of this, the whole model in ~300 px
# The legend under the map, which then has a phone's whole width
_LEGEND_UNDER: dict[str, Any] = {"orient": "bottom", "direction": "horizontal", "titleLimit": 320}


def measure_map(title: str, value_title: str, signed: bool = False, layers_across: bool = False) -> alt.LayerChart:
    """One measure for every head: layer x head cells with their values, clickable like the grid.

    Data: MEASURE_DATA (layer, head, value, chosen); the chosen head is outlined. signed: a diverging
    blue-orange scale centred at 0 (symmetric, ±the largest |value|), so a head's sign shows at a glance;
    otherwise viridis over the data's range. layers_across: layers along x and heads down, rows
    LAYERS_ACROSS_ROW_PX tall, so 30 x 9 fits a projector's screen (layers down it was 1,019 px tall, an
    independent review); its cells are too narrow for numbers, which the tooltip and the page's text give.
    """
    pick = alt.selection_point(name=HEAD_SELECTION, fields=["layer", "head"], on="click", empty=False)
    if layers_across:  # labelOverlap: every second layer label where they crowd (a phone's 11-px columns)
        x = alt.X("layer:O", title="layer", axis=alt.Axis(labelAngle=0, labelOverlap=True))
        y = alt.Y("head:O", title="head")
    else:
        x, y = alt.X("head:O", title="head", axis=alt.Axis(labelAngle=0)), alt.Y("layer:O", title="layer")
    base = alt.Chart(alt.NamedData(name=MEASURE_DATA)).encode(x=x, y=y)
    # A signed map's stops are explicit (Vega's "rgb" interpolation between them), so Python knows each cell's
    # colour and the text switches below hold; its domain slot gets one value per stop (`measure`).
    scale = (
        alt.Scale(domain=_domain_stops((-1.0, 1.0), BLUE_ORANGE), range=list(BLUE_ORANGE), interpolate="rgb")
        if signed
        else alt.Scale(scheme="viridis", domain=[0, 1])
    )
    rect = (
        base.mark_rect(stroke=CHOSEN_COLOUR, aria=False)
        .encode(
            # The domain and the legend's labels are slots (`measure`): the data's own range, both ends labelled
            # (Vega's ticks stopped at 0.8 on maps reaching 0.93-1.00).
            color=alt.Color(
                "value:Q",
                scale=scale,
                title=signed_title(value_title) if signed else value_title,
                # Under the map either way: on the right, its title took 250 of a phone's 350 px and left
                # layers-down heads a 90-px strip (the s19 review of lesson 11).
                legend=alt.Legend(values=[0, 1], format=LEGEND_FORMAT, **_LEGEND_UNDER),
            ),
            strokeWidth=alt.condition("datum.chosen", alt.value(3), alt.value(0)),
            tooltip=["layer:O", "head:O", alt.Tooltip("value:Q", format=".3f", title=value_title)],
        )
        .add_params(pick)
    )
    # Dark text on light cells. On viridis, black and white text contrast equally (about 4.6:1) at
    # 43.5% of the scale (colours.VIRIDIS; at 45%, as this said before, white on the teal cell rgb(37, 132, 142)
    # reads 4.4:1, which lesson 11's map was the first to hit); the range comes from the data, so the spec
    # stays the same. A signed map's scale runs from -m to m (m: the largest |value|), light in the middle.
    if signed:
        start, stop = SIGNED_DARK_TEXT
        m = "max(abs(datum.low), abs(datum.high))"
        dark = f"datum.value >= -{m} + {start:.5f} * 2 * {m} && datum.value < -{m} + {stop:.5f} * 2 * {m}"
    else:
        dark = "datum.value >= datum.low + 0.435 * (datum.high - datum.low)"
    # The numbers fit their cells or are hidden (as the heatmaps' do): at a fixed 14 px they
    # overlapped on a phone, where twelve heads share 350 px.
    font = cell_font_expr(MEASURE_LABEL_CHARS)
    text = (
        base.transform_joinaggregate(low="min(value)", high="max(value)")
        .mark_text(fontSize=alt.ExprRef(font), opacity=alt.ExprRef(f"({font}) > 0 ? 1 : 0"))
        .encode(
            text=alt.Text("value:Q", format=".2f"),
            color=alt.condition(dark, alt.value("black"), alt.value("white")),
        )
    )
    layered = cast(alt.LayerChart, alt.layer(rect, text))  # no facet channels, so alt.layer() built a LayerChart
    if layers_across:  # in two lines where long: a phone following the teacher shows the title whole
        return layered.properties(title=phone_title(title), width="container", height=alt.Step(LAYERS_ACROSS_ROW_PX))
    return layered.properties(title=title, width="container", height=alt.Step(30))


@functools.lru_cache(maxsize=128)
def _grid_template(num_tokens: int, num_layers: int, num_heads: int) -> str:
    return template(head_grid(num_tokens, num_layers, num_heads), make_readable=False)


def grid(frame: pd.DataFrame, num_tokens: int, num_layers: int, num_heads: int) -> VegaChart:
    """Every head's weights as small heatmaps (GRID_DATA = `frame`); the template is built once per size."""
    return VegaChart(_grid_template(num_tokens, num_layers, num_heads), {GRID_DATA: frame})


@functools.lru_cache(maxsize=256)
def _lines_template(num_tokens: int, title: str, label_chars: int) -> str:
    return template(head_lines(num_tokens, title, label_chars), make_readable=False)


def lines(lines_frame: pd.DataFrame, tokens_frame: pd.DataFrame, title: str, label_chars: int = 10) -> VegaChart:
    """One head as lines from each query to its keys (LINES_DATA, TOKENS_DATA: one row per token)."""
    cached = _lines_template(len(tokens_frame), title, label_chars)
    return VegaChart(cached, {LINES_DATA: lines_frame, TOKENS_DATA: tokens_frame})


@functools.lru_cache(maxsize=32)
def _measure_template(title: str, value_title: str, signed: bool, layers_across: bool) -> str:
    return template(measure_map(title, value_title, signed, layers_across), make_readable=False)


MEASURE_DOMAIN: SpecPath = ("layer", 0, "encoding", "color", "scale", "domain")
MEASURE_LEGEND: SpecPath = ("layer", 0, "encoding", "color", "legend", "values")
MEASURE_LEGEND_FORMAT: SpecPath = ("layer", 0, "encoding", "color", "legend", "format")


def measure(
    frame: pd.DataFrame, title: str, value_title: str, signed: bool = False, layers_across: bool = False
) -> VegaChart:
    """One measure of every head as a layers × heads map (MEASURE_DATA = `frame`), coloured over its own range:
    viridis from its lowest to its highest value, or (signed) blue-orange from -m to m, m its largest |value|."""
    low, high = float(frame["value"].min()), float(frame["value"].max())
    if signed:
        m = max(abs(low), abs(high)) or 1.0  # all zeros: any symmetric scale puts them in the light middle
        domain = (-m, m)
        stops: list[float] = _domain_stops(domain, BLUE_ORANGE)
    else:
        domain = (low, high) if high > low else (low, low + 1.0)
        stops = list(domain)
    return VegaChart(
        _measure_template(title, value_title, signed, layers_across),
        {MEASURE_DATA: frame},
        {
            MEASURE_DOMAIN: stops,
            MEASURE_LEGEND: legend_values(domain, signed=signed),
            MEASURE_LEGEND_FORMAT: legend_format(domain),
        },
    )
