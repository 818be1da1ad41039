"""Chart builders checked through their Vega-Lite specs, without a server."""

from __future__ import annotations

import pandas as pd
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import core
from core import charts, lessons


def layer_data(spec: dict) -> list[dict]:
    return next(iter(spec["datasets"].values()))


def test_variance_chart_unscaled_grows_like_dk_scaled_stays_near_one() -> None:
    table = core.dot_product_variance(trials=50_000, generator=torch.Generator().manual_seed(0))
    spec = charts.variance_to_dict(table)
    assert spec == charts.variance_spec(table)  # the cached template gives the same spec
    assert spec["layer"][0]["encoding"]["x"]["scale"]["type"] == "log"
    assert spec["layer"][1]["encoding"]["y"]["scale"]["type"] == "log"
    points = pd.DataFrame(spec["datasets"][charts.VARIANCE_DATA])
    unscaled = points[points.series == "q·k (measured)"].set_index("d_k")["variance"]
    scaled = points[points.series == "q·k/√d_k (measured)"].set_index("d_k")["variance"]
    assert ((unscaled / unscaled.index) - 1).abs().max() < 0.05
    assert (scaled - 1).abs().max() < 0.05
    assert unscaled.loc[512] > 400 * unscaled.loc[1]


def test_heatmap_spec_labels_tokens_values_and_selection() -> None:
    frame = lessons.matrix_frame(torch.eye(3), ["a", "b", "c"], ["a", "b", "c"])
    spec = charts.heatmap_to_dict(frame, "weights", select_rows=True)
    rect, text = spec["layer"]
    assert rect["encoding"]["x"]["sort"] == ["a", "b", "c"]
    assert rect["encoding"]["color"]["scale"]["scheme"] == "viridis"
    assert {t["field"] for t in rect["encoding"]["tooltip"]} == {"row", "col", "value"}
    params = rect.get("params", []) + spec.get("params", [])  # layered specs hoist params
    assert [p["name"] for p in params] == [charts.QUERY_SELECTION]
    assert text["encoding"]["text"]["format"] == ".4f"
    records = spec["datasets"][charts.HEATMAP_DATA]
    assert len(records) == 9
    assert [r["text_color"] for r in records[:3]] == ["black", "white", "white"]  # light cell, dark text


def test_signed_heatmap_is_diverging_and_centred() -> None:
    frame = lessons.matrix_frame(torch.tensor([[-2.0, 1.0]]), ["q"], ["k1", "k2"])
    scale = charts.heatmap_to_dict(frame, "signed", signed=True)["layer"][0]["encoding"]["color"]["scale"]
    assert scale["domainMid"] == 0 and scale["scheme"] == "blueorange"
    noise = lessons.matrix_frame(torch.tensor([[-2e-9, 1e-9]]), ["q"], ["k1", "k2"])
    floor = charts.heatmap_to_dict(noise, "noise", signed=True, min_magnitude=1e-3)
    assert floor["layer"][0]["encoding"]["color"]["scale"]["domain"] == [-1e-3, 1e-3]


@settings(max_examples=25, deadline=None)
@given(
    rows=st.integers(1, 8),
    cols=st.integers(1, 8),
    seed=st.integers(0, 10_000),
    signed=st.booleans(),
    select_rows=st.booleans(),
)
def test_cached_heatmap_spec_equals_a_fresh_altair_build(
    rows: int, cols: int, seed: int, signed: bool, select_rows: bool
) -> None:
    labels_r, labels_c = [f"r{i}" for i in range(rows)], [f"c{j}" for j in range(cols)]
    g = torch.Generator().manual_seed(seed)
    first = lessons.matrix_frame(torch.randn(rows, cols, generator=g), labels_r, labels_c)
    second = lessons.matrix_frame(torch.randn(rows, cols, generator=g) * 50, labels_r, labels_c)
    options = {"signed": signed, "select_rows": select_rows, "value_title": "w"}
    charts.heatmap_spec(first, "t", **options)  # warms the template with other values
    assert charts.heatmap_spec(second, "t", **options) == charts.heatmap_to_dict(second, "t", **options)


def test_sweep_chart_shows_the_times_eight_example() -> None:
    long, _ = core.softmax_multiplier_sweep(torch.tensor([0.1, -0.2, 0.3, -0.2, 0.5]), [1, 8])
    data = pd.DataFrame(layer_data(charts.sweep_chart(long, 8.0).to_dict()))
    top = data[data.multiplier == 8].weight.max()
    assert round(top, 4) == 0.8000


def test_saturation_and_peakiness_charts() -> None:
    sat = pd.DataFrame(layer_data(charts.saturation_chart(core.saturation_sweep()).to_dict()))
    norms = sat[sat.quantity == "jacobian_norm"].sort_values("multiplier")["value"]
    assert norms.iloc[-1] < norms.iloc[0] / 100
    peaky = core.peakiness_vs_dk(trials=300, generator=torch.Generator().manual_seed(1))
    charts.peakiness_chart("max_weight").to_dict()  # validates the structure
    data = pd.DataFrame(charts.peakiness_spec(peaky, "max_weight")["datasets"][charts.PEAKINESS_DATA])
    at_512 = data[data.d_k == 512].set_index("scaling")["max_weight"]
    assert at_512["unscaled"] > at_512["scaled"] + 0.3
