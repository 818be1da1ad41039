"""Pure chart builders: DataFrame in, `VegaChart` (a cached template and its data) out. No streamlit here.

Colour schemes are colour-blind safe: viridis for weights (0..1), a diverging
blue-orange centred at 0 for signed values. Text labels flip colour for contrast.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import cast

import altair as alt
import numpy as np
import pandas as pd
import pyarrow as pa
from altair.expr.core import Expression

from core.charts.spec import (
    PHONE_TITLE_CHARS,
    READABLE_TEXT,
    SpecPath,
    VegaChart,
    from_altair,
    phone_title,
    readable,
    template,
)

# Re-exported: pages and tests know them from here.
__all__ = ["PHONE_TITLE_CHARS", "READABLE_TEXT", "VegaChart", "phone_title", "readable"]

QUERY_SELECTION = "query_row"  # name of the click selection on heatmaps
HEATMAP_DATA = "heatmap_values"  # the one dataset name in every heatmap spec

# Colour scales as explicit stops, interpolated linearly in sRGB (Vega's "rgb" interpolation),
# so that Python knows the exact colour of every cell and can pick its text colour from it.
# VIRIDIS: every third stop of Vega's "viridis"; BLUE_ORANGE: Vega's "blueorange" (both colour-blind safe).
VIRIDIS = (
    "#440154", "#482575", "#414487", "#35608d", "#2a788e", "#21918d",
    "#22a884", "#43bf71", "#7ad151", "#bcdf27", "#fde725",
)  # fmt: skip
BLUE_ORANGE = (
    "#134b85", "#2f78b3", "#5da2cb", "#9dcae1", "#d2e5ef", "#f2f0eb",
    "#fce0ba", "#fbbf74", "#e8932f", "#c5690d", "#994a07",
)  # fmt: skip
WEIGHT_DOMAIN = (0.0, 1.0)  # attention weights always on 0..1: 0.099 must not look like a masked 0
MASKED_COLOUR = "#c8c8c8"  # a causal mask's future cells: no weight colour, so a 0 never passes for a small weight
MASKED_LABEL = "–"  # the cell's text where the number would be
HIGHLIGHT = "#e4007c"  # outline of the query's row; stands out on viridis, blue-orange, light and dark
WIDE_COLUMNS = 24  # columns a heatmap labels one by one; more skip the labels that would overlap
MIN_CELL_FONT_PX = 14  # numbers smaller than this are hidden (the tooltip still has them)
MAX_CELL_FONT_PX = 24
# A line or bar chart's own height (for its marks), the view growing for its title, axes and legend, and the
# column's width. Streamlit's default "fit" squeezes all of them into 300 px: in presentation mode's larger
# type a vertical axis title then outgrew the plot and pushed the chart's title above the top edge, cut off.
PLOT_HEIGHT = 220
GROWS_FOR_TEXT = alt.AutoSizeParams(type="fit-x", contains="padding")


def hex_to_rgb(colours: tuple[str, ...]) -> np.ndarray:
    """('#rrggbb', ...) -> (S, 3) floats in 0..1 (sRGB, gamma-encoded)."""
    return np.array([[int(c[i : i + 2], 16) / 255 for i in (1, 3, 5)] for c in colours])


def scale_colours(values: np.ndarray, domain: tuple[float, float], stops: tuple[str, ...]) -> np.ndarray:
    """The colour a heatmap cell gets: values (N,) -> (N, 3) sRGB in 0..1.

    The same mapping as the Vega scale `heatmap` writes: stops spread evenly over the
    domain, linear between them in sRGB, clamped at the ends.
    """
    lo, hi = domain
    position = np.clip((np.asarray(values, dtype=np.float64) - lo) / (hi - lo), 0.0, 1.0) * (len(stops) - 1)
    left = np.minimum(np.floor(position).astype(int), len(stops) - 2)
    fraction = (position - left)[:, None]  # (N, 1)
    rgb = hex_to_rgb(stops)
    return rgb[left] * (1 - fraction) + rgb[left + 1] * fraction


def relative_luminance(rgb: np.ndarray) -> np.ndarray:
    """WCAG 2 relative luminance of sRGB colours (..., 3) in 0..1."""
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    return linear @ np.array([0.2126, 0.7152, 0.0722])


def contrast_ratio(luminance_a: np.ndarray, luminance_b: np.ndarray) -> np.ndarray:
    """WCAG 2 contrast ratio (1..21) between two relative luminances."""
    lighter, darker = np.maximum(luminance_a, luminance_b), np.minimum(luminance_a, luminance_b)
    return (lighter + 0.05) / (darker + 0.05)


def text_colours(values: np.ndarray, domain: tuple[float, float], stops: tuple[str, ...]) -> np.ndarray:
    """'black' or 'white' per value: whichever contrasts more with that value's own cell colour.

    One of the two always reaches at least 4.58:1 (the worst case is a cell of luminance 0.18).
    """
    cell = relative_luminance(scale_colours(values, domain, stops))
    black_wins = contrast_ratio(cell, np.zeros_like(cell)) >= contrast_ratio(cell, np.ones_like(cell))
    return np.where(black_wins, "black", "white").astype(object)


def colour_domain(
    values: np.ndarray, *, signed: bool, domain: tuple[float, float] | None = None, min_magnitude: float = 0.0
) -> tuple[float, float]:
    """The (low, high) ends of a heatmap's colour scale.

    An explicit `domain` wins (two heatmaps that pass the same one share a scale). Signed maps
    are symmetric around 0, at least ±min_magnitude (so float noise of 1e-8 in a difference stays
    white). Unsigned maps are 0..1 (weights) unless the values leave it.
    """
    if domain is not None:
        return float(domain[0]), float(domain[1])
    values = np.asarray(values, dtype=np.float64)
    if signed:
        magnitude = max(float(np.abs(values).max(initial=0.0)), min_magnitude)
        magnitude = magnitude if magnitude > 0 else 1.0
        return -magnitude, magnitude
    low, high = WEIGHT_DOMAIN
    return min(low, float(values.min(initial=low))), max(high, float(values.max(initial=high)))


def shared_domain(*frames: pd.DataFrame, signed: bool = True) -> tuple[float, float]:
    """One colour domain for several heatmaps (e.g. raw and scaled scores on one scale)."""
    values = np.concatenate([frame["value"].to_numpy(dtype=np.float64) for frame in frames])
    return colour_domain(values, signed=signed)


@dataclass(frozen=True)
class HeatmapLook:
    """Everything about a heatmap's spec that depends on neither its values nor its labels (the template's key).

    Neither the labels (a sentence's tokens) nor their number are part of it, only what the number
    decides: a new sentence must not build a new template (`HeatmapLook.of` makes one from the counts).
    """

    row_height: int  # px per row: 38 up to 10 rows, 30 up to 16, 22 beyond (24 px numbers fit the first)
    label_angle: int  # the column labels' angle: -45, or -90 beyond 10 columns so that none is skipped
    decimals: int  # 4 decimals up to 8 columns (every lesson's worked examples), 3 beyond
    title: str
    signed: bool = False
    value_title: str = "value"
    show_values: bool = True
    select_rows: bool = False
    x_title: str = "key"
    y_title: str = "query"
    marked: str | None = None  # what the frame's `marked` cells are (e.g. "dropped"): dashed outline and ✕
    causal: bool = False  # grey out the cells above the diagonal (col_index > row_index): the masked future
    # Beyond WIDE_COLUMNS columns (a model's 32 or 64 output dimensions, not a sentence's tokens) the column
    # labels that would overlap are skipped: all 64 drawn in a third of a page were an illegible smear.
    thin_column_labels: bool = False

    @classmethod
    def of(cls, num_rows: int, num_cols: int, title: str, **options) -> HeatmapLook:
        """The look of a num_rows × num_cols heatmap."""
        row_height = 38 if num_rows <= 10 else 30 if num_rows <= 16 else 22
        angle, decimals = -45 if num_cols <= 10 else -90, 4 if num_cols <= 8 else 3
        return cls(row_height, angle, decimals, title, thin_column_labels=num_cols > WIDE_COLUMNS, **options)

    @property
    def stops(self) -> tuple[str, ...]:
        return BLUE_ORANGE if self.signed else VIRIDIS


@dataclass(frozen=True)
class HeatmapValues:
    """What a heatmap's spec takes from its values and labels, written into the template's slots."""

    domain: tuple[float, float]  # the colour scale's (low, high)
    label_chars: int  # characters in the widest cell label, e.g. 7 for "-0.1234"
    rows: tuple[str, ...]  # the row labels, top to bottom (first-seen order in the frame)
    cols: tuple[str, ...]  # the column labels, left to right


def _look_and_values(frame: pd.DataFrame, title: str, options: dict) -> tuple[HeatmapLook, HeatmapValues, dict]:
    """Split heatmap options into the look, the value-dependent part, and the per-cell data."""
    options = dict(options)
    domain, min_magnitude = options.pop("domain", None), options.pop("min_magnitude", 0.0)
    highlight_row = options.pop("highlight_row", None)
    rows, cols = frame["row"].to_numpy(dtype=object), frame["col"].to_numpy(dtype=object)
    row_labels, col_labels = tuple(dict.fromkeys(rows)), tuple(dict.fromkeys(cols))  # first-seen order
    look = HeatmapLook.of(len(row_labels), len(col_labels), title, **options)
    values = frame["value"].to_numpy(dtype=np.float64)
    lo_hi = colour_domain(values, signed=look.signed, domain=domain, min_magnitude=min_magnitude)
    # The widest label is the largest or the smallest value's (a minus sign takes a character).
    widest = max(len(f"{v:.{look.decimals}f}") for v in (values.min(), values.max())) if values.size else 1
    row_index = frame["row_index"].to_numpy(dtype=np.int64)
    columns = {
        "row": rows,
        "col": cols,
        "value": np.round(values, 6),
        "row_index": row_index,
        "text_color": text_colours(values, lo_hi, look.stops),
        "is_query": row_index == (-1 if highlight_row is None else highlight_row),
    }
    if look.marked:
        columns["marked"] = frame["marked"].to_numpy(dtype=bool)
    if look.causal:
        masked = frame["col_index"].to_numpy(dtype=np.int64) > row_index
        columns["masked"] = masked
        columns["cell"] = np.where(masked, "masked: a future key", "visible")
        columns["text_color"] = np.where(masked, "black", columns["text_color"])  # dark text on the grey
    return look, HeatmapValues(lo_hi, widest, row_labels, col_labels), columns


def cell_font_expr(label_chars: int) -> str:
    """Vega expression: the cell-number font size that fits the rendered cell, or 0 (hidden).

    Cells grow with the chart's width (Streamlit sets it to the column's), so the numbers
    grow too: the widest label must fit the cell's width (a digit is about 0.5 em in the
    theme's sans-serif) and the row's height. Below MIN_CELL_FONT_PX the numbers are hidden.
    """
    fit = f"min(bandwidth('x') / ({0.5 * label_chars:.2f} + 0.6), bandwidth('y') * 0.62)"
    return f"{fit} >= {MIN_CELL_FONT_PX} ? min({fit}, {MAX_CELL_FONT_PX}) : 0"


def _domain_stops(domain: tuple[float, float], stops: tuple[str, ...]) -> list[float]:
    """The scale's piecewise domain: one value per colour stop, evenly spread."""
    low, high, steps = float(domain[0]), float(domain[1]), len(stops) - 1
    return [low + (high - low) * i / steps for i in range(steps)] + [high]


LEGEND_FORMAT = ",.3~r"  # three significant digits, no exponent, no trailing zeros: 1.31, 0.654, 1,230


def legend_values(domain: tuple[float, float], signed: bool) -> list[float]:
    """The colour legend's labelled values: both ends of the scale and round numbers between them.

    About four steps of 1, 2, 2.5 or 5 × 10^k (0 among them on a signed map); a round number within a
    third of a step, or an eighth of the scale, of an end gives way to the end, so that two labels never
    overlap (lesson 10's 0.8 sat on its end 0.901 on a 170 px legend: a ninth of the scale apart).
    """
    low, high = float(domain[0]), float(domain[1])
    if not high > low:
        return [low]
    magnitude = 10 ** math.floor(math.log10((high - low) / 4))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if (high - low) / (m * magnitude) <= 5)
    # .12g: 3 × 0.2 is 0.6000000000000001 in floats
    inside = [float(f"{i * step:.12g}") for i in range(math.ceil(low / step), math.floor(high / step) + 1)]
    inside = [v for v in inside if min(v - low, high - v) > max(step / 3, (high - low) / 8)]
    return [low, *inside, high]


def heatmap_chart(look: HeatmapLook, values: HeatmapValues) -> alt.LayerChart:
    """The Altair heatmap for one look, value range and labels (data comes from HEATMAP_DATA).

    The readable reference build: `heatmap` serialises it once per look and fills the rest in
    (tests/app/test_charts.py checks the two are the same spec).
    """
    rows, cols = list(values.rows), list(values.cols)
    scale = alt.Scale(
        domain=_domain_stops(values.domain, look.stops), range=list(look.stops), interpolate="rgb", clamp=True
    )
    base = alt.Chart(title=look.title).encode(
        x=alt.X(
            "col:N",
            sort=cols,
            title=look.x_title,
            axis=alt.Axis(labelAngle=look.label_angle, labelOverlap=look.thin_column_labels),
        ),
        y=alt.Y("row:N", sort=rows, title=look.y_title, axis=alt.Axis(labelOverlap=False)),
    )
    # The legend labels its two ends and points between (`legend_values`): Vega's own ticks stopped at the
    # last round number, so a scale reaching 1.31 was labelled only up to 1.0.
    legend = alt.Legend(
        orient="bottom",
        gradientLength=alt.ExprRef("clamp(width - 40, 60, 240)"),
        values=legend_values(values.domain, look.signed),
        format=LEGEND_FORMAT,
    )
    # The query's row is outlined (from the data, so it follows the query picker too).
    colour = alt.Color("value:Q", scale=scale, title=look.value_title, legend=legend)
    tooltip = [
        alt.Tooltip("row:N", title=look.y_title),
        alt.Tooltip("col:N", title=look.x_title),
        alt.Tooltip("value:Q", title=look.value_title, format=".4f"),
    ]
    if look.causal:  # the masked future in grey, named in the legend's title and the tooltip
        colour = alt.Color("value:Q", scale=scale, title=f"{look.value_title} (grey: masked future)", legend=legend)
        tooltip.append(alt.Tooltip("cell:N", title="cell"))
    rect = base.mark_rect(cursor="pointer" if look.select_rows else "default", stroke=HIGHLIGHT).encode(
        color=alt.condition("datum.masked", alt.value(MASKED_COLOUR), colour) if look.causal else colour,
        strokeWidth=alt.condition("datum.is_query", alt.value(3), alt.value(0)),
        tooltip=tooltip,
    )
    if look.select_rows:
        # A fixed view name: Altair's default is a hash of the view, domain included, which would
        # differ between the cached template and a fresh build.
        rect = rect.properties(name="heatmap_cells").add_params(
            alt.selection_point(name=QUERY_SELECTION, fields=["row_index"], on="click")
        )
    layers = [rect]
    if look.marked:
        # Marked cells (dropout's zeros) must not pass for small kept weights: a dashed outline in
        # the cell-text colour (white on viridis' dark end, where a zero sits) and a ✕ for the number.
        layers.append(
            base.transform_filter("datum.marked")
            .mark_rect(filled=False, strokeDash=[4, 3], strokeWidth=2, aria=False)
            .encode(stroke=alt.Stroke("text_color:N", scale=alt.Scale(domain=["black", "white"]), legend=None))
        )
    number = alt.Text("value:Q", format=f".{look.decimals}f")
    if look.show_values:
        font = cell_font_expr(values.label_chars)
        text = base.mark_text(fontSize=alt.ExprRef(font), opacity=alt.ExprRef(f"({font}) > 0 ? 1 : 0")).encode(
            text=_cell_text(look, number),
            color=alt.Color(
                # an explicit identity scale: `scale=None` ("scale": null) breaks Streamlit's chart theming
                "text_color:N",
                scale=alt.Scale(domain=["black", "white"], range=["black", "white"]),
                legend=None,
            ),
        )
        layers.append(text)
    # Width: the column's (Streamlit sets it); height: a row step tall enough for 24 px numbers.
    data = alt.NamedData(name=HEATMAP_DATA)
    return (
        alt.layer(*layers, data=data)
        .properties(width="container", height=alt.Step(look.row_height))
        .configure_axis(**READABLE_TEXT["axis"])
        .configure_legend(**READABLE_TEXT["legend"])
    )


def _cell_text(look: HeatmapLook, number: alt.Text) -> object:
    """A cell's text: its number, ✕ where `marked` (dropout's zeros), – where the causal mask hid the key."""
    if not look.causal:
        return alt.condition("datum.marked", alt.value("✕"), number) if look.marked else number
    tests = [("datum.masked", MASKED_LABEL)] + ([("datum.marked", "✕")] if look.marked else [])
    # Vega-Lite takes a list of conditions, the first true one wins (a masked cell is never dropped).
    return {
        "field": "value",
        "type": "quantitative",
        "format": f".{look.decimals}f",
        "condition": [{"test": test, "value": text} for test, text in tests],
    }


def heatmap_altair(frame: pd.DataFrame, title: str, **options) -> alt.LayerChart:
    """The same heatmap as one Altair chart with its values inline: how a plain Streamlit app draws it,
    built and validated by Altair on every run (loadtest/reference_page.py, the benchmarks' yardstick)."""
    look, values, columns = _look_and_values(frame, title, options)
    chart = heatmap_chart(look, values)
    chart.data = pd.DataFrame(columns)
    return chart


@dataclass(frozen=True)
class _HeatmapTemplate:
    """A look's template and where its value-dependent parts sit in it."""

    json: str
    domain: SpecPath  # the colour scale's domain
    legend: SpecPath  # the colour legend's labelled values (its ends among them)
    sorts: tuple[SpecPath, ...]  # every layer's x and y sort (the labels' order)
    fonts: tuple[SpecPath, ...]  # the text layer's font size and opacity (numbers hidden when too small)


@functools.lru_cache(maxsize=512)
def _heatmap_template(look: HeatmapLook) -> _HeatmapTemplate:
    """One look serialised once, with placeholder values and labels; a str nobody can mutate.

    Neither the domain, the widest label nor the labels are part of the key: all three change
    with the values or the sentence, and a template built per sentence cost Altair's full build
    on every new sentence (bench/NOTES.md). `heatmap` writes them into the slots.
    """
    chart = heatmap_chart(look, HeatmapValues((0.0, 1.0), 1, ("row",), ("col",)))  # placeholders: slots
    spec = chart.to_dict(validate=False)
    layers = spec["layer"]
    sorts = tuple(("layer", i, "encoding", axis, "sort") for i in range(len(layers)) for axis in ("x", "y"))
    texts = [i for i, layer in enumerate(layers) if layer["mark"]["type"] == "text"]
    fonts = tuple(("layer", i, "mark", part) for i in texts for part in ("fontSize", "opacity"))
    domain = ("layer", 0, "encoding", "color", "scale", "domain")  # the cells' layer
    legend = ("layer", 0, "encoding", "color", "legend", "values")
    return _HeatmapTemplate(json.dumps(spec), domain, legend, sorts, fonts)  # readable already: the chart configures it


def heatmap(frame: pd.DataFrame, title: str, **options) -> VegaChart:
    """A labelled heatmap of a long matrix frame (row, col, value, row_index): the one heatmap path.

    Options: signed (diverging blue-orange centred at 0, else viridis), value_title, show_values,
    select_rows (a click picks a row: QUERY_SELECTION), highlight_row (row_index outlined),
    x_title, y_title, domain ((low, high) of the colour scale, e.g. from `shared_domain`),
    min_magnitude (a signed map's domain is at least ±this). The values are the named dataset
    HEATMAP_DATA, an Arrow table; the structure comes from the look's cached template.
    """
    look, values, columns = _look_and_values(frame, title, options)
    cached = _heatmap_template(look)
    font = cell_font_expr(values.label_chars)
    slots: dict[SpecPath, object] = {
        cached.domain: _domain_stops(values.domain, look.stops),
        cached.legend: legend_values(values.domain, look.signed),
    }
    cols, rows = list(values.cols), list(values.rows)  # one list each: spec() copies what it writes
    for path in cached.sorts:
        slots[path] = cols if path[3] == "x" else rows
    for path in cached.fonts:
        slots[path] = {"expr": font if path[-1] == "fontSize" else f"({font}) > 0 ? 1 : 0"}
    return VegaChart(cached.json, {HEATMAP_DATA: pa.table(columns)}, slots)


def token_axis(count: int, title: str | None = None) -> alt.Axis:
    """An x axis that labels every one of `count` tokens (Vega would skip overlapping ones).

    Labels are tilted, and vertical beyond 10 tokens, so that a 20-token sentence still gets
    one readable label per bar on a phone.
    """
    return alt.Axis(title=title, labelAngle=-45 if count <= 10 else -90, labelOverlap=False, labelLimit=120)


def _color_if(test: Expression, then: str, otherwise: str) -> alt.ColorValue:
    """`alt.condition(test, alt.value(then), alt.value(otherwise))`, the same spec, built fast.

    Altair turns a channel given as a dict or a shorthand string (what alt.condition and
    alt.value return, or "token:N" in a tooltip list) into its class by rebuilding a map of
    its whole schema, several times per chart and rerun (bench/NOTES.md).
    Channel objects (alt.ColorValue, alt.Tooltip) skip that; tests/unit/test_charts_fast.py checks
    the specs are identical.
    """
    return alt.ColorValue(otherwise, condition={"test": test, "value": then})


BARS_DATA = "bar_values"  # the named dataset of the bar charts below


def _grouped_bars(
    num_categories: int, x: str, value: str, group: str, title: str, value_title: str | None
) -> alt.Chart:
    """Bars of `value` per `x`, one colour per `group`, side by side (categories in BARS_DATA's order)."""
    return (
        alt.Chart(alt.NamedData(name=BARS_DATA), title=phone_title(title))
        .mark_bar()
        .encode(
            # The sort is a slot: `grouped_bars` writes this sentence's tokens in.
            x=alt.X(f"{x}:N", sort=[str(i) for i in range(num_categories)], axis=token_axis(num_categories)),
            xOffset=alt.XOffset(f"{group}:N"),
            y=alt.Y(f"{value}:Q", title=value_title or value),
            color=alt.Color(
                f"{group}:N",
                scale=alt.Scale(scheme="tableau10"),
                title=None,
                legend=alt.Legend(orient="bottom", columns=2),  # one row of three ran off a phone's right edge
            ),
            tooltip=[alt.Tooltip(f"{x}:N"), alt.Tooltip(f"{group}:N"), alt.Tooltip(f"{value}:Q", format=".4f")],
        )
    )


@functools.lru_cache(maxsize=256)
def _grouped_bars_template(
    num_categories: int, x: str, value: str, group: str, title: str, value_title: str | None
) -> str:
    return template(_grouped_bars(num_categories, x, value, group, title, value_title))


X_SORT: SpecPath = ("encoding", "x", "sort")  # the bar charts' category order


COLOR_DOMAIN: SpecPath = ("encoding", "color", "scale", "domain")  # the groups, in a fixed order
X_OFFSET_SCALE: SpecPath = ("encoding", "xOffset", "scale")


def grouped_bars(
    frame: pd.DataFrame,
    x: str,
    value: str,
    group: str,
    title: str,
    *,
    value_title: str | None = None,
    groups: Sequence[str] | None = None,
) -> VegaChart:
    """Bars of `value` per `x` (in the frame's order), one colour per `group`, side by side.

    `groups` fixes the colours and the bars' places: Vega-Lite leaves out a group whose values are
    all NaN (lesson 1's naive softmax past float32's limit), and without a fixed domain the next
    group took its colour and its place in the legend. With it, a series keeps its colour and its
    legend entry whatever its values.

    The template is built once per number of categories, not per sentence (bench/NOTES.md).
    """
    categories = list(dict.fromkeys(frame[x]))
    cached = _grouped_bars_template(len(categories), x, value, group, title, value_title)
    slots: dict[SpecPath, object] = {X_SORT: categories}
    if groups is not None:
        slots[COLOR_DOMAIN] = list(groups)
        slots[X_OFFSET_SCALE] = {"domain": list(groups)}
    return VegaChart(cached, {BARS_DATA: frame}, slots)


VARIANCE_DATA = "variance_values"
_VARIANCE_NAMES = {
    "unscaled_var": "q·k (measured)",
    "scaled_var": "q·k/√d_k (measured)",
    "theory_unscaled": "theory: d_k",
    "theory_scaled": "theory: 1",
}


def _variance_chart() -> alt.LayerChart:
    """Monte Carlo variance of q.k vs d_k (points) with the theory lines d_k and 1, log-log.

    The values come from the named dataset VARIANCE_DATA (`variance` writes them).
    """
    colors = alt.Scale(domain=list(_VARIANCE_NAMES.values()), range=["#e45756", "#4c78a8", "#e45756", "#4c78a8"])
    x = alt.X("d_k:Q", scale=alt.Scale(type="log", base=2), title="d_k (log scale)")
    y = alt.Y("variance:Q", scale=alt.Scale(type="log"), title="variance (log scale)")
    base = alt.Chart()
    lines = (
        base.transform_filter(alt.datum.kind == "theory")
        .mark_line(strokeDash=[6, 4])
        .encode(x=x, y=y, color=alt.Color("series:N", scale=colors))
    )
    points = (
        base.transform_filter(alt.datum.kind == "measured")
        .mark_point(filled=True, size=70)
        .encode(
            x=x,
            y=y,
            color=alt.Color("series:N", scale=colors, title=None),
            shape=alt.Shape("series:N", title=None),
            tooltip=["d_k:Q", "series:N", alt.Tooltip("variance:Q", format=".4f")],
        )
    )
    # cast: alt.layer() returns a FacetChart only for layers with shared facet channels (none here).
    return cast(alt.LayerChart, alt.layer(lines, points, data=alt.NamedData(name=VARIANCE_DATA))).properties(
        title=["Variance of the dot product:", "unscaled grows like d_k"]  # two lines: a phone cut one
    )


@functools.lru_cache(maxsize=1)
def _variance_template() -> str:
    return template(_variance_chart())


def variance(frame: pd.DataFrame) -> VegaChart:
    """The variance chart: structure built once, values swapped in.

    The records are written directly (d_k, series, variance, kind), not through a pandas melt,
    which costs more than the rest of the page (bench/NOTES.md); tests/app/test_charts.py checks
    them against a melt of the same table.
    """
    d_k = frame["d_k"].tolist()
    records = [
        {"d_k": dim, "series": name, "variance": value, "kind": "theory" if column.startswith("theory") else "measured"}
        for column, name in _VARIANCE_NAMES.items()
        for dim, value in zip(d_k, frame[column].tolist(), strict=True)
    ]
    return VegaChart(_variance_template(), {VARIANCE_DATA: records})


def sweep_chart(frame: pd.DataFrame, highlight: float) -> VegaChart:
    """softmax(m · scores) per token for each multiplier m (the ×8 example).

    One group of bars per multiplier in a single chart that fills its column: five
    fixed-width panels side by side used to run off a phone's screen.
    """
    data = frame.assign(multiplier_label=frame["multiplier"].map(lambda m: f"×{m:g}"))
    order = [f"×{m:g}" for m in sorted(frame["multiplier"].unique())]
    tokens = list(dict.fromkeys(frame["token"]))
    return from_altair(  # built once per multiplier (core.lessons.why_scale caches it), so its data inline
        alt.Chart(data, title="Softmax of the same scores, multiplied")
        .mark_bar()
        .encode(
            x=alt.X("multiplier_label:N", sort=order, title="scores multiplied by", axis=alt.Axis(labelAngle=0)),
            xOffset=alt.XOffset("token:N", sort=tokens),
            y=alt.Y("weight:Q", scale=alt.Scale(domain=[0, 1]), title="softmax weight"),
            color=alt.Color(
                "token:N", sort=tokens, scale=alt.Scale(scheme="tableau10"), legend=alt.Legend(orient="bottom")
            ),
            # The chosen multiplier in full colour, the others faded.
            opacity=alt.condition(alt.datum.multiplier == highlight, alt.value(1.0), alt.value(0.5)),
            tooltip=[
                "token:N",
                alt.Tooltip("weight:Q", format=".4f"),
                alt.Tooltip("multiplier:Q", title="multiplier"),
            ],
        )
        .properties(height=PLOT_HEIGHT, autosize=GROWS_FOR_TEXT)
    )


PEAKINESS_DATA = "peakiness_values"


class PeakMetric(StrEnum):
    """How peaked a softmax is; each value is a column of core.attention.stats.peakiness_vs_dk's table."""

    MAX_WEIGHT = "max_weight"
    ENTROPY = "entropy"
    EFFECTIVE_TOKENS = "effective_tokens"


_PEAKINESS_TITLES = {
    PeakMetric.MAX_WEIGHT: "mean max weight",
    PeakMetric.ENTROPY: "mean entropy (nats)",
    PeakMetric.EFFECTIVE_TOKENS: "effective tokens",
}


def peakiness_label(metric: PeakMetric) -> str:
    """The human name of a peakiness measure (for the page's measure picker)."""
    return _PEAKINESS_TITLES.get(metric, metric)


def _peakiness_chart(metric: PeakMetric) -> alt.Chart:
    """`metric` (max_weight / entropy / effective_tokens) vs d_k, scaled and unscaled.

    The values come from the named dataset PEAKINESS_DATA (= peakiness_vs_dk's table).
    """
    title = _PEAKINESS_TITLES.get(metric, metric)
    return (
        alt.Chart(alt.NamedData(name=PEAKINESS_DATA), title=f"{title} vs d_k (8 keys)")
        .mark_line(point=True)
        .encode(
            x=alt.X("d_k:Q", scale=alt.Scale(type="log", base=2), title="d_k (log scale)"),
            y=alt.Y(f"{metric}:Q", title=title),
            color=alt.Color(
                "scaling:N",
                scale=alt.Scale(domain=["unscaled", "scaled"], range=["#e45756", "#4c78a8"]),
                title="scores",
                legend=alt.Legend(orient="bottom"),
            ),
            tooltip=["d_k:Q", "scaling:N", alt.Tooltip(f"{metric}:Q", title=title, format=".4f")],
        )
        .properties(height=PLOT_HEIGHT, autosize=GROWS_FOR_TEXT)
    )


@functools.lru_cache(maxsize=8)
def _peakiness_template(metric: PeakMetric) -> str:
    return template(_peakiness_chart(metric))


def peakiness(frame: pd.DataFrame, metric: PeakMetric) -> VegaChart:
    """The peakiness chart with `frame`'s values (structure built once per metric)."""
    return VegaChart(_peakiness_template(metric), {PEAKINESS_DATA: frame})


_SATURATION_NAMES = {"jacobian_norm": "gradient size (Jacobian norm)", "max_weight": "largest weight"}


def saturation_chart(frame: pd.DataFrame) -> VegaChart:
    """Softmax Jacobian norm (gradient size) vs the multiplier on [1, 0, 0]."""
    data = frame.melt(
        id_vars="multiplier", value_vars=list(_SATURATION_NAMES), var_name="quantity", value_name="value"
    ).assign(quantity=lambda long: long["quantity"].map(_SATURATION_NAMES))
    return from_altair(  # built once and cached by core.lessons.why_scale, so its data inline
        alt.Chart(data, title=alt.Title(["Gradient through softmax([m, 0, 0])", "dies as m grows"]))  # phone: two lines
        .mark_line(point=True)
        .encode(
            x=alt.X("multiplier:Q", scale=alt.Scale(type="log", base=2), title="score multiplier m (log scale)"),
            y=alt.Y("value:Q", title=None),
            color=alt.Color(
                "quantity:N",
                scale=alt.Scale(scheme="tableau10"),
                title=None,
                # One name a line, never cut: the default 160 px limit cut "gradient size (Jacobian n…".
                legend=alt.Legend(orient="bottom", columns=1, labelLimit=0),
            ),
            tooltip=[
                alt.Tooltip("multiplier:Q", title="multiplier m", format=".4f"),
                alt.Tooltip("quantity:N", title="quantity"),
                alt.Tooltip("value:Q", format=".4f"),
            ],
        )
    )


VARIANCE_TABLE_NAMES = {
    "d_k": "d_k",
    "unscaled_var": "Var(q·k) measured",
    "scaled_var": "Var(q·k/√d_k) measured",
    "theory_unscaled": "theory: d_k",
    "theory_scaled": "theory: 1",
}


def variance_table(frame: pd.DataFrame) -> pd.DataFrame:
    """dot_product_variance's table with human column names, for st.dataframe."""
    return frame[list(VARIANCE_TABLE_NAMES)].rename(columns=VARIANCE_TABLE_NAMES)


LEAKAGE_TITLE = "Change in each output row after perturbing one token"


@functools.lru_cache(maxsize=64)
def _leakage_template(num_tokens: int, position: int) -> str:
    chart = (
        alt.Chart(alt.NamedData(name=BARS_DATA), title=phone_title(LEAKAGE_TITLE))
        .mark_bar()
        .encode(
            # The sort is a slot: `leakage` writes this sentence's tokens in.
            x=alt.X("token:N", sort=[str(i) for i in range(num_tokens)], axis=token_axis(num_tokens)),
            y=alt.Y("max change:Q", title="largest change in the output row"),
            color=_color_if(alt.datum.position < position, "#4c78a8", "#e45756"),
            tooltip=[alt.Tooltip("token:N"), alt.Tooltip("max change:Q", format=".6f")],
        )
        .properties(height=PLOT_HEIGHT, autosize=GROWS_FOR_TEXT)
    )
    return template(chart)


def leakage(frame: pd.DataFrame, position: int) -> VegaChart:
    """Largest change of each output row (token, position, max change) after perturbing the token
    at `position`: rows before it blue (unchanged under the causal mask), the rest red."""
    tokens = list(frame["token"])
    return VegaChart(_leakage_template(len(tokens), position), {BARS_DATA: frame}, {X_SORT: tokens})
