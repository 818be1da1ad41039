"""Chart builders for "Inside a GPT": DataFrames in, `VegaChart` out (templates built once per look).

The all-heads overview has its own builder (`heads_overview`: each head a small map of blocks, so that
its message stays small at 64 tokens), with the click selection of the real encoder's grid; the chosen
layer's heads are core.charts.heads' panels, and the per-head measure maps the encoder's
(core.charts.real_model.measure).
"""

from __future__ import annotations

import functools

import altair as alt
import pandas as pd

from core.charts.colours import BLUE_ORANGE, INDUCTION_DOT, LEGEND_SYMBOL, MASKED_COLOUR
from core.charts.common import GROWS_FOR_TEXT, PLOT_HEIGHT
from core.charts.heads import panel_width, weights_colour
from core.charts.real_model import CHOSEN_COLOUR, HEAD_SELECTION
from core.charts.spec import VegaChart, phone_title, template

PROBABILITY_DATA = "gpt_probabilities"  # token, stage, probability, rank
ROW_DATA = "gpt_row"  # token, position, weight
GROUP_DATA = "gpt_groups"  # layer, head, group, value
TIMING_DATA = "gpt_timing"  # length, run, ms
ROPE_DATA = "gpt_rope"  # distance, score, positions, start
OVERVIEW_DATA = "gpt_overview"  # layer, head, query_block, key_block, share
OVERVIEW_HEADS_DATA = "gpt_overview_heads"  # layer, head, sink, previous, chosen
OVERVIEW_TITLE = "Every head of every layer, in blocks of positions; click one to open it"
OVERVIEW_STEP_PX = 18  # a head's square: 30 layers across fit a laptop's column, and shrink to a phone's
SAMPLING_TITLE = "The next token: before and after temperature, top-k and top-p"
MODEL_STAGE = "the model"  # PROBABILITY_DATA's stages, in the legend's order (short: a phone's legend cut longer ones)
DRAWN_STAGE = "drawn from"
ROPE_TITLE = "One query and one key at every distance, the key at two places"
MODEL_VIEW_DATA = "gpt_model_view"  # layer, head, key, key_index, value
MODEL_VIEW_ROW_PX = 6  # a layer's row in each head's panel: 30 layers in 180 px
PAIR_DATA = "gpt_pair"  # row, order, label, dimension, value, scaled
PAIR_ROW_PX = 34  # one of the pair view's three rows: the whole chart stays under a projector's fold


@functools.cache
def _probability_template(token_px: int | None) -> str:
    chart = (
        alt.Chart(alt.NamedData(name=PROBABILITY_DATA))
        .mark_bar()
        .encode(
            y=alt.Y("token:N", sort=alt.SortField("rank"), title=None),
            x=alt.X("probability:Q", title="probability", axis=alt.Axis(format="%")),
            # On a projector the legend stands beside the bars: under them it fell below a 720 px screen.
            color=alt.Color(
                "stage:N",
                title=None,
                sort=[MODEL_STAGE, DRAWN_STAGE],
                legend=alt.Legend(orient="bottom" if token_px is None else "top-right"),
            ),
            yOffset=alt.YOffset("stage:N", sort=[MODEL_STAGE, DRAWN_STAGE]),
            tooltip=["token:N", "stage:N", alt.Tooltip("probability:Q", format=".3f")],
        )
        .properties(title=phone_title(SAMPLING_TITLE), width="container")
    )
    if token_px is None:
        return template(chart)
    # A step for each token's pair of bars ("for": "position"): a plain height squeezed the pairs to one band.
    return template(chart.properties(height=alt.Step(token_px, **{"for": "position"})))


PROJECTOR_TOKEN_PX = 22  # each token's pair of bars on a projector: ten tokens under the sampling controls


def probabilities(frame: pd.DataFrame, *, projector: bool = False) -> VegaChart:
    """The ten most probable next tokens, the model's probability and what is left to draw from, a pair of bars
    each. `projector`: PROJECTOR_TOKEN_PX a token, under the controls that change them (the s28 review: at their
    own height they ran from 492 to 1,235 px of 720, three of ten bars showing)."""
    return VegaChart(_probability_template(PROJECTOR_TOKEN_PX if projector else None), {PROBABILITY_DATA: frame})


@functools.lru_cache(maxsize=16)
def _overview_template(num_layers: int, num_heads: int, blocks: int) -> str:
    """Layers across, heads down (a wide, low map); inside each head's square its blocks, queries down and keys
    across, over the masked colour (the blocks wholly in the future are not sent).

    The heads' squares (OVERVIEW_HEADS_DATA) lie under the blocks and take the click: the blocks have no
    selection, so Vega-Lite makes them non-interactive and a click anywhere on a head selects its (layer,
    head), as on the real encoder's grid; hovering shows the head's two measures. Drawn as SVG, which
    Streamlit's default would not be for ~10,000 marks (canvas): each head is a labelled element, for a
    screen reader (the blocks are not: 9,720 of them) and for the browser test that clicks one.
    """
    pick = alt.selection_point(name=HEAD_SELECTION, fields=["layer", "head"], on="click", empty=False)
    x = alt.X(
        "layer:O",
        title="layer",
        sort=list(range(num_layers)),
        scale=alt.Scale(domain=list(range(num_layers)), paddingInner=0.15, paddingOuter=0.05),
        axis=alt.Axis(labelAngle=0, ticks=False, domain=False),
    )
    y = alt.Y(
        "head:O",
        title="head",
        sort=list(range(num_heads)),
        scale=alt.Scale(domain=list(range(num_heads)), paddingInner=0.15, paddingOuter=0.05),
        axis=alt.Axis(ticks=False, domain=False, labelOverlap=False),  # all nine heads named
    )
    heads = alt.Chart(alt.NamedData(name=OVERVIEW_HEADS_DATA)).encode(x=x, y=y)
    squares = (
        heads.mark_rect(color=MASKED_COLOUR, cursor="pointer", aria=True)
        .encode(
            tooltip=[
                alt.Tooltip("layer:O"),
                alt.Tooltip("head:O"),
                alt.Tooltip("sink:Q", title="sink share", format=".2f"),
                alt.Tooltip("previous:Q", title="previous-token score", format=".2f"),
            ]
        )
        .add_params(pick)
    )
    in_block = alt.Scale(domain=list(range(blocks)), paddingInner=0, paddingOuter=0)
    blocks_drawn = (
        alt.Chart(alt.NamedData(name=OVERVIEW_DATA))
        .mark_rect(aria=False)
        .encode(
            x=x,
            xOffset=alt.XOffset("key_block:O", scale=in_block),
            y=y,
            yOffset=alt.YOffset("query_block:O", scale=in_block),
            color=weights_colour("share", "weight on those keys (grey: masked future)"),
        )
    )
    outline = (
        heads.transform_filter("datum.chosen")
        # Decoration: without ARIA it is no unlabelled image to a screen reader (axe svg-img-alt).
        .mark_rect(fillOpacity=0, stroke=CHOSEN_COLOUR, strokeWidth=3, aria=False)
    )
    chart = alt.layer(squares, blocks_drawn, outline).properties(
        title=alt.Title(OVERVIEW_TITLE, subtitle="in each head: queries down, keys across, as in the maps below"),
        # The step of a whole head (`for: position`); without it Vega-Lite gives each block the step.
        width=alt.Step(OVERVIEW_STEP_PX, **{"for": "position"}),
        height=alt.Step(OVERVIEW_STEP_PX, **{"for": "position"}),
        usermeta={"embedOptions": {"renderer": "svg"}},
    )
    return template(chart)


def heads_overview(blocks: pd.DataFrame, heads: pd.DataFrame, num_layers: int, num_heads: int) -> VegaChart:
    """Every head as a small map of blocks (OVERVIEW_DATA = `blocks`: core.lessons.inside_gpt_frames.overview_frame)
    over one clickable square a head (OVERVIEW_HEADS_DATA = `heads`: overview_heads_frame); the template is
    built once per number of blocks."""
    size = int(blocks["query_block"].max()) + 1
    return VegaChart(
        _overview_template(num_layers, num_heads, size), {OVERVIEW_DATA: blocks, OVERVIEW_HEADS_DATA: heads}
    )


@functools.lru_cache(maxsize=128)
def _model_view_template(num_keys: int, title: str, columns: int) -> str:
    """Each head a panel: layers down, the keys the query sees across, viridis on 0..1 shared by every panel."""
    colour = weights_colour("value", "weight (one scale for every head)")
    cells = (
        alt.Chart()
        .mark_rect()
        .encode(
            x=alt.X(
                "key:N",
                sort=alt.EncodingSortField("key_index"),
                axis=alt.Axis(labelAngle=-90, labelLimit=70, labelOverlap="greedy", title=None),
            ),
            y=alt.Y("layer:O", title="layer", axis=alt.Axis(labelOverlap="greedy")),
            color=colour,
            tooltip=["head:N", "layer:O", "key:N", alt.Tooltip("value:Q", title="weight", format=".3f")],
        )
        .properties(width=panel_width(num_keys), height=alt.Step(MODEL_VIEW_ROW_PX))
    )
    chart = (
        cells.facet(
            data=alt.NamedData(name=MODEL_VIEW_DATA),
            facet=alt.Facet("head:N", title=None, header=alt.Header(labelFontSize=15)),
            columns=columns,
            spacing=12,
        )
        .resolve_scale(x="shared", y="shared", color="shared")
        .properties(title=phone_title(title), usermeta={"embedOptions": {"renderer": "svg"}})
    )
    return template(chart)


def model_view(frame: pd.DataFrame, title: str, columns: int) -> VegaChart:
    """One query's row in every head (MODEL_VIEW_DATA = frame, core/lessons/inside_gpt_frames.model_view_frame):
    a panel per head, `columns` a row (a decoder's group size: one row per key/value head)."""
    return VegaChart(_model_view_template(int(frame["key_index"].max()) + 1, title, columns), {MODEL_VIEW_DATA: frame})


@functools.lru_cache(maxsize=16)
def _row_template(title: str) -> str:
    chart = (
        alt.Chart(alt.NamedData(name=ROW_DATA))
        .mark_bar()
        .encode(
            x=alt.X("token:N", sort=alt.SortField("position"), title=None, axis=alt.Axis(labelAngle=-60)),
            y=alt.Y("weight:Q", title="weight", scale=alt.Scale(domain=[0, 1])),
            tooltip=["token:N", alt.Tooltip("weight:Q", format=".3f")],
        )
        .properties(title=phone_title(title), width="container")
    )
    return template(chart)


def attention_row(frame: pd.DataFrame, title: str) -> VegaChart:
    return VegaChart(_row_template(title), {ROW_DATA: frame})


@functools.cache
def _group_template(marked: bool) -> str:
    """`marked`: a dot on each head sized by its induction score (only once the induction question is answered:
    before that an "induction score" legend would stand for a measure not yet out). The cells keep their full
    colour: fading them by a score that is near 0 for most heads left the map nearly blank (a reviewer's find)."""
    base = alt.Chart(alt.NamedData(name=GROUP_DATA)).encode(
        x=alt.X("head:O", title="query head", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("layer:O", title="layer"),
    )
    rect = base.mark_rect(stroke="white", strokeWidth=0.5).encode(
        color=alt.Color("group:N", title="reads", scale=alt.Scale(scheme="set2")),
        tooltip=["layer:O", "head:O", "group:N"],
    )
    layers: alt.Chart | alt.LayerChart | alt.FacetChart = rect
    if marked:
        dots = base.mark_circle(color=INDUCTION_DOT, opacity=1).encode(
            size=alt.Size(
                "value:Q",
                title="induction score",
                scale=alt.Scale(domain=[0, 1], range=[0, 180]),
                # Vega's default symbols are black: unseen on the dark theme (a reviewer's find).
                legend=alt.Legend(symbolFillColor=LEGEND_SYMBOL, symbolStrokeColor=LEGEND_SYMBOL),
            ),
            tooltip=["layer:O", "head:O", "group:N", alt.Tooltip("value:Q", format=".2f", title="induction score")],
        )
        layers = alt.layer(rect, dots)
    return template(
        layers.properties(
            title=phone_title("Query heads coloured by the key/value head they read"),
            width="container",
            height=alt.Step(16),
        )
    )


def groups(frame: pd.DataFrame, marked: bool) -> VegaChart:
    return VegaChart(_group_template(marked), {GROUP_DATA: frame})


@functools.cache
def _timing_template() -> str:
    chart = (
        alt.Chart(alt.NamedData(name=TIMING_DATA))
        .mark_line(point=True)
        .encode(
            # Whole tokens on the axis ("37.5 tokens" was drawn), and the runs' names in full under the chart.
            x=alt.X(
                "length:Q", title="tokens so far", scale=alt.Scale(zero=False), axis=alt.Axis(format="d", tickMinStep=1)
            ),
            y=alt.Y("ms:Q", title="ms per new token"),
            color=alt.Color("run:N", title=None, legend=alt.Legend(orient="bottom", labelLimit=0, columns=1)),
            tooltip=["run:N", "length:Q", alt.Tooltip("ms:Q", format=".1f")],
        )
        .properties(
            title=phone_title("Time per generated token, measured on this server"),
            width="container",
            height=PLOT_HEIGHT,
            autosize=GROWS_FOR_TEXT,
        )
    )
    return template(chart)


def timing(frame: pd.DataFrame) -> VegaChart:
    return VegaChart(_timing_template(), {TIMING_DATA: frame})


@functools.cache
def _rope_template() -> str:
    chart = (
        alt.Chart(alt.NamedData(name=ROPE_DATA))
        .mark_line()
        .encode(
            x=alt.X("distance:Q", title="distance i − j (query after key)"),
            y=alt.Y("score:Q", title="score q · k", scale=alt.Scale(zero=False)),
            # Two hues far apart (not two blues): the ways positions enter are the chart's point.
            # Each legend one entry a line: side by side in rows, the two ran off a phone's right edge.
            color=alt.Color(
                "positions:N", title=None, legend=alt.Legend(orient="bottom", columns=1), scale=alt.Scale(scheme="set1")
            ),
            strokeDash=alt.StrokeDash("start:N", title=None, legend=alt.Legend(orient="bottom", columns=1)),
            tooltip=["positions:N", "start:N", "distance:Q", alt.Tooltip("score:Q", format=".3f")],
        )
        # The plot keeps its height and the view grows for the two legends, one entry a line: in a fixed
        # total height they squeezed the lines to nothing (the browser display test).
        .properties(title=phone_title(ROPE_TITLE), width="container", height=PLOT_HEIGHT, autosize=GROWS_FOR_TEXT)
    )
    return template(chart)


def rope_curves(frame: pd.DataFrame) -> VegaChart:
    return VegaChart(_rope_template(), {ROPE_DATA: frame})


@functools.cache
def _pair_template() -> str:
    """The pair view (BertViz's neuron view): three rows of d cells, each row coloured on its own scale."""
    chart = (
        alt.Chart(alt.NamedData(name=PAIR_DATA))
        .mark_rect(stroke="white", strokeWidth=0.3)
        .encode(
            x=alt.X("dimension:O", title="dimension", axis=alt.Axis(labelAngle=0, values=list(range(0, 64, 8)))),
            y=alt.Y("label:N", title=None, sort=alt.SortField("order"), axis=alt.Axis(labelLimit=260)),
            color=alt.Color(
                "scaled:Q",
                title=["each row ÷ its", "largest |value|"],
                scale=alt.Scale(domain=[-1, 1], range=list(BLUE_ORANGE), interpolate="rgb", clamp=True),
                # Beside the rows, as tall as they are: under them it took the chart to the projector's fold.
                legend=alt.Legend(orient="right", gradientLength=3 * PAIR_ROW_PX),
            ),
            tooltip=["label:N", "dimension:O", alt.Tooltip("value:Q", format=".4f")],
        )
        .properties(
            title=phone_title("Query, key and their products, dimension by dimension"),
            width="container",
            height=alt.Step(PAIR_ROW_PX),
        )
    )
    return template(chart)


def pair_strips(frame: pd.DataFrame) -> VegaChart:
    """`frame`: inside_gpt_frames.pair_frame's (rows drawn top to bottom by `order`)."""
    return VegaChart(_pair_template(), {PAIR_DATA: frame})
