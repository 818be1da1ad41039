"""The hot chart builders give exactly the spec of the plain Altair spelling (strings, alt.condition).

core.charts builds these charts from channel objects (alt.Tooltip, alt.ColorValue) because Altair
rebuilds its schema map for every dict or string channel (~5 ms each, every rerun): same spec, faster.
"""

from __future__ import annotations

import json

import altair as alt
import pandas as pd
import pytest

from core import charts

FRAME = pd.DataFrame(
    {
        "token": ["Your", "journey", "starts"],
        "score": [0.5, 0.9, 0.1],
        "measure": ["dot", "dot", "dot"],
        "position": [0, 1, 2],
        "max change": [0.0, 0.0, 0.2],
    }
)


def spec(chart: alt.Chart) -> dict:
    return chart.to_dict(validate=True)


def test_grouped_bars_spec_unchanged() -> None:
    plain = (
        alt.Chart(FRAME, title="t")
        .mark_bar()
        .encode(
            x=alt.X("token:N", sort=list(FRAME["token"]), axis=charts.token_axis(3)),
            xOffset=alt.XOffset("measure:N"),
            y=alt.Y("score:Q", title="score"),
            color=alt.Color(
                "measure:N", scale=alt.Scale(scheme="tableau10"), title=None, legend=alt.Legend(orient="bottom")
            ),
            tooltip=["token:N", "measure:N", alt.Tooltip("score:Q", format=".4f")],
        )
    )
    assert spec(charts.grouped_bars(FRAME, "token", "score", "measure", "t")) == spec(plain)


def test_bars_with_a_highlight_spec_unchanged() -> None:
    plain = (
        alt.Chart(FRAME, title="t")
        .mark_bar()
        .encode(
            x=alt.X("token:N", sort=list(FRAME["token"]), axis=charts.token_axis(3)),
            y=alt.Y("score:Q"),
            color=alt.condition(alt.datum["token"] == "journey", alt.value("#e45756"), alt.value("#4c78a8")),
            tooltip=["token:N", alt.Tooltip("score:Q", format=".4f")],
        )
    )
    assert spec(charts.bars(FRAME, "token", "score", "t", highlight="journey")) == spec(plain)
    no_highlight = spec(charts.bars(FRAME, "token", "score", "t"))
    assert no_highlight["encoding"]["color"] == {"value": "#4c78a8"}


def test_leakage_chart_spec_unchanged() -> None:
    plain = (
        alt.Chart(FRAME, title="Change in each output row after perturbing one token")
        .mark_bar()
        .encode(
            x=alt.X("token:N", sort=list(FRAME["token"]), axis=charts.token_axis(3)),
            y=alt.Y("max change:Q", title="largest change in the output row"),
            color=alt.condition(alt.datum.position < 2, alt.value("#4c78a8"), alt.value("#e45756")),
            tooltip=["token:N", alt.Tooltip("max change:Q", format=".6f")],
        )
    )
    assert spec(charts.leakage_chart(FRAME, 2)) == spec(plain)


def test_draw_sends_named_datasets_as_arrow_and_leaves_the_spec_alone(monkeypatch) -> None:
    import pyarrow as pa

    from ui import draw

    sent = {}
    monkeypatch.setattr(draw.st, "vega_lite_chart", lambda spec, **kwargs: sent.update(spec=spec))
    records = [{"d_k": 1, "variance": 0.5}, {"d_k": 2, "variance": 1.9}]
    spec = {"mark": "point", "datasets": {"values": records}}
    draw.draw(spec, "a chart")
    table = sent["spec"]["datasets"]["values"]
    assert isinstance(table, pa.Table) and table.to_pylist() == records
    assert spec["datasets"]["values"] is records  # the caller's (possibly cached) spec is untouched
    assert sent["spec"]["mark"] == "point"


def from_template(template: str, frame: pd.DataFrame) -> dict:
    """A cached template with its values, as `ui.draw.draw` sends it (records here)."""
    spec = json.loads(template)
    spec["datasets"] = {charts.BARS_DATA: frame.to_dict(orient="records")}
    return spec


def inline_as_named(chart: alt.Chart) -> dict:
    """The reference build with its inline data renamed to BARS_DATA, and readable text as drawn."""
    spec = charts.readable(chart.to_dict(validate=True))
    name = spec.pop("data")["name"]
    spec["datasets"] = {charts.BARS_DATA: spec["datasets"].pop(name)}
    return spec


@pytest.mark.parametrize("title", ["t", "Weights for “journey” with scores × 8"])
def test_the_grouped_bars_template_draws_what_grouped_bars_does(title: str) -> None:
    long = FRAME.melt(id_vars="token", value_vars=["score"], var_name="measure", value_name="value")
    template = charts.grouped_bars_template(tuple(FRAME["token"]), "token", "value", "measure", title)
    fast = from_template(template, long)
    assert fast.pop("data") == {"name": charts.BARS_DATA}
    assert fast == inline_as_named(charts.grouped_bars(long, "token", "value", "measure", title))


@pytest.mark.parametrize("position", [1, 2, 3])
def test_the_leakage_template_draws_what_leakage_chart_does(position: int) -> None:
    fast = from_template(charts.leakage_template(tuple(FRAME["token"]), position), FRAME)
    assert fast.pop("data") == {"name": charts.BARS_DATA}
    assert fast == inline_as_named(charts.leakage_chart(FRAME, position))
