"""Chart builders for the training lab: DataFrame in, `alt.Chart` out. No streamlit here.

The frames come from `core.tiny_transformer` (`curves_frame`, `start_frame`). Colours are
Tableau 10 (colour-blind safe in its first six, and the page keeps at most six runs); unscaled
runs are dashed, so "scaled vs unscaled" reads without colour too.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

CURVE_WIDTH = 340
CURVE_HEIGHT = 240


def _curve(frame: pd.DataFrame, metric: str, title: str, y: alt.Y) -> alt.Chart:
    runs = list(dict.fromkeys(frame["run"]))
    return (
        alt.Chart(frame[frame["metric"] == metric], title=title)
        .mark_line(point=alt.OverlayMarkDef(size=18))
        .encode(
            x=alt.X("step:Q", title="step"),
            y=y,
            color=alt.Color(
                "run:N",
                sort=runs,
                scale=alt.Scale(scheme="tableau10"),
                legend=alt.Legend(orient="bottom", columns=1, labelLimit=0),  # the whole label: runs differ at its end
            ),
            strokeDash=alt.StrokeDash(
                "scaling:N",
                scale=alt.Scale(domain=["scaled", "unscaled"], range=[[1, 0], [6, 4]]),
                title="scores",
                legend=alt.Legend(symbolType="stroke"),
            ),
            tooltip=[
                alt.Tooltip("run:N"),
                alt.Tooltip("step:Q"),
                alt.Tooltip("value:Q", title=metric, format=".4f"),
            ],
        )
        .properties(width=CURVE_WIDTH, height=CURVE_HEIGHT)
    )


def curves_chart(frame: pd.DataFrame, chance: pd.DataFrame | None = None) -> alt.HConcatChart:
    """Training loss (log scale) and held-out accuracy against the step, one line per run.

    frame: long, with columns run, scaling ("scaled"/"unscaled"), step, metric ("loss"/"accuracy"), value.
    chance: optional, columns label, accuracy: a grey dotted rule on the accuracy panel for each row
    (what a model without the task's lookup scores), labelled at its right end.
    """
    loss = _curve(frame, "loss", "Training loss", alt.Y("value:Q", title="cross-entropy", scale=alt.Scale(type="log")))
    accuracy = _curve(
        frame,
        "accuracy",
        "Held-out accuracy",
        alt.Y("value:Q", title="accuracy", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")),
    )
    if chance is not None and len(chance):
        base = alt.Chart(chance).encode(y="accuracy:Q")
        rule = base.mark_rule(color="#595959", strokeDash=[2, 2]).encode(tooltip=[alt.Tooltip("label:N")])
        label = base.mark_text(align="right", baseline="bottom", dx=-2, color="#595959", x="width").encode(
            text="label:N"
        )
        accuracy = alt.layer(accuracy, rule, label)
    return alt.hconcat(loss, accuracy).resolve_scale(color="shared", strokeDash="shared")


def start_chart(frame: pd.DataFrame) -> alt.FacetChart:
    """At initialisation, scaled vs unscaled, one panel per quantity (each its own y axis).

    frame: long, with columns quantity, scores ("scaled"/"unscaled"), value.
    """
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("scores:N", title=None, sort=["scaled", "unscaled"]),
            y=alt.Y("value:Q", title=None),
            color=alt.Color(
                "scores:N", scale=alt.Scale(domain=["scaled", "unscaled"], range=["#4c78a8", "#f58518"]), legend=None
            ),
            tooltip=[alt.Tooltip("quantity:N"), alt.Tooltip("scores:N"), alt.Tooltip("value:Q", format=".4g")],
        )
        .properties(width=150, height=180)
        .facet(column=alt.Column("quantity:N", title=None, sort=list(dict.fromkeys(frame["quantity"]))))
        .resolve_scale(y="independent")
    )
