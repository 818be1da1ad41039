"""Chart builders for "From attention to the answer": DataFrames in, `VegaChart` out (templates built once).

The per-head maps (direct attribution, patching shares) are the clickable layers x heads map of lesson 6
(core.charts.real_model.measure). All three are signed (a head can push the logit down, or restore a negative
share), so they are blue-orange centred at 0, not viridis: a teacher sees a head's sign at a glance.
"""

from __future__ import annotations

import functools

import altair as alt
import pandas as pd

from core.charts import real_model
from core.charts.colours import LEGEND_SYMBOL
from core.charts.common import GROWS_FOR_TEXT
from core.charts.spec import VegaChart, phone_title, template

PARTS_DATA = "answer_parts"  # part, share, rank
LENS_DATA = "answer_lens"  # point, position, probability, rank, top
AGREEMENT_DATA = "answer_agreement"  # head, layer, head_index, exact, estimate, label
AGREEMENT_PX = 300  # the scatter's plot: shares from about -30% to 70% on both axes, near square on a laptop
AGREEMENT_TITLE = "Each head's share restored: attribution patching's estimate against exact patching"
PARTS_BAR_PX = 24  # a bar's height: room for its label at the projector's larger type
PARTS_TITLE = "The largest parts of the final residual (their shares of it)"
LENS_TITLE = "The logit lens: the answer's probability after every attention and MLP"
RANK_TITLE = "The answer's rank among all tokens (1 = top) after every attention and MLP"


@functools.cache
def _parts_template() -> str:
    chart = (
        alt.Chart(alt.NamedData(name=PARTS_DATA))
        .mark_bar()
        .encode(
            # Every bar named: Vega hid every other label of the 12 (parity) on a chart this short (a review).
            y=alt.Y("part:N", sort=alt.SortField("rank"), title=None, axis=alt.Axis(labelOverlap=False)),
            x=alt.X("share:Q", title="share of the final residual", axis=alt.Axis(format="%")),
            tooltip=["part:N", alt.Tooltip("share:Q", format=".3f")],
        )
        .properties(title=phone_title(PARTS_TITLE), width="container", height=alt.Step(PARTS_BAR_PX))
    )
    return template(chart)


def parts(frame: pd.DataFrame) -> VegaChart:
    """Bars of the largest parts: PARTS_DATA = frame (part, share, rank)."""
    return VegaChart(_parts_template(), {PARTS_DATA: frame})


@functools.cache
def _lens_template() -> str:
    chart = (
        alt.Chart(alt.NamedData(name=LENS_DATA))
        .mark_line(point=True)
        .encode(
            x=alt.X("point:N", sort=alt.SortField("position"), title=None, axis=alt.Axis(labelAngle=-60)),
            y=alt.Y("probability:Q", title="probability of the answer", axis=alt.Axis(format="%")),
            tooltip=["point:N", alt.Tooltip("probability:Q", format=".3f"), "top:N"],
        )
        .properties(title=phone_title(LENS_TITLE), width="container")
    )
    return template(chart)


def lens(frame: pd.DataFrame) -> VegaChart:
    """The answer's probability at every lens point: LENS_DATA = frame (point, position, probability, rank, top)."""
    return VegaChart(_lens_template(), {LENS_DATA: frame})


# A log axis's label: the value at a power of ten ("1", "10", ..., "10,000"), nothing at the ticks between.
POWERS_OF_TEN_ONLY = (
    "abs(log(datum.value) / LN10 - round(log(datum.value) / LN10)) < 1e-6 ? format(datum.value, ',') : ''"
)


@functools.cache
def _rank_template() -> str:
    chart = (
        alt.Chart(alt.NamedData(name=LENS_DATA))
        .mark_line(point=True)
        .encode(
            x=alt.X("point:N", sort=alt.SortField("position"), title=None, axis=alt.Axis(labelAngle=-60)),
            # Log scale: on SmolLM2 the answer sits thousands down until the last layers, then climbs to 1 (a
            # linear axis drew the climb as a flat line at 0). Reversed, so rank 1 is at the top, as "on top" reads.
            y=alt.Y(
                "rank:Q",
                title="rank of the answer",
                scale=alt.Scale(type="log", reverse=True, domainMin=1),
                # Every power of ten labelled, the ticks between unlabelled: Vega's own culling of overlapping
                # labels left "1, 20, 300", and 6,891 or 966 could not be read off (the s20 review).
                axis=alt.Axis(labelExpr=POWERS_OF_TEN_ONLY, labelOverlap=False),
            ),
            tooltip=["point:N", alt.Tooltip("rank:Q", format=","), "top:N"],
        )
        # The default height, as the lens above: a fixed 180 px was the whole chart once Streamlit fits it to its
        # column, and the 60 slanted point labels and the title took all but 2 px of it (the display test).
        .properties(title=phone_title(RANK_TITLE), width="container")
    )
    return template(chart)


def lens_rank(frame: pd.DataFrame) -> VegaChart:
    """The answer's rank (1 = top, log axis) at every lens point: LENS_DATA = the lens's own frame."""
    return VegaChart(_rank_template(), {LENS_DATA: frame})


def head_map(frame: pd.DataFrame, title: str, value_title: str, layers_across: bool = False) -> VegaChart:
    """A layers x heads map of a signed value (layer, head, value, chosen), clickable (real_model.HEAD_SELECTION);
    layers_across: the layers along x, for a projector's screen (real_model.measure_map)."""
    return real_model.measure(frame, title, value_title, signed=True, layers_across=layers_across)


@functools.cache
def _agreement_template() -> str:
    base = alt.Chart(alt.NamedData(name=AGREEMENT_DATA))
    across, up = "share restored, exact patching", "share restored, estimated"
    x = alt.X("exact:Q", title=across, axis=alt.Axis(format="%"))
    y = alt.Y("estimate:Q", title=up, axis=alt.Axis(format="%"))
    tooltip = ["head:N", alt.Tooltip("exact:Q", format=".1%"), alt.Tooltip("estimate:Q", format=".1%")]
    # Where the two agree: the line estimate = exact, drawn from the data's own range (both axes).
    diagonal = (
        base.transform_fold(["exact", "estimate"], as_=["method", "share"])
        .transform_aggregate(low="min(share)", high="max(share)")
        .transform_fold(["low", "high"], as_=["end", "value"])
        .mark_line(strokeDash=[4, 4], color=LEGEND_SYMBOL)  # grey, readable on either theme
        .encode(x=alt.X("value:Q", title=across), y=alt.Y("value:Q", title=up))
    )
    points = base.mark_circle(size=40, opacity=0.7).encode(x=x, y=y, tooltip=tooltip)
    labels = (
        base.transform_filter(alt.datum.label != "")
        .mark_text(align="left", dx=6, dy=-6, color=LEGEND_SYMBOL)  # Vega's default black vanished on dark
        .encode(x=x, y=y, text="label:N")
    )
    # The plot keeps its height and the view grows for the title and axes: in a fixed total height the two-line
    # title and the axes left the dots a strip 40 px tall.
    chart = alt.layer(diagonal, points, labels).properties(
        title=phone_title(AGREEMENT_TITLE), width="container", height=AGREEMENT_PX, autosize=GROWS_FOR_TEXT
    )
    return template(chart)


def patching_agreement(frame: pd.DataFrame) -> VegaChart:
    """A dot per head, exact share across and estimated share up, the heads on top of either map named, and the
    dashed line where the two would agree: AGREEMENT_DATA = frame (core.lessons.to_the_answer_frames)."""
    return VegaChart(_agreement_template(), {AGREEMENT_DATA: frame})
