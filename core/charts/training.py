"""Chart builders for the training lab: DataFrame in, `VegaChart` out. No streamlit here.

These are built with their data inline and split into template and data by `from_altair`: a
student's own runs differ on every press, so there is no look to cache.

The frames come from `core.tiny_transformer` (`curves_frame`, `start_frame`). Colours are
Tableau 10 (colour-blind safe in its first six, and the page keeps at most six runs); unscaled
runs are dashed, so "scaled vs unscaled" reads without colour too.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from core.charts.spec import VegaChart, from_altair

CURVE_HEIGHT = 260
# The height is the plot's own: a plain "fit" autosize took the legend below the lines (up to six runs, two
# columns) out of the 240 px and left about 60 px of plot, unreadable on a projector.
FIT_WIDTH = alt.AutoSizeParams(type="fit-x", contains="padding")


def run_names(frame: pd.DataFrame) -> list[str]:
    """The legend's name of each run, in order: "run 1 · scaled", "run 2 · unscaled", ...

    The run's full label ("1. prev · 1L×2h · ...", ~70 characters) is wider than a phone; the
    page lists each run's setup under the charts.
    """
    runs = frame.drop_duplicates("run")
    return [
        f"run {label.split('.', 1)[0]} · {scaling}" for label, scaling in zip(runs["run"], runs["scaling"], strict=True)
    ]


def _curve(frame: pd.DataFrame, metric: str, title: str, y: alt.Y) -> alt.Chart:
    """One metric against the step, one line per run, as wide as its column.

    Colour and dash share one field, so Vega-Lite draws one legend whose swatches are the
    lines themselves (unscaled runs dashed) with whole labels, below the chart. A separate dash
    legend had transparent swatches, and on the right it was clipped to "sc" at 1280 px.
    """
    names = run_names(frame)
    dashes = [[6, 4] if name.endswith("unscaled") else [1, 0] for name in names]
    legend = alt.Legend(
        orient="bottom", columns=2, symbolType="stroke", symbolStrokeWidth=2, symbolSize=400, labelLimit=0, title=None
    )
    return (
        alt.Chart(frame[frame["metric"] == metric], title=title)
        .transform_calculate(legend_name="'run ' + split(datum.run, '.')[0] + ' · ' + datum.scaling")
        .mark_line(point=alt.OverlayMarkDef(size=18))
        .encode(
            x=alt.X("step:Q", title="step"),
            y=y,
            color=alt.Color("legend_name:N", sort=names, scale=alt.Scale(scheme="tableau10"), legend=legend),
            strokeDash=alt.StrokeDash(
                "legend_name:N", sort=names, scale=alt.Scale(domain=names, range=dashes), legend=legend
            ),
            tooltip=[
                alt.Tooltip("run:N"),
                alt.Tooltip("step:Q"),
                alt.Tooltip("value:Q", title=metric, format=".4f"),
            ],
        )
        .properties(width="container", height=CURVE_HEIGHT)
    )


def curve_charts(frame: pd.DataFrame, chance: pd.DataFrame | None = None) -> tuple[VegaChart, VegaChart]:
    """Training loss (log scale) and held-out accuracy against the step, one line per run.

    Two charts, not one concatenation: each fills its own column, and a phone stacks the columns
    (two fixed 340 px panels side by side reached 986 px on a 390 px phone).
    frame: long, with columns run, scaling ("scaled"/"unscaled"), step, metric ("loss"/"accuracy"), value.
    chance: optional, columns label, accuracy: a grey dotted rule on the accuracy panel for each row
    (what a model without the task's lookup scores), labelled at its right end.
    """
    loss = _curve(frame, "loss", "Training loss", alt.Y("value:Q", title="cross-entropy", scale=alt.Scale(type="log")))
    accuracy: alt.Chart | alt.LayerChart | alt.FacetChart = _curve(  # alt.layer() types its result as either
        frame,
        "accuracy",
        "Held-out accuracy",
        alt.Y("value:Q", title="accuracy", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")),
    )
    if chance is not None and len(chance):
        base = alt.Chart(chance).encode(y="accuracy:Q")
        rule = base.mark_rule(color="#595959", strokeDash=[2, 2]).encode(tooltip=[alt.Tooltip("label:N")])
        label = base.mark_text(  # the page's text colour: #595959 all but vanished on the dark theme
            align="right", baseline="bottom", dx=-2, fontSize=13, color="currentColor", x="width"
        ).encode(text="label:N")
        accuracy = alt.layer(accuracy, rule, label)
    return from_altair(loss.properties(autosize=FIT_WIDTH)), from_altair(accuracy.properties(autosize=FIT_WIDTH))


def start_chart(frame: pd.DataFrame) -> VegaChart:
    """At initialisation, scaled vs unscaled, one panel per quantity (each its own x axis).

    One panel under another, bars across, each quantity's name above its panel: three panels
    side by side were 620 px wide, off a 390 px phone.
    frame: long, with columns quantity, scores ("scaled"/"unscaled"), value.
    """
    return from_altair(
        alt.Chart(frame)
        .mark_bar()
        .encode(
            y=alt.Y("scores:N", title=None, sort=["scaled", "unscaled"]),
            x=alt.X("value:Q", title=None),
            color=alt.Color(
                "scores:N", scale=alt.Scale(domain=["scaled", "unscaled"], range=["#4c78a8", "#f58518"]), legend=None
            ),
            tooltip=[alt.Tooltip("quantity:N"), alt.Tooltip("scores:N"), alt.Tooltip("value:Q", format=".4g")],
        )
        .properties(width=240, height=90)
        .facet(
            row=alt.Row(
                "quantity:N",
                title=None,
                sort=list(dict.fromkeys(frame["quantity"])),
                header=alt.Header(labelOrient="top", labelAnchor="start", labelAngle=0, labelLimit=0),
            )
        )
        .resolve_scale(x="independent")
    )
