"""Chart builders checked through their Vega-Lite specs, and what the pages hand to Streamlit (AppTest)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

import core
from core import lessons
from core.charts import causal as causal_charts
from core.charts import colours, real_model
from core.charts import common as charts
from core.charts import heatmap as heatmaps
from core.charts import spec as chart_spec
from core.charts import why_scale as scale_charts
from tests import support
from tests.support import PAGE_FILES


def layer_data(spec: dict) -> list[dict]:
    """The records of a spec's one dataset (an Arrow table, as `VegaChart.spec()` makes it)."""
    return next(iter(spec["datasets"].values())).to_pylist()


validated = support.validated_spec


def test_variance_chart_unscaled_grows_like_dk_scaled_stays_near_one() -> None:
    table = core.dot_product_variance(trials=50_000, generator=torch.Generator().manual_seed(0))
    spec = validated(scale_charts.variance(table))
    # The same records spelled another way: the table melted by pandas.
    names = {
        "unscaled_var": "q·k (measured)",
        "scaled_var": "q·k/√d_k (measured)",
        "theory_unscaled": "theory: d_k",
        "theory_scaled": "theory: 1",
    }
    long = table.melt(id_vars="d_k", value_vars=list(names), var_name="series", value_name="variance")
    long = long.assign(kind=long["series"].str.startswith("theory").map({True: "theory", False: "measured"}))
    expected = long.assign(series=long["series"].map(names)).to_dict(orient="records")
    assert spec["datasets"][scale_charts.VARIANCE_DATA].to_pylist() == expected
    assert spec["layer"][0]["encoding"]["x"]["scale"]["type"] == "log"
    assert spec["layer"][1]["encoding"]["y"]["scale"]["type"] == "log"
    points = pd.DataFrame(expected)
    unscaled = points[points.series == "q·k (measured)"].set_index("d_k")["variance"]
    scaled = points[points.series == "q·k/√d_k (measured)"].set_index("d_k")["variance"]
    assert ((unscaled / unscaled.index) - 1).abs().max() < 0.05
    assert (scaled - 1).abs().max() < 0.05
    assert unscaled.loc[512] > 400 * unscaled.loc[1]


def heatmap_records(spec: dict) -> list[dict]:
    """The per-cell values that `heatmaps.heatmap` hands to the page (an Arrow table)."""
    return spec["datasets"][heatmaps.HEATMAP_DATA].to_pylist()


def colour_scale(spec: dict) -> dict:
    return spec["layer"][0]["encoding"]["color"]["scale"]


def test_a_causal_heatmap_s_masked_cells_set_neither_its_colour_scale_nor_its_label_width() -> None:
    # A decoder's scores for future keys (never used by the model) once stretched lesson 2's scale to -123.
    scores = torch.tensor([[1.5, -123.25, 80.0], [0.5, -2.0, 99.0], [1.0, 0.25, -0.75]])
    frame = lessons.matrix_frame(scores, ["a", "b", "c"], ["a", "b", "c"])
    causal = heatmaps.heatmap(frame, "scores", signed=True, causal=True).spec()
    ends = colour_scale(causal)["domain"]  # the colour stops, from one end of the scale to the other
    assert (ends[0], ends[-1]) == pytest.approx((-2.0, 2.0))  # the largest visible |score|, not 123.25
    ends = colour_scale(heatmaps.heatmap(frame, "scores", signed=True).spec())["domain"]
    assert (ends[0], ends[-1]) == pytest.approx((-123.25, 123.25))
    assert colours.shared_domain(frame, frame, causal=True) == (-2.0, 2.0)
    assert colours.shared_domain(frame, frame) == (-123.25, 123.25)
    visible = [cell for cell in heatmap_records(causal) if not cell["masked"]]
    assert len(visible) == 6 and max(abs(cell["value"]) for cell in visible) == 2.0


def test_heatmap_spec_labels_tokens_values_and_selection() -> None:
    frame = lessons.matrix_frame(torch.eye(3), ["a", "b", "c"], ["a", "b", "c"])
    spec = heatmaps.heatmap(frame, "weights", select_rows=True, value_title="weight").spec()
    rect, text = spec["layer"]
    assert rect["encoding"]["x"]["sort"] == ["a", "b", "c"]
    assert rect["encoding"]["x"]["axis"]["labelOverlap"] is False  # every token labelled
    assert colour_scale(spec)["range"] == list(colours.VIRIDIS)
    assert {t["field"] for t in rect["encoding"]["tooltip"]} == {"row", "col", "value"}
    assert rect["encoding"]["color"]["title"] == "weight"
    params = rect.get("params", []) + spec.get("params", [])  # layered specs hoist params
    assert [p["name"] for p in params] == [heatmaps.QUERY_SELECTION]
    assert text["encoding"]["text"]["format"] == ".4f"
    records = heatmap_records(spec)
    assert len(records) == 9
    assert [r["text_color"] for r in records[:3]] == ["black", "white", "white"]  # yellow 1, purple 0
    assert not any(r["is_query"] for r in records)


def test_heatmap_cells_fill_the_column_and_numbers_scale_with_it() -> None:
    frame = lessons.matrix_frame(
        torch.rand(6, 6, generator=torch.Generator().manual_seed(0)), list("abcdef"), list("abcdef")
    )
    spec = heatmaps.heatmap(frame, "weights").spec()
    assert spec["width"] == "container"
    font = spec["layer"][1]["mark"]["fontSize"]["expr"]
    assert "bandwidth('x')" in font and f">= {heatmaps.MIN_CELL_FONT_PX}" in font  # grows with the cells, or hides
    wide = lessons.matrix_frame(torch.rand(2, 9), ["a", "b"], [str(i) for i in range(9)])
    assert heatmaps.heatmap(wide, "nine").spec()["layer"][1]["encoding"]["text"]["format"] == ".3f"


def test_highlight_row_marks_the_query_in_the_data() -> None:
    frame = lessons.matrix_frame(torch.eye(3), ["a", "b", "c"], ["a", "b", "c"])
    records = heatmap_records(heatmaps.heatmap(frame, "w", select_rows=True, highlight_row=1).spec())
    assert [r["row_index"] for r in records if r["is_query"]] == [1, 1, 1]


def srgb_at(value: float, domain: list[float], stops: list[str]) -> tuple[float, float, float]:
    """What Vega draws: a linear scale, piecewise over `domain`, 'rgb' interpolation, clamped."""
    value = min(max(value, domain[0]), domain[-1])
    for i in range(len(domain) - 1):
        if domain[i] <= value <= domain[i + 1]:
            t = (value - domain[i]) / (domain[i + 1] - domain[i])
            a, b = stops[i], stops[i + 1]
            return tuple((int(a[k : k + 2], 16) * (1 - t) + int(b[k : k + 2], 16) * t) / 255 for k in (1, 3, 5))
    raise AssertionError(value)


def wcag_contrast(rgb_a: tuple[float, ...], rgb_b: tuple[float, ...]) -> float:
    def luminance(rgb: tuple[float, ...]) -> float:
        lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    high, low = sorted((luminance(rgb_a), luminance(rgb_b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize("signed", [False, True], ids=["viridis", "blue-orange"])
def test_cell_text_contrasts_with_its_own_cell_colour(signed: bool) -> None:
    """A sweep over each scale: the number's colour reaches WCAG AA (4.5:1) against the cell it sits on.

    The old rule (light text above half the range) put white numbers on near-white cells of the
    blue-orange maps and black ones on dark brown.
    """
    values = torch.linspace(-1.0 if signed else 0.0, 1.0, 101)
    frame = lessons.matrix_frame(values[None, :], ["q"], [f"k{i}" for i in range(101)])
    spec = heatmaps.heatmap(frame, "sweep", signed=signed).spec()
    scale = colour_scale(spec)
    assert scale["interpolate"] == "rgb" and scale["clamp"] is True
    named = {"black": (0.0, 0.0, 0.0), "white": (1.0, 1.0, 1.0)}
    for record in heatmap_records(spec):
        cell = srgb_at(record["value"], scale["domain"], scale["range"])
        assert wcag_contrast(cell, named[record["text_color"]]) >= 4.5, record


def test_weights_use_a_fixed_zero_to_one_domain() -> None:
    """The masked_fill-bug weights (0.156-0.176) must not span the whole colour range."""
    narrow = lessons.matrix_frame(torch.tensor([[0.156, 0.176], [0.160, 0.170]]), ["a", "b"], ["a", "b"])
    scale = colour_scale(heatmaps.heatmap(narrow, "buggy", value_title="weight").spec())
    assert (scale["domain"][0], scale["domain"][-1]) == (0.0, 1.0)
    records = heatmap_records(heatmaps.heatmap(narrow, "buggy").spec())
    assert {r["text_color"] for r in records} == {"white"}  # all on dark cells: they are all small weights


def test_signed_heatmap_is_diverging_and_centred() -> None:
    frame = lessons.matrix_frame(torch.tensor([[-2.0, 1.0]]), ["q"], ["k1", "k2"])
    scale = colour_scale(heatmaps.heatmap(frame, "signed", signed=True).spec())
    assert scale["range"] == list(colours.BLUE_ORANGE)
    assert (scale["domain"][0], scale["domain"][5], scale["domain"][-1]) == (-2.0, 0.0, 2.0)
    noise = lessons.matrix_frame(torch.tensor([[-2e-9, 1e-9]]), ["q"], ["k1", "k2"])
    floor = colour_scale(heatmaps.heatmap(noise, "noise", signed=True, min_magnitude=1e-3).spec())
    assert (floor["domain"][0], floor["domain"][-1]) == (-1e-3, 1e-3)
    assert {
        r["text_color"] for r in heatmap_records(heatmaps.heatmap(noise, "n", signed=True, min_magnitude=1e-3).spec())
    } == {"black"}


def test_two_heatmaps_can_share_one_colour_domain() -> None:
    raw = lessons.matrix_frame(torch.tensor([[2.0, -0.5]]), ["q"], ["k1", "k2"])
    scaled = lessons.matrix_frame(torch.tensor([[2.0, -0.5]]) / 2**0.5, ["q"], ["k1", "k2"])
    shared = colours.shared_domain(raw, scaled)
    assert shared == (-2.0, 2.0)
    domains = [
        colour_scale(heatmaps.heatmap(f, "t", signed=True, domain=shared).spec())["domain"] for f in (raw, scaled)
    ]
    assert domains[0] == domains[1]
    alone = colour_scale(heatmaps.heatmap(scaled, "t", signed=True).spec())["domain"]
    assert alone[-1] < 2.0  # without it, each map would stretch to its own maximum


@settings(max_examples=15, deadline=None)
@given(
    rows=st.integers(1, 8),
    cols=st.integers(1, 10),
    seed=st.integers(0, 10_000),
    signed=st.booleans(),
    select_rows=st.booleans(),
    highlight=st.one_of(st.none(), st.integers(0, 7)),
)
def test_filled_heatmap_template_equals_a_fresh_altair_build(
    rows: int, cols: int, seed: int, signed: bool, select_rows: bool, highlight: int | None
) -> None:
    labels_r, labels_c = [f"r{i}" for i in range(rows)], [f"c{j}" for j in range(cols)]
    g = torch.Generator().manual_seed(seed)
    first = lessons.matrix_frame(torch.randn(rows, cols, generator=g), labels_r, labels_c)
    second = lessons.matrix_frame(torch.randn(rows, cols, generator=g) * 50, labels_r, labels_c)
    options = {"signed": signed, "select_rows": select_rows, "value_title": "w", "highlight_row": highlight}
    heatmaps.heatmap(first, "t", **options).spec()  # warms the template with other values
    spec = heatmaps.heatmap(second, "t", **options).spec()
    table = spec.pop("datasets")[heatmaps.HEATMAP_DATA]
    look, values, _ = heatmaps._look_and_values(second, "t", options)
    assert values.rows == tuple(labels_r) and values.cols == tuple(labels_c)
    assert spec == heatmaps.heatmap_chart(look, values).to_dict()  # validated by Altair
    sent = heatmaps.sent_values(second["value"].to_numpy(dtype=np.float64), look.decimals)
    assert table.column("value").to_pylist() == sent.tolist()


def test_a_heatmap_cell_prints_the_digits_of_its_own_value_not_of_a_rounded_copy() -> None:
    """The s29 review: lesson 7 printed 0.1036 for a weight of 0.10354990 (rounded to 0.103550 first, then to
    4 decimals), where its Code box prints 0.1035. Every cell's 4 decimals are its own value's."""
    weights = torch.tensor([[0.10354989767, 0.2, 0.69645010233]])
    frame = lessons.matrix_frame(weights, ["q"], ["a", "b", "c"])
    table = heatmaps.heatmap(frame, "t", value_title="weight").spec()["datasets"][heatmaps.HEATMAP_DATA]
    printed = [f"{v:.4f}" for v in table.column("value").to_pylist()]
    assert printed == [f"{float(w):.4f}" for w in weights[0]] and printed[0] == "0.1035"


def test_sweep_chart_shows_the_times_eight_example() -> None:
    long, _ = core.softmax_multiplier_sweep(torch.tensor([0.1, -0.2, 0.3, -0.2, 0.5]), [1, 8])
    data = pd.DataFrame(layer_data(validated(scale_charts.sweep_chart(long, 8.0))))
    top = data[data.multiplier == 8].weight.max()
    assert round(top, 4) == 0.8000


def test_saturation_and_peakiness_charts() -> None:
    sat = pd.DataFrame(layer_data(validated(scale_charts.saturation_chart(core.saturation_sweep()))))
    assert set(sat.quantity) == {"gradient size (Jacobian norm)", "largest weight"}  # no raw identifiers
    norms = sat[sat.quantity == "gradient size (Jacobian norm)"].sort_values("multiplier")["value"]
    assert norms.iloc[-1] < norms.iloc[0] / 100
    peaky = core.peakiness_vs_dk(trials=300, generator=torch.Generator().manual_seed(1))
    data = pd.DataFrame(
        validated(scale_charts.peakiness(peaky, "max_weight"))["datasets"][scale_charts.PEAKINESS_DATA].to_pylist()
    )
    at_512 = data[data.d_k == 512].set_index("scaling")["max_weight"]
    assert at_512["unscaled"] > at_512["scaled"] + 0.3


def drawn_heatmaps(at) -> dict[str, list[dict]]:
    """Every heatmap the page drew: its alt text -> its cells, as Streamlit received them."""
    drawn = {}
    for element in at.get("vega_lite_chart"):
        proto = element.proto
        for dataset in proto.datasets:
            if dataset.name == heatmaps.HEATMAP_DATA:
                drawn[proto.alt] = pa.ipc.open_stream(dataset.data.data).read_all().to_pylist()
    return drawn


@pytest.mark.parametrize(
    ("page", "picker", "description"),
    [
        (
            PAGE_FILES[1],
            "query_without_weights",
            "Heatmap of the attention weights, queries as rows and keys as columns.",
        ),
        (PAGE_FILES[2], "query_trainable_weights", "Heatmap of the attention weights after the softmax."),
    ],
)
def test_the_outlined_heatmap_row_follows_the_query_picker(page: str, picker: str, description: str) -> None:
    """Issue 13: after choosing a query in the picker the heatmap still showed the row clicked before.

    The outline now comes from the page's query (the data), not from the chart's own click state.
    """
    at = support.app(page)
    for query in (at.selectbox(key=picker).value, 0, 4):
        at.selectbox(key=picker).set_value(query).run()
        support.answered(at)  # the weights appear once the question is answered
        cells = drawn_heatmaps(at)[description]
        assert {c["row_index"] for c in cells if c["is_query"]} == {query}


def test_bar_charts_label_every_token() -> None:
    """Vega drops overlapping axis labels by default: a 20-token sentence showed every second token."""
    tokens = [f"token{i}" for i in range(20)]
    frame = pd.DataFrame({"token": tokens, "position": range(20), "max change": [0.0] * 20})
    for chart in (
        causal_charts.leakage(frame, 3),
        charts.grouped_bars(frame.assign(measure="a"), "token", "max change", "measure", "t"),
    ):
        spec = validated(chart)
        axis = spec["encoding"]["x"]["axis"]
        assert axis["labelOverlap"] is False and axis["labelAngle"] == -90
        assert spec["encoding"]["x"]["sort"] == tokens


def test_axis_and_legend_text_follow_the_page_text_colour() -> None:
    """Streamlit's chart grey is 3.8:1 on white; currentColor is the theme's own text colour."""
    frame = lessons.matrix_frame(torch.eye(2), ["a", "b"], ["a", "b"])
    config = heatmaps.heatmap(frame, "t").spec()["config"]
    assert config["axis"]["labelColor"] == config["legend"]["labelColor"] == "currentColor"
    assert config["axis"]["labelFontSize"] >= heatmaps.MIN_CELL_FONT_PX
    bars = charts.grouped_bars(pd.DataFrame({"token": ["a"], "v": [1.0], "g": ["x"]}), "token", "v", "g", "t").spec()
    assert bars["config"]["axis"]["titleColor"] == "currentColor"
    assert chart_spec.readable({"config": {"axis": {"labelColor": "red"}}})["config"]["axis"]["labelColor"] == "red"


def test_a_new_sentence_reuses_the_heatmap_template() -> None:
    """Issue 21: a new sentence in lesson 2's pretrained mode built seven templates with Altair.

    The labels and their number are slots now: two sentences of 5 and 7 word pieces share one
    template, and each spec still carries its own tokens in order.
    """
    g = torch.Generator().manual_seed(0)
    five = [f"w{i}" for i in range(5)]
    seven = ["[CLS]", "the", "cat", "sat", "on", "it", "[SEP]"]
    short = heatmaps.heatmap(lessons.matrix_frame(torch.rand(5, 5, generator=g), five, five), "w", value_title="weight")
    long = heatmaps.heatmap(
        lessons.matrix_frame(torch.rand(7, 7, generator=g), seven, seven), "w", value_title="weight"
    )
    assert short.template is long.template
    for chart, labels in ((short, five), (long, seven)):
        for layer in chart.spec()["layer"]:
            assert layer["encoding"]["x"]["sort"] == labels and layer["encoding"]["y"]["sort"] == labels


def test_the_benchmarks_reference_page_draws_our_heatmap_the_plain_altair_way() -> None:
    """loadtest/reference_page.py, the yardstick of every latency and capacity ratio: one slider and one
    Altair heatmap built on each run. Its chart is ours, values inline (the old one sent none)."""
    frame = lessons.matrix_frame(torch.arange(36.0).reshape(6, 6) / 36, list("abcdef"), list("abcdef"))
    plain = heatmaps.heatmap_altair(frame, "reference").to_dict()  # validated by Altair
    assert len(plain["datasets"][plain["data"]["name"]]) == 36
    ours = heatmaps.heatmap(frame, "reference").spec()
    for spec in (plain, ours):
        spec.pop("data", None), spec.pop("datasets")
    assert plain == ours
    at = AppTest.from_file(str(support.ROOT / "loadtest" / "reference_page.py"), default_timeout=60).run()
    assert not at.exception
    at.slider(key="value").set_value(70).run()
    assert not at.exception and len(at.get("vega_lite_chart")) == 1


def test_every_chart_on_a_page_offers_svg_and_png_under_a_name_with_its_settings(monkeypatch) -> None:
    """Issue 41 item 6: Streamlit hides Vega-Embed's menu, so each chart has its own Save SVG / Save PNG buttons
    (ui/draw.py `save_for_slides`). Their files are deferred: made by a callable on a click, never in the page's
    messages. The file names live only in Streamlit's media manager, so the test records its registrations."""
    from xml.etree import ElementTree

    from streamlit.runtime.media_file_manager import MediaFileManager

    registered: dict[str, tuple[str | None, object]] = {}  # deferred file id -> (file name, callable)
    add_deferred = MediaFileManager.add_deferred

    def recording(self, data, mimetype, coordinates, file_name=None, **kwargs):  # noqa: ANN001, ANN202
        file_id = add_deferred(self, data, mimetype, coordinates, file_name=file_name, **kwargs)
        registered[file_id] = (file_name, data)
        return file_id

    monkeypatch.setattr(MediaFileManager, "add_deferred", recording)
    at = support.open_page("without_weights", seed="3")
    support.answered(at)  # the page's charts answer its questions: drawn only once answered
    support.assert_clean(at)
    charts_drawn = at.get("vega_lite_chart")
    assert len(charts_drawn) >= 2
    buttons = {button.key: button for button in at.download_button}
    keys = sorted({key.removesuffix("-svg").removesuffix("-png") for key in buttons})
    assert len(keys) == len(charts_drawn)  # one pair per chart, each under its own keys
    names: list[str] = []
    for key in keys:
        svg, png = buttons[f"{key}-svg"], buttons[f"{key}-png"]
        assert (svg.label, png.label) == ("Save SVG", "Save PNG")
        assert svg.proto.ignore_rerun and png.proto.ignore_rerun  # a click downloads without a rerun
        assert svg.proto.deferred_file_id and not svg.proto.url  # nothing made until clicked
        svg_name, png_name = registered[svg.proto.deferred_file_id][0], registered[png.proto.deferred_file_id][0]
        assert svg_name and png_name and svg_name.removesuffix(".svg") == png_name.removesuffix(".png")
        assert svg_name.startswith("attention-lab_without_weights_") and "seed-3" in svg_name
        assert png_name.endswith(".png") and svg_name.endswith(".svg")
        names.append(svg_name)
    assert len(set(names)) == len(names)  # each chart's files say which chart they are
    # The first chart's SVG button, clicked: its callable makes the chart's file.
    made = registered[buttons[f"{keys[0]}-svg"].proto.deferred_file_id][1]()
    assert ElementTree.fromstring(made).tag.endswith("svg")


@pytest.mark.parametrize("signed", [True, False])
def test_a_heatmaps_legend_labels_both_ends_of_its_colour_scale(signed: bool) -> None:
    # The third review: lesson 7's context vectors reach 1.31, and the legend's labels stopped at 1.0
    # (Vega's own ticks are round numbers inside the scale).
    frame = lessons.matrix_frame(torch.tensor([[0.3224, 1.3081], [-0.2, 0.7]]), ["a", "b"], ["x", "y"])
    colour = heatmaps.heatmap(frame, "context", signed=signed).spec()["layer"][0]["encoding"]["color"]
    labelled, domain = colour["legend"]["values"], colour["scale"]["domain"]
    assert (labelled[0], labelled[-1]) == (domain[0], domain[-1])
    assert labelled == sorted(labelled) and (0 in labelled or not signed)
    steps = np.diff(labelled)
    assert steps.min() > (domain[-1] - domain[0]) / 20  # no two labels on top of each other


@given(low=st.floats(-1e4, 1e4), width=st.floats(1e-6, 1e4), signed=st.booleans())
def test_legend_values_span_the_scale_with_a_few_labels(low: float, width: float, signed: bool) -> None:
    domain = (-width, width) if signed else (low, low + width)
    values = heatmaps.legend_values(domain, signed)
    assert values[0] == domain[0] and values[-1] == domain[1] and 3 <= len(values) <= 7
    assert all(b > a for a, b in zip(values, values[1:], strict=False))
    # Lesson 10's legend put 0.8 a ninth of the scale under its end 0.901, the labels on top of each other; lesson 2's
    # put -1 a fifth of the scale from its end -1.82. An end's label sits wholly inside the bar: a quarter of it free.
    ends = np.array([values[1] - values[0], values[-1] - values[-2]])
    assert ends.min() >= (domain[1] - domain[0]) / 4 * (1 - 1e-9)


def test_a_round_number_near_an_end_gives_way_to_the_end() -> None:
    # The fifth review: lesson 10's previous-token map, 0.0142 to 0.901, labelled 0.8 on top of 0.901 (and 0.2 ran
    # into "0.0142"). The s18 review: lesson 2's values of SmolLM2's head, -1.82 to 1.82, labelled "−1.82−1".
    assert heatmaps.legend_values((0.0142, 0.901), signed=False) == [0.0142, 0.5, 0.901]
    assert heatmaps.legend_values((-1.82, 1.82), signed=True) == [-1.82, 0.0, 1.82]


def test_legend_labels_are_evenly_spaced_where_a_step_allows() -> None:
    # The s20 review: 0 to 1 was labelled "0, 0.4, 0.6, 1" (the finest step with 0.2 and 0.8 too near the ends),
    # which read as a bug on a slide. The most even labels of the round steps, the fewer on a tie.
    assert heatmaps.legend_values((0.0, 1.0), signed=False) == [0.0, 0.5, 1.0]
    assert heatmaps.legend_values((0.5, 0.99), signed=False) == [0.5, 0.75, 0.99]
    assert heatmaps.legend_values((0.0, 4.3), signed=False) == [0.0, 2.0, 4.3]


def test_legend_labels_read_at_the_scales_resolution() -> None:
    # The s19 review: a weights map's legend printed its lowest end as "0.0000239" beside 0.2 and 0.4. One decimal
    # finer than the step (d3 trims the zeros): that end reads "0", 0.901 reads "0.9", and the spec carries it.
    assert heatmaps.legend_format((0.0000239, 0.91)) == ",.2~f"
    assert heatmaps.legend_format((-1.82, 1.82)) == ",.1~f"
    assert heatmaps.legend_format((0.0, 4000.0)) == ",.0~f"
    assert heatmaps.legend_format((0.991, 0.999)) == ",.4~f"  # a narrow scale keeps the digits that differ
    frame = pd.DataFrame(
        {"row": ["a", "a", "b", "b"], "col": ["x", "y", "x", "y"], "value": [0.0000239, 0.3, 0.5, 0.91]}
    )
    frame["row_index"] = [0, 0, 1, 1]
    legend = heatmaps.heatmap(frame, "weights").spec()["layer"][0]["encoding"]["color"]["legend"]
    assert legend["format"] == heatmaps.legend_format((legend["values"][0], legend["values"][-1])) == ",.2~f"
    # Lesson 11's maps of a measure over every head are coloured over the data's own range, 0.0000239 an end.
    measure = real_model.measure(frame.assign(layer=[0, 0, 1, 1], head=[0, 1, 0, 1]), "share", "share").spec()
    legend = measure["layer"][0]["encoding"]["color"]["legend"]
    assert legend["values"][0] == 0.0000239 and legend["format"] == ",.2~f"
    # Under the map in both layouts: on the right its title left lesson 11's heads a 90-px strip on a phone.
    for layers_across in (False, True):
        chart = real_model.measure(frame.assign(layer=[0, 0, 1, 1], head=[0, 1, 0, 1]), "e", "e", True, layers_across)
        assert chart.spec()["layer"][0]["encoding"]["color"]["legend"]["orient"] == "bottom"


def test_lesson_3s_long_chart_titles_are_two_lines_that_fit_a_phone() -> None:
    # The third review: on a 390-px phone "Variance of the dot product: unscaled grows…" and "Gradient
    # through softmax([m, 0, 0]) dies as …" were cut off. About 36 characters fit a phone's chart.
    table = core.dot_product_variance(trials=1_000, generator=torch.Generator().manual_seed(0))
    for spec in (
        validated(scale_charts.variance(table)),
        validated(scale_charts.saturation_chart(core.saturation_sweep())),
    ):
        title = spec["title"]
        lines = title["text"] if isinstance(title, dict) else title
        assert isinstance(lines, list) and len(lines) == 2 and max(map(len, lines)) <= 36, lines


def test_a_measure_maps_colours_span_its_values_and_its_legend_labels_both_ends() -> None:
    # The fourth review: lesson 10's sink, previous-token and induction maps reach 0.93-1.00 and their legends
    # were labelled 0.2-0.8 only.
    from core.charts import real_model as charts_rm

    frame = pd.DataFrame({"layer": [0, 0, 1, 1], "head": [0, 1, 0, 1], "value": [0.05, 0.93, 0.2, 0.5]})
    colour = validated(charts_rm.measure(frame.assign(chosen=False), "sink share", "sink share"))["layer"][0]
    colour = colour["encoding"]["color"]
    assert colour["scale"]["domain"] == [0.05, 0.93]
    assert (colour["legend"]["values"][0], colour["legend"]["values"][-1]) == (0.05, 0.93)


@given(st.text(alphabet="abc ", min_size=1, max_size=90))
def test_a_phone_title_keeps_every_word_and_splits_only_a_long_title_in_two(title: str) -> None:
    shown = chart_spec.phone_title(title)
    if isinstance(shown, str):
        assert shown == title and (len(title) <= chart_spec.PHONE_TITLE_CHARS or " " not in title)
    else:
        assert len(shown) == 2 and " ".join(shown) == title
        assert max(map(len, shown)) < len(title)


def test_the_long_chart_titles_a_phone_cut_are_two_lines() -> None:
    # The fourth review: on a 390-px phone Vega cut these titles with "…" (lessons 4, 7, 9 and 10).
    from core.charts import at_scale, cross_trained, inside_gpt

    for title in (
        causal_charts.LEAKAGE_TITLE,
        at_scale.TILES_TITLE,
        inside_gpt.SAMPLING_TITLE,
        inside_gpt.ROPE_TITLE,
        "Weight on the right German word, held-out sentences",
        "Time of one causal attention call (one head, width 64)",
    ):
        lines = chart_spec.phone_title(title)
        assert isinstance(lines, list) and max(map(len, lines)) <= 36, lines
    curve = cross_trained.share_curve(pd.DataFrame({"step": [0, 10], "share": [0.1, 0.9]}), 0.8).spec()
    assert isinstance(curve["layer"][0]["title"], list)


def test_a_models_wide_matrix_skips_column_labels_that_would_overlap_and_a_sentence_keeps_all() -> None:
    # The fourth review: lesson 2's W heatmaps on a model drew out1 … out64 on top of each other.
    wide = lessons.matrix_frame(torch.zeros(4, 64), [f"in{i}" for i in range(4)], [f"out{j}" for j in range(64)])
    sentence = lessons.matrix_frame(torch.zeros(6, 6), list("abcdef"), list("abcdef"))
    axis = [heatmaps.heatmap(frame, "W").spec()["layer"][0]["encoding"]["x"]["axis"] for frame in (wide, sentence)]
    assert [a["labelOverlap"] for a in axis] == [True, False]  # a sentence's every token stays labelled


def test_the_measure_maps_text_turns_dark_where_dark_text_reads_better() -> None:
    """Lesson 11's map was the first to put a cell at 44-45% of viridis, where the old switch (45%) left white text
    at 4.4:1 on rgb(37, 132, 142) (the browser display test). Both sides of the switch must read at 4.5:1."""
    import re

    from core.charts import real_model

    frame = pd.DataFrame({"layer": [0, 0], "head": [0, 1], "value": [0.0, 1.0], "chosen": [False, False]})
    spec = real_model.measure(frame, "map", "value").spec()
    test = spec["layer"][1]["encoding"]["color"]["condition"]["test"]
    switch = float(re.search(r"datum\.low \+ ([0-9.]+) \*", test).group(1))  # type: ignore[union-attr]
    for ratio, text in ((switch - 0.004, 1.0), (switch, 0.0)):  # white just below the switch, black from it on
        cell = colours.scale_colours(np.array([ratio]), (0.0, 1.0), colours.VIRIDIS)
        ink = colours.relative_luminance(np.array([[text, text, text]]))
        assert colours.contrast_ratio(colours.relative_luminance(cell), ink)[0] >= 4.5, (ratio, text)


def test_a_signed_measure_map_is_diverging_at_zero_and_its_text_reads_on_both_sides_of_each_switch() -> None:
    """Lesson 11's maps of signed effects were viridis, which hides the sign (a review). A signed map is blue-orange
    on [-m, m], m the largest |value|, and its text turns dark in the light middle, white at both dark ends: each
    switch, read from the spec, must leave 4.5:1 on both of its sides."""
    import re

    from core.charts import real_model

    frame = pd.DataFrame({"layer": [0, 0, 1], "head": [0, 1, 0], "value": [-0.5, 2.0, 0.1], "chosen": [False] * 3})
    spec = real_model.measure(frame, "map", "effect", signed=True).spec()
    colour = spec["layer"][0]["encoding"]["color"]
    assert colour["scale"]["range"] == list(colours.BLUE_ORANGE)
    domain = colour["scale"]["domain"]
    assert domain[0] == -2.0 and domain[-1] == 2.0 and domain[len(domain) // 2] == 0.0  # centred at zero
    assert "signed" in colour["title"] and 0.0 in colour["legend"]["values"]
    test = spec["layer"][1]["encoding"]["color"]["condition"]["test"]
    start, stop = (float(f) for f in re.findall(r"\+ ([0-9.]+) \* 2 \*", test))
    assert 0.0 < start < 0.5 < stop < 1.0  # dark text in the middle, white at both ends

    def reads(fraction: float, text: float) -> float:
        cell = colours.scale_colours(np.array([fraction]), (0.0, 1.0), colours.BLUE_ORANGE)
        ink = colours.relative_luminance(np.array([[text, text, text]]))
        return float(colours.contrast_ratio(colours.relative_luminance(cell), ink)[0])

    for fraction, text in ((start - 0.004, 1.0), (start, 0.0), (stop - 0.004, 0.0), (stop, 1.0)):
        assert reads(fraction, text) >= 4.5, (fraction, text)
    viridis = real_model.measure(frame, "map", "effect").spec()["layer"][0]["encoding"]["color"]
    assert viridis["scale"]["scheme"] == "viridis" and viridis["title"] == "effect"  # unsigned maps keep viridis


def test_a_measure_map_with_the_layers_across_fits_a_projector_and_keeps_its_click() -> None:
    """Lesson 11's 30 x 9 maps were 1,019 px tall: a projector never showed one whole (an independent review).
    In presentation mode the layers run across: 9 rows of 24 px; the click still picks (layer, head)."""
    from core.charts import real_model

    frame = pd.DataFrame(
        {"layer": np.repeat(np.arange(30), 9), "head": np.tile(np.arange(9), 30), "value": np.linspace(-1, 1, 270)}
    ).assign(chosen=False)
    across = validated(real_model.measure(frame, "map", "effect", signed=True, layers_across=True))
    down = validated(real_model.measure(frame, "map", "effect", signed=True))
    encoding = across["layer"][0]["encoding"]
    assert encoding["x"]["field"] == "layer" and encoding["y"]["field"] == "head"
    assert down["layer"][0]["encoding"]["x"]["field"] == "head"  # the default keeps the layers down
    assert across["height"] == {"step": real_model.LAYERS_ACROSS_ROW_PX} and 9 * real_model.LAYERS_ACROSS_ROW_PX < 300
    assert across["params"][0]["select"]["fields"] == ["layer", "head"]
    assert encoding["color"]["legend"]["orient"] == "bottom"  # under the map: a phone gives the map its width


def test_a_one_row_strip_is_tall_enough_for_its_marks() -> None:
    # Lesson 2's q and z on a model, lesson 10's pair: one row of 64 cells. At 38 px its marks fell under the display
    # test's 40-px floor for a chart that is not squeezed (the fresh-clone CI of b5559e5 failed on it).
    frame = lessons.matrix_frame(torch.linspace(-1, 1, 64)[None, :], ["q"], [str(n) for n in range(64)])
    spec = heatmaps.heatmap(frame, "q", signed=True, show_values=False).spec()
    assert spec["height"] == {"step": 48}
    two = lessons.matrix_frame(torch.zeros(2, 3), ["a", "b"], ["x", "y", "z"])
    assert heatmaps.heatmap(two, "two").spec()["height"] == {"step": 38}  # every other heatmap as before


def test_a_colour_ramp_is_found_in_heatmaps_and_head_panels_and_nowhere_else() -> None:
    # ui.draw redraws a chart with a ramp when the address changes (Vega's SVG ramp names the address it was
    # drawn at): the check must find a heatmap's and a faceted, causal (conditional) panel's ramp, and no other.
    from core.charts import heads

    frame = pd.DataFrame(
        [
            {"head": h, "row": r, "col": c, "value": 0.5, "row_index": i, "col_index": j}
            for h in (0, 1)
            for i, r in enumerate("ab")
            for j, c in enumerate("ab")
        ]
    )
    assert chart_spec.has_colour_ramp(heads.head_panels(frame, "heads", causal=True).spec())
    assert chart_spec.has_colour_ramp(heads.head_panels(frame, "heads").spec())
    weights = lessons.matrix_frame(torch.tensor([[0.4, 0.6], [0.7, 0.3]]), ["a", "b"], ["a", "b"])
    assert chart_spec.has_colour_ramp(heatmaps.heatmap(weights, "weights").spec())
    bars = pd.DataFrame({"token": ["a", "b"], "weight": [0.4, 0.6], "kind": ["x", "y"]})
    assert not chart_spec.has_colour_ramp(charts.grouped_bars(bars, "token", "weight", "kind", "bars").spec())
    hidden_legend = {"field": "v", "type": "quantitative", "legend": None}
    assert not chart_spec.has_colour_ramp({"encoding": {"color": hidden_legend}})
