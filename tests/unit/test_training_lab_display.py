"""Lesson 8 on a projector (issue 30, defect 4): plot heights, and the induction example's copies marked."""

from __future__ import annotations

import re
from dataclasses import replace

import pandas as pd

from core.charts import training as charts_training
from core.lessons import training_lab as tt
from core.models.tiny_transformer import INDUCTION_PART, Task, train


def test_the_curves_keep_their_plot_height_below_the_legend() -> None:
    # A plain "fit" took the legend out of the 240 px and left about 60 px of plot.
    frame = pd.DataFrame(
        {
            "run": ["1. a"] * 4,
            "scaling": ["scaled"] * 4,
            "step": [0, 10, 0, 10],
            "metric": ["loss", "loss", "accuracy", "accuracy"],
            "value": [2.0, 1.0, 0.1, 0.9],
        }
    )
    for chart in charts_training.curve_charts(frame):
        spec = chart.spec()
        layers = [spec, *spec.get("layer", [])]
        assert (
            any(layer.get("autosize", {}).get("type") == "fit-x" for layer in layers)
            or spec.get("autosize", {}).get("type") == "fit-x"
        ), spec.get("autosize")
        assert max(layer.get("height", 0) for layer in layers) >= 240


def test_the_induction_heatmaps_mark_the_first_copy_and_the_repeat() -> None:
    run = train(replace(tt.default_config(Task.INDUCTION), steps=10))
    labels = tt.example_labels(run)
    first = [label for label in labels if label.endswith(tt.FIRST_COPY_MARK)]
    repeat = [label for label in labels if label.endswith(tt.REPEAT_MARK)]
    assert len(first) == len(repeat) == INDUCTION_PART
    # the same tokens, in the same order, in both copies
    assert [label.split(":")[1][:-1] for label in first] == [label.split(":")[1][:-1] for label in repeat]
    previous = train(replace(tt.default_config(Task.PREVIOUS_TOKEN), steps=10))
    assert tt.example_labels(previous) == tt.token_labels(previous.example_tokens)


def test_the_gradient_answers_ratio_is_the_ratio_of_the_numbers_it_prints() -> None:
    # The fourth review: "0.0105 with the factor, 0.0355 without, 3.39 times", where 0.0355 / 0.0105 is 3.38.
    from core.models.tiny_transformer import TrainingConfig, start_of

    question = tt.gradient_question(start_of(TrainingConfig()))
    scaled, unscaled, ratio = (float(x) for x in re.findall(r"(\d+\.\d+)", question.explanation)[:3])
    assert round(unscaled / scaled, 2) == ratio, question.explanation


def test_the_start_tables_ratio_is_the_ratio_of_its_printed_cells() -> None:
    # The fifth review: the table printed 3.38902 beside 0.03554 / 0.01049 = 3.38799.
    from core.models.tiny_transformer import TrainingConfig, start_of

    table = tt.start_table(start_of(TrainingConfig()))
    for _, row in table.iterrows():
        assert row["unscaled / scaled"] == row["unscaled"] / row["scaled"]
        assert row["scaled"] == round(row["scaled"], tt.START_DECIMALS)


def test_the_spread_paragraph_says_the_printed_ratio_may_miss_root_d_k_in_its_last_digits() -> None:
    # The sixth review: "exactly √d_k times larger" beside a printed 4.00003 (d_k = 16).
    from core.app import prose
    from core.models.tiny_transformer import TrainingConfig, start_of

    start = start_of(TrainingConfig())
    spread = tt.start_table(start).iloc[0]
    root = start.theory_ratio
    assert spread["unscaled / scaled"] != root  # what the paragraph explains, at the default setting
    assert abs(spread["unscaled / scaled"] - root) < 1e-3  # within the rounding of five-decimal cells
    text = " ".join(prose.section("training_lab", "start_spread").split())
    assert "its last digits can differ from √d_k's" in text
