"""Chart builders for lesson 9 (attention at scale): DataFrame in, `VegaChart` out. No streamlit here.

The measurement charts are built once per measurement (the lesson caches it), so their data go inline
and `from_altair` splits them off as the chart's datasets; the tile picture, drawn again for every seed,
is a template per grid size.

Colours are Tableau 10 (colour-blind safe in its first colours); lines that must be told apart
without colour also differ in their dash or their point shape.
"""

from __future__ import annotations

import functools
from typing import Literal

import altair as alt
import pandas as pd

from core.attention.long_context import TileKind
from core.charts.spec import VegaChart, from_altair, phone_title, template

HEIGHT = 260
# Fit the column's width only: the height stays HEIGHT for the marks (a plain "fit" would squeeze the
# plot to make room for the legend below it).
FIT_WIDTH = alt.AutoSizeParams(type="fit-x", contains="padding")


def _log_log_lines(long: pd.DataFrame, title: str, field: str, unit: str, order: list[str]) -> alt.Chart:
    """Lines of `field` against tokens on log-log axes, one per series in `order` (colour, dash and shape)."""
    return (
        alt.Chart(long, title=phone_title(title))
        .mark_line(point=True)
        .encode(
            x=alt.X("tokens:Q", scale=alt.Scale(type="log", base=2), title="tokens T (log scale)"),
            y=alt.Y(f"{field}:Q", scale=alt.Scale(type="log"), title=f"{unit} (log scale)"),
            color=alt.Color(
                "series:N",
                sort=order,
                scale=alt.Scale(scheme="tableau10"),
                title=None,
                # Each entry a short stretch of its line, dash included: the merged colour, dash and shape
                # legend drew a circle, a square and a cross with odd dashes through them.
                legend=alt.Legend(
                    orient="bottom", direction="vertical", labelLimit=0, symbolType="stroke", symbolStrokeWidth=3
                ),
            ),
            strokeDash=alt.StrokeDash(
                "series:N", sort=order, scale=alt.Scale(domain=order, range=[[1, 0], [4, 2], [6, 4]]), title=None
            ),
            shape=alt.Shape(
                "series:N", sort=order, title=None, legend=None
            ),  # the points differ; the legend shows lines
            tooltip=["series:N", alt.Tooltip("tokens:Q", format=","), alt.Tooltip(f"{field}:Q", format=",.3f")],
        )
        .properties(height=HEIGHT, autosize=FIT_WIDTH)
    )


def _series(table: pd.DataFrame, names: dict[str, str], value_name: str) -> pd.DataFrame:
    """`names` columns of the table stacked against tokens: tokens, series (its legend name), value_name."""
    long = table.melt(id_vars="tokens", value_vars=list(names), var_name="series", value_name=value_name)
    long["series"] = long["series"].map(names)
    return long


def cost_chart(table: pd.DataFrame) -> VegaChart:
    """Measured time of plain and fused attention against T (log-log), with the T² line through the longest point.

    table: tokens, milliseconds, fused_milliseconds, t2_milliseconds (core.lessons.attention_at_scale.CostResult).
    """
    names = {
        "milliseconds": "plain (measured)",
        "fused_milliseconds": "fused kernel (measured)",
        "t2_milliseconds": "T² line",
    }
    long = _series(table, names, "ms")
    order = list(names.values())
    return from_altair(
        _log_log_lines(long, "Time of one causal attention call (one head, width 64)", "ms", "milliseconds", order)
    )


def memory_chart(table: pd.DataFrame) -> VegaChart:
    """Peak memory of plain and fused attention, and the bytes of one T × T float32 matrix, against T (log-log)."""
    names = {
        "peak_bytes": "plain: peak (measured)",
        "fused_peak_bytes": "fused kernel: peak (measured)",
        "scores_bytes": "one T×T float32 matrix",
    }
    long = _series(table, names, "bytes")
    long["MiB"] = long["bytes"] / 2**20
    order = list(names.values())
    return from_altair(_log_log_lines(long, "Memory held at once", "MiB", "MiB", order))


TILE_COLOURS = {TileKind.FULL.value: "#4e79a7", TileKind.DIAGONAL.value: "#f28e2b", TileKind.SKIPPED.value: "#e8e8e8"}
TILES_TITLE = "Tiles of the scores matrix: which ones the loop computes"


TILES_DATA = "tiles"


def tiles_chart(tiles: pd.DataFrame) -> VegaChart:
    """The grid of tiles: query blocks down, key blocks across, coloured by computed / masked inside / skipped.

    tiles: query_block, key_block, kind, queries, keys (core.lessons.attention_at_scale.TilingLesson.tiles).
    Each tile spans [block, block + 1) on both axes (quantitative), so the grid fills the chart at any size.
    The template is built once per grid size: a new seed draws new tensors, not new tiles.
    """
    rows, cols = int(tiles.query_block.max()) + 1, int(tiles.key_block.max()) + 1
    return VegaChart(_tiles_template(rows, cols), {TILES_DATA: tiles})


def _block_axis(blocks: int, *, orient: Literal["top", "bottom", "left", "right"]) -> alt.Axis:
    """Block numbers 1…n at the middle of each block: ticks at the edges labelled 4 blocks as 0–4."""
    return alt.Axis(
        orient=orient,
        values=[block + 0.5 for block in range(blocks)],
        labelExpr="floor(datum.value) + 1",
        ticks=False,
        grid=False,
    )


@functools.lru_cache(maxsize=64)
def _tiles_template(rows: int, cols: int) -> str:
    kinds = list(TILE_COLOURS)
    return template(
        alt.Chart(alt.NamedData(name=TILES_DATA), title=phone_title(TILES_TITLE))
        .transform_calculate(key_end="datum.key_block + 1", query_end="datum.query_block + 1")
        .mark_rect(stroke="#888888", strokeWidth=1)
        .encode(
            x=alt.X(
                "key_block:Q",
                title="key block",
                scale=alt.Scale(domain=[0, cols], nice=False),
                axis=_block_axis(cols, orient="top"),
            ),
            x2="key_end:Q",
            y=alt.Y(
                "query_block:Q",
                title="query block",
                scale=alt.Scale(domain=[0, rows], nice=False, reverse=True),
                axis=_block_axis(rows, orient="left"),
            ),
            y2="query_end:Q",
            color=alt.Color(
                "kind:N",
                scale=alt.Scale(domain=kinds, range=[TILE_COLOURS[k] for k in kinds]),
                legend=alt.Legend(orient="bottom", title=None, columns=1, labelLimit=0),  # uncut on a phone
            ),
            tooltip=["queries:N", "keys:N", "kind:N"],
        )
        .properties(height=HEIGHT, autosize=FIT_WIDTH)
    )


def generation_chart(timing: pd.DataFrame) -> VegaChart:
    """Milliseconds per generated token against the tokens so far, with and without the KV cache.

    timing: tokens so far, way, milliseconds, median of 9 steps (core.lessons.attention_at_scale_kv.CacheLesson.timing):
    every step as a faint point, the running median as a line.
    """
    ways = list(dict.fromkeys(timing["way"]))
    colour = alt.Color(
        "way:N",
        sort=ways,
        scale=alt.Scale(scheme="tableau10"),
        title=None,
        legend=alt.Legend(orient="bottom", labelLimit=0),
    )
    base = alt.Chart(timing, title="Time per generated token").encode(
        x=alt.X("tokens so far:Q", title="tokens so far"), color=colour
    )
    points = base.mark_point(size=14, filled=True, opacity=0.35).encode(
        y=alt.Y("milliseconds:Q", scale=alt.Scale(type="log"), title="milliseconds (log scale)"),
        shape=alt.Shape("way:N", sort=ways, title=None, legend=None),
        tooltip=["way:N", "tokens so far:Q", alt.Tooltip("milliseconds:Q", format=".3f")],
    )
    medians = base.mark_line(strokeWidth=2.5).encode(
        y="median of 9 steps:Q",
        strokeDash=alt.StrokeDash(
            "way:N", sort=ways, scale=alt.Scale(domain=ways, range=[[1, 0], [6, 3]]), legend=None
        ),
    )
    return from_altair(alt.layer(points, medians).properties(height=HEIGHT, autosize=FIT_WIDTH))
