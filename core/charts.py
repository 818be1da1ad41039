"""Pure chart builders: DataFrame in, `alt.Chart` out. No streamlit here.

Colour schemes are colour-blind safe: viridis for weights (0..1), a diverging
blue-orange centred at 0 for signed values. Text labels flip colour for contrast.
"""

from __future__ import annotations

import functools
import json

import altair as alt
import numpy as np
import pandas as pd

QUERY_SELECTION = "query_row"  # name of the click selection on heatmaps


HEATMAP_DATA = "heatmap_values"  # the one dataset name in every heatmap spec


def heatmap_columns(frame: pd.DataFrame, signed: bool = False) -> dict[str, np.ndarray]:
    """The heatmap's dataset as columns: row, col, value (6 decimals), row_index, text_color.

    text_color puts dark text on light cells and light text on dark cells; it is computed
    here rather than as a Vega condition so that the chart's spec depends on the values
    only through its data (which is what lets `heatmap_spec` reuse a built spec).
    """
    values = frame["value"].to_numpy(dtype=np.float64)
    if signed:
        light = np.abs(values) > np.abs(values).max() * 0.5
    else:
        light = values > (values.min() + values.max()) / 2
    return {
        "row": frame["row"].to_numpy(dtype=object),
        "col": frame["col"].to_numpy(dtype=object),
        "value": np.round(values, 6),
        "row_index": frame["row_index"].to_numpy(dtype=np.int64),
        "text_color": np.where(light, "black", "white").astype(object),
    }


def heatmap_records(frame: pd.DataFrame, signed: bool = False) -> list[dict]:
    """The dataset as Vega-Lite records (plain Python values)."""
    columns = heatmap_columns(frame, signed)
    return [dict(zip(columns, row, strict=True)) for row in zip(*(c.tolist() for c in columns.values()), strict=True)]


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
    min_magnitude: float = 0.0,
) -> alt.LayerChart:
    """A labelled heatmap of a long matrix frame (row, col, value, row_index, col_index).

    Signed maps use a diverging scale centred at 0. `min_magnitude` fixes a signed
    map's colour range at ±min_magnitude, so float noise (1e-8) in a difference matrix
    stays white instead of being stretched to full colour.
    """
    rows = list(dict.fromkeys(frame["row"]))
    cols = list(dict.fromkeys(frame["col"]))
    if signed and min_magnitude > 0:
        scale = alt.Scale(scheme="blueorange", domainMid=0, domain=[-min_magnitude, min_magnitude], clamp=True)
    elif signed:
        scale = alt.Scale(scheme="blueorange", domainMid=0)
    else:
        scale = alt.Scale(scheme="viridis")
    base = alt.Chart(title=title).encode(
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
        # Fewer decimals as cells get narrower; the tooltip always has four.
        decimals, font = (4, 11) if len(cols) <= 4 else (3, 10) if len(cols) <= 8 else (2, 8)
        text = base.mark_text(fontSize=font).encode(
            text=alt.Text("value:Q", format=f".{decimals}f"),
            color=alt.Color(
                # an explicit identity scale: `scale=None` ("scale": null) breaks Streamlit's chart theming
                "text_color:N",
                scale=alt.Scale(domain=["black", "white"], range=["black", "white"]),
                legend=None,
            ),
        )
        layers.append(text)
    # Size by cell (a "step" per category) so each number fits its cell at any matrix size.
    cell_width = 62 if len(cols) <= 6 else 46 if len(cols) <= 10 else 30
    cell_height = 28 if len(rows) <= 12 else 20
    data = alt.NamedData(name=HEATMAP_DATA)
    return alt.layer(*layers, data=data).properties(width=alt.Step(cell_width), height=alt.Step(cell_height))


def heatmap_to_dict(frame: pd.DataFrame, title: str, **options) -> dict:
    """The heatmap's full Vega-Lite spec, its values included (validated by Altair)."""
    spec = heatmap(frame, title, **options).to_dict()
    spec["datasets"] = {HEATMAP_DATA: heatmap_records(frame, options.get("signed", False))}
    return spec


@functools.lru_cache(maxsize=512)
def _heatmap_template(rows: tuple[str, ...], cols: tuple[str, ...], title: str, options: tuple) -> str:
    """One heatmap look (labels + options) serialised once; a str so nobody can mutate it."""
    skeleton = pd.DataFrame({"row": [r for r in rows for _ in cols], "col": [c for _ in rows for c in cols]})
    skeleton = skeleton.assign(value=0.0, row_index=0)
    return json.dumps(heatmap(skeleton, title, **dict(options)).to_dict())


def heatmap_template(frame: pd.DataFrame, title: str, **options) -> dict:
    """The heatmap's spec without its values (a fresh copy: callers may add datasets)."""
    rows = tuple(dict.fromkeys(frame["row"]))
    cols = tuple(dict.fromkeys(frame["col"]))
    return json.loads(_heatmap_template(rows, cols, title, tuple(sorted(options.items()))))


def heatmap_spec(frame: pd.DataFrame, title: str, **options) -> dict:
    """`heatmap_to_dict` for the app's hot path: the spec is built once per look, then only
    the values change (Altair's build and validation cost ~20 ms a chart; this ~0.1 ms).
    tests/test_charts.py checks both give the same spec for fresh data.
    """
    spec = heatmap_template(frame, title, **options)
    spec["datasets"] = {HEATMAP_DATA: heatmap_records(frame, options.get("signed", False))}
    return spec


def with_values(template: str, dataset: str, records: list[dict]) -> dict:
    """A fresh spec from a cached template (a JSON string, never mutated) plus its values."""
    spec = json.loads(template)
    spec["datasets"] = {dataset: records}
    return spec


def _color_if(test: alt.expr.core.Expression, then: str, otherwise: str) -> alt.ColorValue:
    """`alt.condition(test, alt.value(then), alt.value(otherwise))`, the same spec, built fast.

    Altair turns a channel given as a dict or a shorthand string (what alt.condition and
    alt.value return, or "token:N" in a tooltip list) into its class by rebuilding a map of
    its whole schema: ~5 ms each, several times per chart and rerun (py-spy, bench/capacity.py).
    Channel objects (alt.ColorValue, alt.Tooltip) skip that; tests/test_charts_fast.py checks
    the specs are identical.
    """
    return alt.ColorValue(otherwise, condition={"test": test, "value": then})


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
            tooltip=[alt.Tooltip(f"{x}:N"), alt.Tooltip(f"{group}:N"), alt.Tooltip(f"{value}:Q", format=".4f")],
        )
    )


def bars(frame: pd.DataFrame, x: str, value: str, title: str, *, highlight: str | None = None) -> alt.Chart:
    """Simple bars; `highlight` names one x value drawn in a contrasting colour."""
    color = (
        _color_if(alt.datum[x] == highlight, "#e45756", "#4c78a8")
        if highlight is not None
        else alt.ColorValue("#4c78a8")
    )
    return (
        alt.Chart(frame, title=title)
        .mark_bar()
        .encode(
            x=alt.X(f"{x}:N", sort=list(dict.fromkeys(frame[x])), title=None, axis=alt.Axis(labelAngle=-40)),
            y=alt.Y(f"{value}:Q"),
            color=color,
            tooltip=[alt.Tooltip(f"{x}:N"), alt.Tooltip(f"{value}:Q", format=".4f")],
        )
    )


VARIANCE_DATA = "variance_values"
_VARIANCE_NAMES = {
    "unscaled_var": "q·k (measured)",
    "scaled_var": "q·k/√d_k (measured)",
    "theory_unscaled": "theory: d_k",
    "theory_scaled": "theory: 1",
}


def variance_data(frame: pd.DataFrame) -> pd.DataFrame:
    """dot_product_variance's table, long: d_k, series, variance, kind (measured | theory)."""
    long = frame.melt(id_vars="d_k", value_vars=list(_VARIANCE_NAMES), var_name="series", value_name="variance")
    kind = np.where(long["series"].str.startswith("theory"), "theory", "measured")
    return long.assign(series=long["series"].map(_VARIANCE_NAMES), kind=kind)


def variance_chart(frame: pd.DataFrame | None = None) -> alt.LayerChart:
    """Monte Carlo variance of q.k vs d_k (points) with the theory lines d_k and 1, log-log.

    The values come from the named dataset VARIANCE_DATA (= variance_data(frame)).
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
            tooltip=["d_k:Q", "series:N", alt.Tooltip("variance:Q", format=".3f")],
        )
    )
    return alt.layer(lines, points, data=alt.NamedData(name=VARIANCE_DATA)).properties(
        title="Variance of the dot product: unscaled grows like d_k"
    )


def variance_to_dict(frame: pd.DataFrame) -> dict:
    """The variance chart's full spec, values included (validated by Altair)."""
    spec = variance_chart(frame).to_dict()
    spec["datasets"] = {VARIANCE_DATA: variance_data(frame).to_dict(orient="records")}
    return spec


@functools.lru_cache(maxsize=1)
def _variance_template() -> str:
    return json.dumps(variance_chart().to_dict())


def variance_spec(frame: pd.DataFrame) -> dict:
    """`variance_to_dict` for the hot path: structure built once, values swapped in."""
    return with_values(_variance_template(), VARIANCE_DATA, variance_data(frame).to_dict(orient="records"))


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


PEAKINESS_DATA = "peakiness_values"
_PEAKINESS_TITLES = {
    "max_weight": "mean max weight",
    "entropy": "mean entropy (nats)",
    "effective_tokens": "effective tokens",
}


def peakiness_chart(metric: str) -> alt.Chart:
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
            color=alt.Color("scaling:N", scale=alt.Scale(domain=["unscaled", "scaled"], range=["#e45756", "#4c78a8"])),
            tooltip=["d_k:Q", "scaling:N", alt.Tooltip(f"{metric}:Q", format=".3f")],
        )
    )


@functools.lru_cache(maxsize=8)
def _peakiness_template(metric: str) -> str:
    return json.dumps(peakiness_chart(metric).to_dict())


def peakiness_spec(frame: pd.DataFrame, metric: str) -> dict:
    """The peakiness chart's spec with `frame`'s values (structure built once per metric)."""
    return with_values(_peakiness_template(metric), PEAKINESS_DATA, frame.to_dict(orient="records"))


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
            color=_color_if(alt.datum.position < position, "#4c78a8", "#e45756"),
            tooltip=[alt.Tooltip("token:N"), alt.Tooltip("max change:Q", format=".6f")],
        )
    )
