"""Small multiples: one layer's heads side by side, on one shared colour scale with one legend.

Lesson 5 compares heads; eight full-size heatmaps with eight legends made that comparison a scroll.
Here every head is a small panel of the same size, the weights share viridis on 0..1 (so equal
colours are equal weights in every panel), and the legend is drawn once.

Data: HEAD_PANELS_DATA, one row per (head, query, key): head (its label), row, col (token labels),
value, row_index, col_index. Panels wrap at `columns`; on a narrow screen the chart shrinks to its
column (ui/draw.head_panels) instead of clipping its labels.
"""

from __future__ import annotations

import functools
from typing import Literal

import altair as alt
import numpy as np
import pandas as pd

from core.charts.colours import MASKED_COLOUR, VIRIDIS
from core.charts.heatmap import WIDE_COLUMNS
from core.charts.spec import VegaChart, template

HEAD_PANELS_DATA = "head_panels"
FUTURE = "datum.col_index > datum.row_index"  # a causal head's masked cells
MIN_PANEL_PX, MAX_PANEL_PX = 110, 240
ROW_PX = 600  # one row of panels: most of a laptop's main column, the query labels beside it
PANEL_GAP_PX = 12  # the facet's spacing between panels
MAX_CELL_PX = 40  # a panel of few tokens stops growing at this many px a token


def panel_size(num_tokens: int, columns: int) -> int:
    """A panel's side in px: a row of `columns` panels fills about ROW_PX, with at most MAX_CELL_PX a token; never
    under 110 (the labels still fit) nor over 240. A teacher's review saw a decoder's nine heads, three to a row,
    drawn 90 px each in the left third of the page: the size followed the number of heads, not of panels a row."""
    fill = (ROW_PX - PANEL_GAP_PX * (columns - 1)) // columns
    return max(MIN_PANEL_PX, min(MAX_PANEL_PX, fill, MAX_CELL_PX * num_tokens))


def panel_width(num_keys: int, per_key: int = 16) -> int:
    """A panel's width in px for `num_keys` columns: never under MIN_PANEL_PX (the labels still fit) nor over
    MAX_PANEL_PX."""
    return max(MIN_PANEL_PX, min(MAX_PANEL_PX, per_key * num_keys))


def weights_colour(
    field: str, title: str | list[str], legend: Literal["bottom", "right"] = "bottom"
) -> alt.Color:
    """Attention weights on viridis over 0..1, one legend under the chart (or, on a projector's short screen, on
    its right): equal colours are equal weights in every panel (lesson 5's heads, lesson 10's overview and model
    view)."""
    return alt.Color(
        f"{field}:Q",
        scale=alt.Scale(domain=[0.0, 1.0], range=list(VIRIDIS), interpolate="rgb", clamp=True),
        title=title,
        legend=alt.Legend(orient=legend, gradientLength=200, titleLimit=500),
    )


PROJECTOR_ROWS_PX = 250  # a projector's rows of panels share this height under a step's heading (1280 x 720)
PROJECTOR_ROW_PX = 930  # and a row this width, beside the query labels and a legend on the right
GROUP_GAP_PX = 36  # between the panels of two key/value groups in a row: the groups read as groups


def projector_panel_size(num_tokens: int, rows: int, columns: int) -> int:
    """A panel's side in px on a projector: `rows` rows of `columns` panels fit the screen under a step's heading
    at the chart's own size, so its labels are not shrunk. Review s27b: twelve maps in one row were 266 px tall
    with 7 px labels; 90 px keeps a 6-token sentence's labels apart."""
    fit = min(PROJECTOR_ROWS_PX // rows, (PROJECTOR_ROW_PX - GROUP_GAP_PX * 2) // columns - PANEL_GAP_PX)
    return max(90, min(MAX_PANEL_PX, MAX_CELL_PX * num_tokens, fit))


def panel_columns(num_heads: int) -> int:
    """Panels per row: all of up to four heads, else four (8 → 4 + 4, 9 → 4 + 4 + 1, 12 → three rows)."""
    return min(num_heads, 4)


def _cells(tokens: tuple[str, ...], causal: bool, panel: int, legend: Literal["bottom", "right"]) -> alt.Chart:
    """One head's heatmap, the panel every layout repeats; token labels sorted in sentence order."""
    if legend == "bottom":
        title = "weight (one scale for every head" + ("; grey: masked future)" if causal else ")")
        colour = weights_colour("value", title)
    else:  # beside the panels, in short lines
        lines = ["weight", "(one scale", "for every head)"] + (["grey: masked", "future"] if causal else [])
        colour = weights_colour("value", lines, legend)
    # Every token labelled, as a sentence's heatmap labels them; beyond WIDE_COLUMNS tokens (a model's 64-token
    # prompt: under 4 px a token) the labels that would overlap are skipped, as the heatmap skips a wide matrix's.
    overlap: Literal["greedy"] | bool = False if len(tokens) <= WIDE_COLUMNS else "greedy"
    key_axis = alt.Axis(labelAngle=-90, labelOverlap=overlap, labelLimit=70, title=None)
    query_axis = alt.Axis(labelOverlap=overlap, labelLimit=70, title=None)
    return (
        alt.Chart()
        .mark_rect()
        .encode(
            x=alt.X("col:N", sort=list(tokens), axis=key_axis),
            y=alt.Y("row:N", sort=list(tokens), axis=query_axis),
            color=alt.condition("datum.col_index > datum.row_index", alt.value(MASKED_COLOUR), colour)
            if causal
            else colour,
            tooltip=[
                alt.Tooltip("head:N"),
                alt.Tooltip("row:N", title="query"),
                alt.Tooltip("col:N", title="key"),
                alt.Tooltip("value:Q", title="weight", format=".4f"),
            ],
        )
        .properties(width=panel, height=panel)
    )


def _facet(cells: alt.Chart, heads: tuple[str, ...], columns: int, **data) -> alt.FacetChart:
    return cells.facet(
        facet=alt.Facet("head:N", sort=list(heads), title=None, header=alt.Header(labelFontSize=15)),
        columns=columns,
        spacing=PANEL_GAP_PX,
        **data,
    )


def _group_facet(
    cells: alt.Chart, group: tuple[str, ...], tokens: tuple[str, ...], *, labelled: bool, data: alt.NamedData
) -> alt.FacetChart:
    """One key/value group's query heads in a row; only the first group (`labelled`) names the query tokens, which
    stand for every group's (the rows are the same tokens). Each group reads the one named dataset."""
    heads = cells.transform_filter(alt.FieldOneOfPredicate(field="head", oneOf=list(group)))
    if not labelled:
        heads = heads.encode(y=alt.Y("row:N", sort=list(tokens), axis=None))
    return _facet(heads, group, len(group), data=data)


def _panels(
    tokens: tuple[str, ...], heads: tuple[str, ...], title: str, causal: bool, columns: int, projector_group: int
) -> alt.FacetChart | alt.HConcatChart:
    """The faceted heatmap, heads in the order given, `columns` a row.

    `projector_group` > 0: the projector's layout, sized to fit its screen with the legend on the right; a decoder's
    key/value groups (`projector_group` query heads each, > 1) stand side by side in one row, a gap between groups.
    """
    named = alt.NamedData(name=HEAD_PANELS_DATA)
    if projector_group == 0:
        cells = _cells(tokens, causal, panel_size(len(tokens), columns), "bottom")
        chart: alt.FacetChart | alt.HConcatChart = _facet(cells, heads, columns, data=named)
    elif projector_group == 1:
        rows = -(-len(heads) // columns)
        cells = _cells(tokens, causal, projector_panel_size(len(tokens), rows, columns), "right")
        chart = _facet(cells, heads, columns, data=named)
    else:
        cells = _cells(tokens, causal, projector_panel_size(len(tokens), 1, len(heads)), "right")
        groups = [heads[i : i + projector_group] for i in range(0, len(heads), projector_group)]
        chart = alt.hconcat(
            *[_group_facet(cells, group, tokens, labelled=i == 0, data=named) for i, group in enumerate(groups)],
            spacing=GROUP_GAP_PX,
        )
    return chart.resolve_scale(x="shared", y="shared", color="shared").properties(
        title=alt.Title(title, subtitle="rows: queries, columns: keys"),
        # SVG however many cells (Streamlit draws over 2,000 marks on a canvas): as every other chart of the
        # lab, whose labels and colours the browser tests read; lesson 10's layer reaches 9 x 64 x 64.
        usermeta={"embedOptions": {"renderer": "svg"}},
    )


@functools.lru_cache(maxsize=64)
def _panels_template(
    tokens: tuple[str, ...], heads: tuple[str, ...], title: str, causal: bool, columns: int, projector_group: int
) -> str:
    return template(_panels(tokens, heads, title, causal, columns, projector_group))


def head_panels(
    frame: pd.DataFrame,
    title: str,
    *,
    causal: bool = False,
    columns: int | None = None,
    projector_group: int = 0,
) -> VegaChart:
    """One layer's heads as small multiples (see the module docstring for `frame`'s columns); `columns` panels a
    row (default `panel_columns`: a decoder's layer passes its group size, one row per key/value head).

    `projector_group` > 0 draws the projector's layout (see `_panels`): `columns` a row, or with a group size > 1
    every key/value group side by side in one row."""
    tokens = tuple(dict.fromkeys(frame.sort_values("row_index")["row"]))
    # A model's heads are numbered (0, 1, …), the random lesson's already labelled ("head 1", …).
    names = {h: f"head {h}" if isinstance(h, int | np.integer) else str(h) for h in frame["head"].unique()}
    heads = tuple(dict.fromkeys(names.values()))
    # Sent compactly (a model's 12 heads of 64 x 64 are 49,152 cells): the labels as categories (an Arrow
    # dictionary, each label sent once), the weights as float32 (the tooltip shows 4 decimals), small positions.
    data = pd.DataFrame(
        {
            "head": pd.Categorical(frame["head"].map(names), categories=list(heads)),
            "row": frame["row"],
            "col": frame["col"],
            "value": frame["value"].astype(np.float32),
            "row_index": frame["row_index"].astype(np.int16),
            "col_index": frame["col_index"].astype(np.int16),
        }
    )
    return VegaChart(
        _panels_template(tokens, heads, title, causal, columns or panel_columns(len(heads)), projector_group),
        {HEAD_PANELS_DATA: data},
    )
