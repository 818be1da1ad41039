"""Lesson 3's charts (why scale by 1/√d_k): the dot product's variance against d_k, the softmax's
peakiness and saturation as the scale changes. Pure chart builders; no streamlit here.
"""

from __future__ import annotations

import functools
from enum import StrEnum
from typing import cast

import altair as alt
import pandas as pd

from core.charts.common import GROWS_FOR_TEXT, PLOT_HEIGHT
from core.charts.spec import (
    VegaChart,
    from_altair,
    template,
)

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
        .properties(height=PLOT_HEIGHT, autosize=GROWS_FOR_TEXT)  # a fit to 300 px left its marks ~40 px (s25)
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
