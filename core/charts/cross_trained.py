"""Chart builders for lesson 7's trained cross-attention: DataFrame in, `VegaChart` out. No streamlit here."""

from __future__ import annotations

from dataclasses import dataclass

import altair as alt
import pandas as pd

from core.charts.common import GROWS_FOR_TEXT, PLOT_HEIGHT
from core.charts.heatmap import heatmap
from core.charts.spec import VegaChart, from_altair, phone_title

WEIGHT_RANGE = (0.0, 1.0)  # both heatmaps on one colour scale, so that their colours compare


@dataclass(frozen=True)
class AlignmentCharts:
    """The trained weights and the sources' random weights on the same pair, drawn side by side.

    Two charts, not one concatenation: each fills its own column, and a phone stacks the columns.
    """

    trained: VegaChart
    random: VegaChart


def alignment_heatmaps(trained: pd.DataFrame, random: pd.DataFrame) -> AlignmentCharts:
    """Heatmaps of two (English words × German words) weight frames (`matrix_frame`), on one 0–1 scale."""
    options = {"value_title": "weight", "x_title": "German word read (key)", "y_title": "English word written (query)"}
    return AlignmentCharts(
        trained=heatmap(trained, "Trained cross-attention", domain=WEIGHT_RANGE, **options),
        random=heatmap(random, "Random weights (torch.rand, as the sources)", domain=WEIGHT_RANGE, **options),
    )


def share_curve(curve: pd.DataFrame, target: float) -> VegaChart:
    """The held-out alignment share against the training step, with the target as a dotted rule.

    curve: columns step, share (core.lessons.cross_attention_trained.curve_frame).
    """
    line = (
        alt.Chart(curve, title=phone_title("Weight on the right German word, held-out sentences"))
        .mark_line(point=True)
        .encode(
            x=alt.X("step:Q", title="training step"),
            y=alt.Y("share:Q", title="share of the weight", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")),
            tooltip=[alt.Tooltip("step:Q"), alt.Tooltip("share:Q", format=".3f")],
        )
        .properties(width="container", height=PLOT_HEIGHT)
    )
    rule = (
        alt.Chart(pd.DataFrame({"target": [target], "label": [f"target {target:.0%}"]}))
        .mark_rule(color="#595959", strokeDash=[2, 2])
        .encode(y="target:Q", tooltip=[alt.Tooltip("label:N")])
    )
    # The line says what it is (a reviewer asked what the dotted line was), in the page's text colour (dark
    # mode too) and at least as large as a heatmap's numbers (MIN_CELL_FONT_PX).
    # At the right end, under the rule: the curve crosses the rule near the left, and ends above it.
    label = rule.mark_text(align="right", baseline="top", dx=-4, dy=4, fontSize=15, color="currentColor").encode(
        x=alt.value("width"), text="label:N"
    )
    return from_altair(alt.layer(line, rule, label).properties(autosize=GROWS_FOR_TEXT))
