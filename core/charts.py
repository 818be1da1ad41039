"""Pure chart builders: DataFrame in, `alt.Chart` out. No streamlit here.

Colour schemes are colour-blind safe: viridis for weights (0..1), a diverging
blue-orange centred at 0 for signed values. Text labels flip colour for contrast.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

QUERY_SELECTION = "query_row"  # name of the click selection on heatmaps


def heatmap(
    frame: pd.DataFrame,
    title: str,
    *,
    signed: bool = False,
    value_title: str = "value",
    show_values: bool = True,
    select_rows: bool = False,
    x_title: str = "key",
    y_title: str = "query",
    height: int | None = None,
    min_magnitude: float = 0.0,
) -> alt.Chart:
    """A labelled heatmap of a long matrix frame (row, col, value, row_index, col_index).

    `min_magnitude` floors the colour range of a signed map, so float noise (1e-8)
    in a difference matrix stays white instead of being stretched to full colour.
    """
    rows = list(dict.fromkeys(frame["row"]))
    cols = list(dict.fromkeys(frame["col"]))
    magnitude = max(float(frame["value"].abs().max() or 1.0), min_magnitude)
    scale = (
        alt.Scale(scheme="blueorange", domainMid=0, domain=[-magnitude, magnitude])
        if signed
        else alt.Scale(scheme="viridis")
    )
    base = alt.Chart(frame, title=title).encode(
        x=alt.X("col:N", sort=cols, title=x_title, axis=alt.Axis(labelAngle=-40, labelOverlap=False)),
        y=alt.Y("row:N", sort=rows, title=y_title),
    )
    rect = base.mark_rect().encode(
        color=alt.Color("value:Q", scale=scale, title=value_title, legend=alt.Legend(orient="bottom")),
        tooltip=[
            alt.Tooltip("row:N", title=y_title),
            alt.Tooltip("col:N", title=x_title),
            alt.Tooltip("value:Q", format=".4f"),
        ],
    )
    if select_rows:
        pick = alt.selection_point(name=QUERY_SELECTION, fields=["row_index"], on="click")
        rect = rect.add_params(pick).encode(opacity=alt.condition(pick, alt.value(1.0), alt.value(0.55)))
    layers = [rect]
    if show_values and len(rows) * len(cols) <= 24 * 24:
        threshold = 0.0 if signed else float(frame["value"].min() + frame["value"].max()) / 2
        # Fewer decimals as cells get narrower; the tooltip always has four.
        decimals, font = (4, 11) if len(cols) <= 4 else (3, 10) if len(cols) <= 8 else (2, 8)
        text = base.mark_text(fontSize=font).encode(
            text=alt.Text("value:Q", format=f".{decimals}f"),
            color=alt.condition(
                f"abs(datum.value) > {magnitude * 0.5}" if signed else f"datum.value > {threshold}",
                alt.value("black"),
                alt.value("white"),
            ),
        )
        layers.append(text)
    # Size by cell (a "step" per category) so each number fits its cell at any matrix size.
    cell_width = 62 if len(cols) <= 6 else 46 if len(cols) <= 10 else 30
    cell_height = 28 if len(rows) <= 12 else 20
    return alt.layer(*layers).properties(
        width=alt.Step(cell_width), height=height if height is not None else alt.Step(cell_height)
    )


def grouped_bars(frame: pd.DataFrame, x: str, value: str, group: str, title: str) -> alt.Chart:
    """Bars of `value` per `x`, one colour per `group`, side by side."""
    return (
        alt.Chart(frame, title=title)
        .mark_bar()
        .encode(
            x=alt.X(f"{x}:N", sort=list(dict.fromkeys(frame[x])), title=None, axis=alt.Axis(labelAngle=-40)),
            xOffset=alt.XOffset(f"{group}:N"),
            y=alt.Y(f"{value}:Q", title=value),
            color=alt.Color(f"{group}:N", scale=alt.Scale(scheme="tableau10"), title=None),
            tooltip=[f"{x}:N", f"{group}:N", alt.Tooltip(f"{value}:Q", format=".4f")],
        )
    )


def bars(frame: pd.DataFrame, x: str, value: str, title: str, *, highlight: str | None = None) -> alt.Chart:
    """Simple bars; `highlight` names one x value drawn in a contrasting colour."""
    color = (
        alt.condition(alt.datum[x] == highlight, alt.value("#e45756"), alt.value("#4c78a8"))
        if highlight is not None
        else alt.value("#4c78a8")
    )
    return (
        alt.Chart(frame, title=title)
        .mark_bar()
        .encode(
            x=alt.X(f"{x}:N", sort=list(dict.fromkeys(frame[x])), title=None, axis=alt.Axis(labelAngle=-40)),
            y=alt.Y(f"{value}:Q"),
            color=color,
            tooltip=[f"{x}:N", alt.Tooltip(f"{value}:Q", format=".4f")],
        )
    )


def variance_chart(frame: pd.DataFrame) -> alt.Chart:
    """Monte Carlo variance of q.k vs d_k (points) with the theory lines d_k and 1, log-log."""
    measured = frame.melt(
        id_vars="d_k", value_vars=["unscaled_var", "scaled_var"], var_name="series", value_name="variance"
    )
    theory = frame.melt(
        id_vars="d_k", value_vars=["theory_unscaled", "theory_scaled"], var_name="series", value_name="variance"
    )
    names = {
        "unscaled_var": "q·k (measured)",
        "scaled_var": "q·k/√d_k (measured)",
        "theory_unscaled": "theory: d_k",
        "theory_scaled": "theory: 1",
    }
    measured["series"] = measured["series"].map(names)
    theory["series"] = theory["series"].map(names)
    colors = alt.Scale(domain=list(names.values()), range=["#e45756", "#4c78a8", "#e45756", "#4c78a8"])
    x = alt.X("d_k:Q", scale=alt.Scale(type="log", base=2), title="d_k (log scale)")
    y = alt.Y("variance:Q", scale=alt.Scale(type="log"), title="variance (log scale)")
    lines = alt.Chart(theory).mark_line(strokeDash=[6, 4]).encode(x=x, y=y, color=alt.Color("series:N", scale=colors))
    points = (
        alt.Chart(measured)
        .mark_point(filled=True, size=70)
        .encode(
            x=x,
            y=y,
            color=alt.Color("series:N", scale=colors, title=None),
            shape=alt.Shape("series:N", title=None),
            tooltip=["d_k:Q", "series:N", alt.Tooltip("variance:Q", format=".3f")],
        )
    )
    return alt.layer(lines, points).properties(title="Variance of the dot product: unscaled grows like d_k")


def sweep_chart(frame: pd.DataFrame, highlight: float) -> alt.Chart:
    """softmax(m · scores) per token for each multiplier m (the ×8 example)."""
    data = frame.assign(multiplier_label=frame["multiplier"].map(lambda m: f"×{m:g}"))
    order = [f"×{m:g}" for m in sorted(frame["multiplier"].unique())]
    return (
        alt.Chart(data, title="Softmax of the same scores, multiplied")
        .mark_bar()
        .encode(
            x=alt.X("token:N", title=None),
            y=alt.Y("weight:Q", scale=alt.Scale(domain=[0, 1])),
            column=alt.Column("multiplier_label:N", sort=order, title=None),
            color=alt.condition(alt.datum.multiplier == highlight, alt.value("#e45756"), alt.value("#4c78a8")),
            tooltip=["token:N", alt.Tooltip("weight:Q", format=".4f"), "multiplier:Q"],
        )
        .properties(width=90, height=180)
    )


def peakiness_chart(frame: pd.DataFrame, metric: str) -> alt.Chart:
    """`metric` (max_weight / entropy / effective_tokens) vs d_k, scaled and unscaled."""
    titles = {"max_weight": "mean max weight", "entropy": "mean entropy (nats)", "effective_tokens": "effective tokens"}
    return (
        alt.Chart(frame, title=f"{titles.get(metric, metric)} vs d_k (8 keys)")
        .mark_line(point=True)
        .encode(
            x=alt.X("d_k:Q", scale=alt.Scale(type="log", base=2), title="d_k (log scale)"),
            y=alt.Y(f"{metric}:Q", title=titles.get(metric, metric)),
            color=alt.Color("scaling:N", scale=alt.Scale(domain=["unscaled", "scaled"], range=["#e45756", "#4c78a8"])),
            tooltip=["d_k:Q", "scaling:N", alt.Tooltip(f"{metric}:Q", format=".3f")],
        )
    )


def saturation_chart(frame: pd.DataFrame) -> alt.Chart:
    """Softmax Jacobian norm (gradient size) vs the multiplier on [1, 0, 0]."""
    data = frame.melt(
        id_vars="multiplier", value_vars=["jacobian_norm", "max_weight"], var_name="quantity", value_name="value"
    )
    return (
        alt.Chart(data, title="Gradient through softmax([m, 0, 0]) dies as m grows")
        .mark_line(point=True)
        .encode(
            x=alt.X("multiplier:Q", scale=alt.Scale(type="log", base=2), title="score multiplier m (log scale)"),
            y=alt.Y("value:Q", title=None),
            color=alt.Color("quantity:N", scale=alt.Scale(scheme="tableau10"), title=None),
            tooltip=["multiplier:Q", "quantity:N", alt.Tooltip("value:Q", format=".5f")],
        )
    )


def leakage_chart(frame: pd.DataFrame, position: int) -> alt.Chart:
    """Largest change of each output row after perturbing the token at `position`."""
    return (
        alt.Chart(frame, title="Change in each output row after perturbing one token")
        .mark_bar()
        .encode(
            x=alt.X("token:N", sort=list(frame["token"]), title=None, axis=alt.Axis(labelAngle=-40)),
            y=alt.Y("max change:Q"),
            color=alt.condition(alt.datum.position < position, alt.value("#4c78a8"), alt.value("#e45756")),
            tooltip=["token:N", alt.Tooltip("max change:Q", format=".6f")],
        )
    )
