"""The cached bar templates, filled, give exactly the spec of the plain Altair spelling.

core.charts (common, causal) builds its templates from channel objects (alt.Tooltip, alt.ColorValue) because Altair
rebuilds its schema map for every dict or string channel (bench/NOTES.md), once per number of
tokens (the tokens' order is a slot), and `VegaChart.spec()` fills them in: the result must be the
chart a reader would write with strings and alt.condition, for this very sentence.
"""

from __future__ import annotations

import json

import altair as alt
import pandas as pd
import pyarrow as pa
import pytest

from core.charts import causal as causal_charts
from core.charts import common as charts
from core.charts import spec as chart_spec
from core.charts import why_scale as scale_charts
from core.charts.spec import VegaChart

FRAME = pd.DataFrame(
    {
        "token": ["Your", "journey", "starts"],
        "score": [0.5, 0.9, 0.1],
        "measure": ["dot", "dot", "dot"],
        "position": [0, 1, 2],
        "max change": [0.0, 0.0, 0.2],
    }
)
OTHER = FRAME.assign(token=["one", "two", "three"])  # another sentence of the same length


def plain_spec(chart: alt.Chart, frame: pd.DataFrame) -> dict:
    """The plain spelling on named data, readable, validated by Altair, with its values as drawn."""
    spec = chart_spec.readable(chart.to_dict(validate=True))
    spec["datasets"] = {charts.BARS_DATA: pa.Table.from_pandas(frame, preserve_index=False)}
    return spec


def comparable(spec: dict) -> str:
    """A spec with its Arrow tables as records, as one string (dict order aside)."""
    tables = {name: table.to_pylist() for name, table in spec.pop("datasets").items()}
    return json.dumps({**spec, "datasets": tables}, sort_keys=True)


def grouped_plain(frame: pd.DataFrame, title: str) -> alt.Chart:
    return (
        alt.Chart(alt.NamedData(name=charts.BARS_DATA), title=chart_spec.phone_title(title))
        .mark_bar()
        .encode(
            x=alt.X("token:N", sort=list(frame["token"]), axis=charts.token_axis(len(frame))),
            xOffset=alt.XOffset("measure:N"),
            y=alt.Y("score:Q", title="score"),
            color=alt.Color(
                "measure:N",
                scale=alt.Scale(scheme="tableau10"),
                title=None,
                legend=alt.Legend(orient="bottom", columns=2),
            ),
            tooltip=["token:N", "measure:N", alt.Tooltip("score:Q", format=".4f")],
        )
        .properties(height=charts.PLOT_HEIGHT, autosize=charts.GROWS_FOR_TEXT)
    )


def leakage_plain(frame: pd.DataFrame, position: int) -> alt.Chart:
    return (
        alt.Chart(alt.NamedData(name=charts.BARS_DATA), title=chart_spec.phone_title(causal_charts.LEAKAGE_TITLE))
        .mark_bar()
        .encode(
            x=alt.X("token:N", sort=list(frame["token"]), axis=charts.token_axis(len(frame))),
            y=alt.Y("max change:Q", title="largest change in the output row"),
            color=alt.condition(alt.datum.position < position, alt.value("#4c78a8"), alt.value("#e45756")),
            tooltip=["token:N", alt.Tooltip("max change:Q", format=".6f")],
        )
        .properties(height=charts.PLOT_HEIGHT, autosize=charts.GROWS_FOR_TEXT)
    )


@pytest.mark.parametrize("title", ["t", "Weights for “journey” with scores × 8"])
def test_grouped_bars_equal_the_plain_spelling_for_each_sentence(title: str) -> None:
    for frame in (FRAME, OTHER):  # the second sentence reuses the first one's template
        fast = charts.grouped_bars(frame, "token", "score", "measure", title).spec()
        assert comparable(fast) == comparable(plain_spec(grouped_plain(frame, title), frame))
        # The s22 review: lesson 1's bars were 60-80 px tall, squeezed with their title and legend into 300 px.
        assert fast["height"] == charts.PLOT_HEIGHT and fast["autosize"]["contains"] == "padding"


@pytest.mark.parametrize("position", [1, 2, 3])
def test_leakage_bars_equal_the_plain_spelling_for_each_sentence(position: int) -> None:
    for frame in (FRAME, OTHER):
        fast = causal_charts.leakage(frame, position).spec()
        assert comparable(fast) == comparable(plain_spec(leakage_plain(frame, position), frame))


def test_a_new_sentence_of_the_same_length_reuses_the_template() -> None:
    first = causal_charts.leakage(FRAME, 2)
    second = causal_charts.leakage(OTHER, 2)
    assert first.template is second.template  # the cached str itself, not a rebuild
    assert first.spec()["encoding"]["x"]["sort"] == ["Your", "journey", "starts"]
    assert second.spec()["encoding"]["x"]["sort"] == ["one", "two", "three"]


def test_a_spec_is_fresh_each_time_and_leaves_the_chart_alone() -> None:
    records = [{"d_k": 1, "variance": 0.5}, {"d_k": 2, "variance": 1.9}]
    chart = VegaChart(
        '{"mark": "point", "encoding": {"x": {"sort": []}}}', {"values": records}, {("encoding", "x", "sort"): ["a"]}
    )
    spec = chart.spec()
    table = spec["datasets"]["values"]
    assert isinstance(table, pa.Table) and table.to_pylist() == records
    spec["encoding"]["x"]["sort"].append("b")  # a caller that changes its spec ...
    assert chart.spec()["encoding"]["x"]["sort"] == ["a"]  # ... changes no later one
    assert chart.data["values"] is records


def test_draw_sends_the_charts_spec_with_arrow_datasets(monkeypatch) -> None:
    from ui import draw

    sent = {}
    monkeypatch.setattr(draw.st, "vega_lite_chart", lambda spec, **kwargs: sent.update(spec=spec, **kwargs))
    draw.draw(causal_charts.leakage(FRAME, 2), "a chart")
    assert isinstance(sent["spec"]["datasets"][charts.BARS_DATA], pa.Table)
    assert sent["spec"]["encoding"]["x"]["sort"] == list(FRAME["token"])
    assert sent["alt"] == "a chart" and sent["theme"] == "streamlit"


def test_line_and_bar_charts_keep_their_plot_height_and_grow_for_their_text() -> None:
    """In Streamlit's default "fit" to 300 px, presentation mode's 20 px type squeezed the plot to about 80 px,
    the vertical axis title outgrew it and pushed the chart's title above the top edge, where it was cut
    (lesson 3's "mean max weight vs d_k", lesson 4's leakage bars, lesson 7's training curve, lesson 10's
    timings). Each now keeps PLOT_HEIGHT for its marks and the view grows for title, axes and legend."""
    from core.charts import cross_trained, inside_gpt

    peaks = pd.DataFrame({"d_k": [1, 2], "scaling": ["scaled", "unscaled"], "max_weight": [0.3, 0.4]})
    drawn = {
        "peakiness": scale_charts.peakiness(peaks, scale_charts.PeakMetric.MAX_WEIGHT),
        "leakage": causal_charts.leakage(FRAME, 2),
        "timing": inside_gpt.timing(pd.DataFrame({"length": [1, 2], "run": ["a", "a"], "ms": [1.0, 2.0]})),
        "share curve": cross_trained.share_curve(pd.DataFrame({"step": [0, 10], "share": [0.1, 0.9]}), 0.8),
        # lesson 3's gradient lines: its two-line title and one-a-line legend left the marks ~40 px (the s25 review)
        "saturation": scale_charts.saturation_chart(
            pd.DataFrame({"multiplier": [1.0, 2.0], "jacobian_norm": [0.4, 0.2], "max_weight": [0.6, 0.8]})
        ),
        # lesson 10's RoPE lines: its two legends, one entry a line, squeezed the plot flat on every screen
        "rope": inside_gpt.rope_curves(
            pd.DataFrame({"distance": [0, 1], "score": [0.1, 0.2], "positions": ["a", "a"], "start": ["x", "x"]})
        ),
    }
    for name, chart in drawn.items():
        spec = chart.spec()
        assert spec.get("autosize") == {"type": "fit-x", "contains": "padding"}, name
        assert spec.get("height") == charts.PLOT_HEIGHT, name


def test_a_subtitle_takes_the_pages_text_colour_as_titles_axes_and_legends_do() -> None:
    """Vega draws a subtitle near-black unless told: lesson 10's map of all heads was unreadable on the dark theme."""
    from core.charts import inside_gpt as charts_gpt

    blocks = pd.DataFrame({"layer": [0], "head": [0], "query_block": [0], "key_block": [0], "weight": [1.0]})
    heads = pd.DataFrame({"layer": [0], "head": [0], "sink": [0.5], "previous": [0.1], "chosen": [1]})
    spec = charts_gpt.heads_overview(blocks, heads, 1, 1).spec()
    assert spec["title"]["subtitle"] and spec["config"]["title"]["subtitleColor"] == "currentColor"
    own = chart_spec.readable({"config": {"title": {"subtitleColor": "#123456"}}})
    assert own["config"]["title"]["subtitleColor"] == "#123456"  # a chart's own colour still wins
