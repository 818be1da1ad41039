"""The lab's one heatmap: a DataFrame of (row, column, value) cells in, a `VegaChart` (a cached template,
its data and the slots its labels fill) out, with numbers in the cells where they fit and a text colour
that keeps them readable (core/charts/colours.py). No streamlit here.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass

import altair as alt
import numpy as np
import pandas as pd
import pyarrow as pa

from core.charts.colours import BLUE_ORANGE, HIGHLIGHT, MASKED_COLOUR, VIRIDIS, colour_domain, text_colours
from core.charts.spec import (
    READABLE_TEXT,
    SpecPath,
    VegaChart,
)

QUERY_SELECTION = "query_row"  # name of the click selection on heatmaps
HEATMAP_DATA = "heatmap_values"  # the one dataset name in every heatmap spec
MASKED_LABEL = "–"  # the cell's text where the number would be
WIDE_COLUMNS = 24  # columns a heatmap labels one by one; more skip the labels that would overlap
MIN_CELL_FONT_PX = 14  # numbers smaller than this are hidden (the tooltip still has them)
MAX_CELL_FONT_PX = 24


@dataclass(frozen=True)
class HeatmapLook:
    """Everything about a heatmap's spec that depends on neither its values nor its labels (the template's key).

    Neither the labels (a sentence's tokens) nor their number are part of it, only what the number
    decides: a new sentence must not build a new template (`HeatmapLook.of` makes one from the counts).
    """

    row_height: int  # px per row: 48 for a one-row strip, 38 up to 10 rows, 30 up to 16, 22 beyond
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
        # A one-row strip (a model's q, z or a pair's products) gets a taller row: at 38 px its marks looked
        # squeezed beside the axis labels (the display test's 40-px floor for a chart's marks caught it).
        row_height = 48 if num_rows == 1 else 38 if num_rows <= 10 else 30 if num_rows <= 16 else 22
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


def visible_cells(frame: pd.DataFrame) -> np.ndarray:
    """Which cells of a (row, column, value) frame a causal mask leaves: key (column) at or before its query (row)."""
    return frame["col_index"].to_numpy(dtype=np.int64) <= frame["row_index"].to_numpy(dtype=np.int64)


def sent_values(values: np.ndarray, decimals: int) -> np.ndarray:
    """The cells' values as sent: six decimals keep the message small, but rounding twice can move the digit a
    cell prints (0.10354990 -> 0.103550 -> "0.1036", where a Code box prints 0.1035; the s29 review): such a cell
    keeps its own value."""
    rounded = np.round(values, 6)
    moved = np.round(rounded, decimals) != np.round(values, decimals)
    return np.where(moved, values, rounded)


def _look_and_values(frame: pd.DataFrame, title: str, options: dict) -> tuple[HeatmapLook, HeatmapValues, dict]:
    """Split heatmap options into the look, the value-dependent part, and the per-cell data."""
    options = dict(options)
    domain, min_magnitude = options.pop("domain", None), options.pop("min_magnitude", 0.0)
    highlight_row = options.pop("highlight_row", None)
    rows, cols = frame["row"].to_numpy(dtype=object), frame["col"].to_numpy(dtype=object)
    row_labels, col_labels = tuple(dict.fromkeys(rows)), tuple(dict.fromkeys(cols))  # first-seen order
    look = HeatmapLook.of(len(row_labels), len(col_labels), title, **options)
    values = frame["value"].to_numpy(dtype=np.float64)
    row_index = frame["row_index"].to_numpy(dtype=np.int64)
    # A masked cell is drawn grey with "–": its value (a decoder's score for a future key, which the model
    # never uses) must set neither the colour scale nor the width of the labels.
    shown = values[visible_cells(frame)] if look.causal else values
    lo_hi = colour_domain(shown, signed=look.signed, domain=domain, min_magnitude=min_magnitude)
    # The widest label is the largest or the smallest value's (a minus sign takes a character).
    widest = max(len(f"{v:.{look.decimals}f}") for v in (shown.min(), shown.max())) if shown.size else 1
    columns = {
        "row": rows,
        "col": cols,
        "value": sent_values(values, look.decimals),
        "row_index": row_index,
        "text_color": text_colours(values, lo_hi, look.stops),
        "is_query": row_index == (-1 if highlight_row is None else highlight_row),
    }
    if look.marked:
        columns["marked"] = frame["marked"].to_numpy(dtype=bool)
    if look.causal:
        masked = ~visible_cells(frame)
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


def _magnitude(low: float, high: float) -> float:
    """The power of ten of a quarter of the scale: the round steps are 1, 2, 2.5 and 5 times it, and more."""
    return 10 ** math.floor(math.log10((high - low) / 4))


def _legend_step(low: float, high: float) -> float:
    """The legend's finest round step: at most five steps of 1, 2, 2.5 or 5 × 10^k across the scale."""
    magnitude = _magnitude(low, high)
    return next(m * magnitude for m in (1, 2, 2.5, 5, 10) if (high - low) / (m * magnitude) <= 5)


def legend_format(domain: tuple[float, float]) -> str:
    """The legend labels' d3 format: one decimal finer than the round step, trailing zeros dropped.

    Three significant digits printed a weights map's lowest end as "0.0000239" beside 0.2 and 0.4 (the s19
    review); at the step's resolution plus a digit it reads "0", and an end such as 0.901 keeps "0.9" apart
    from a neighbouring 0.8 ("0.90" trimmed).
    """
    low, high = float(domain[0]), float(domain[1])
    if not high > low:
        return LEGEND_FORMAT
    decimals = max(0, 1 - math.floor(math.log10(_legend_step(low, high))))
    return f",.{decimals}~f"


def legend_values(domain: tuple[float, float], signed: bool) -> list[float]:
    """The colour legend's labelled values: both ends of the scale and round numbers between them.

    Multiples of a round step (1, 2, 2.5 or 5 × 10^k, at most five across the scale; 0 among them on a signed
    map, whose scale is symmetric); a round number within a third of a step, or a quarter of the scale, of an
    end gives way to the end, so that two labels never overlap. An end's label sits inside the bar, its whole
    width from the end: on a 170 px legend "−1.82" and "−1" (a fifth of the scale apart) ran together as
    "−1.82−1" (lesson 2's values of a real model, an independent review), as lesson 10's 0.8 had on its end
    0.901 at a ninth. Of the steps, the one whose labels are most evenly spaced, the fewer the better on a tie:
    the finest alone labelled 0 to 1 as "0, 0.4, 0.6, 1", which read as a bug on a slide (the s20 review).
    """
    low, high = float(domain[0]), float(domain[1])
    if not high > low:
        return [low]
    finest, magnitude = _legend_step(low, high), _magnitude(low, high)
    steps = [s for s in (m * magnitude * f for f in (1, 10, 100) for m in (1, 2, 2.5, 5)) if finest <= s < high - low]
    candidates = [labels for labels in (_labels_at(low, high, step) for step in steps) if len(labels) > 2]
    return min(candidates or [_labels_at(low, high, finest)], key=lambda ls: (round(_unevenness(ls), 2), len(ls)))


def _labels_at(low: float, high: float, step: float) -> list[float]:
    """The ends and the multiples of `step` between them at least a third of a step and a quarter of the scale
    from either end."""
    # .12g: 3 × 0.2 is 0.6000000000000001 in floats
    inside = [float(f"{i * step:.12g}") for i in range(math.ceil(low / step), math.floor(high / step) + 1)]
    inside = [v for v in inside if min(v - low, high - v) >= max(step / 3, (high - low) / 4) * (1 - 1e-9)]
    return [low, *inside, high]


def _unevenness(labels: list[float]) -> float:
    """The widest gap between neighbouring labels over the narrowest: 1 when evenly spaced."""
    gaps = [b - a for a, b in zip(labels, labels[1:], strict=False)]
    return max(gaps) / min(gaps)


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
        format=legend_format(values.domain),
        titleLimit=320,  # Vega's 180 px cut "weight (grey: masked future)" to "weight (grey: masked fut…" (s22 review)
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
    legend_format: SpecPath  # their number format (decimals from the scale's step)
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
    legend_format_path = ("layer", 0, "encoding", "color", "legend", "format")
    # readable already: the chart configures it
    return _HeatmapTemplate(json.dumps(spec), domain, legend, legend_format_path, sorts, fonts)


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
        cached.legend_format: legend_format(values.domain),
    }
    cols, rows = list(values.cols), list(values.rows)  # one list each: spec() copies what it writes
    for path in cached.sorts:
        slots[path] = cols if path[3] == "x" else rows
    for path in cached.fonts:
        slots[path] = {"expr": font if path[-1] == "fontSize" else f"({font}) > 0 ? 1 : 0"}
    return VegaChart(cached.json, {HEATMAP_DATA: pa.table(columns)}, slots)
