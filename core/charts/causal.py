"""Lesson 4's leakage chart: how much each output row changes after one token is perturbed (the causal
mask keeps every row before it unchanged). A pure chart builder; no streamlit here.
"""

from __future__ import annotations

import functools

import altair as alt
import pandas as pd
from altair.expr.core import Expression

from core.charts.common import BARS_DATA, GROWS_FOR_TEXT, PLOT_HEIGHT, X_SORT, token_axis
from core.charts.spec import (
    VegaChart,
    phone_title,
    template,
)


def _color_if(test: Expression, then: str, otherwise: str) -> alt.ColorValue:
    """`alt.condition(test, alt.value(then), alt.value(otherwise))`, the same spec, built fast.

    Altair turns a channel given as a dict or a shorthand string (what alt.condition and
    alt.value return, or "token:N" in a tooltip list) into its class by rebuilding a map of
    its whole schema, several times per chart and rerun (bench/NOTES.md).
    Channel objects (alt.ColorValue, alt.Tooltip) skip that; tests/unit/test_charts_fast.py checks
    the specs are identical.
    """
    return alt.ColorValue(otherwise, condition={"test": test, "value": then})


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
