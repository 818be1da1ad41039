"""Lesson 1's colours (issue 30, defects 1 and 11): a series keeps its colour, and a stretched scale says so."""

from __future__ import annotations

import math

from core.app.settings import Settings
from core.lessons import common, without_weights


def test_the_naive_softmax_keeps_its_colour_and_legend_entry_when_it_overflows() -> None:
    # ?logit_scale=200: every naive-softmax weight is NaN, Vega-Lite dropped the series, and the stable softmax
    # took its colour. The chart now fixes the groups' order for the colours and the bars' places.
    lesson = without_weights.without_weights_lesson(Settings(), 1, 200.0)
    naive = lesson.norms[lesson.norms["method"] == "naive softmax"]["weight"]
    assert naive.map(math.isnan).all()  # the setting that broke it
    spec = without_weights.norms_chart(lesson, 1, 200.0).spec()
    assert spec["encoding"]["color"]["scale"]["domain"] == list(without_weights.NORMALISATIONS)
    assert spec["encoding"]["xOffset"]["scale"]["domain"] == list(without_weights.NORMALISATIONS)
    dots = without_weights.dots_chart(lesson, 1).spec()
    assert dots["encoding"]["color"]["scale"]["domain"] == ["dot product", "cosine similarity"]


def test_stretched_colours_run_over_the_weights_range_and_the_legend_says_so() -> None:
    lesson = without_weights.without_weights_lesson(Settings(), 1, 1.0)
    fixed = common.weight_colours(lesson.weights, stretch=False)
    assert fixed.domain is None and fixed.legend == "weight"
    stretched = common.weight_colours(lesson.weights, stretch=True)
    low, high = lesson.weights["value"].min(), lesson.weights["value"].max()
    assert stretched.domain == (low, high) and 0 < low < high < 1
    assert f"stretched to {low:.2f}–{high:.2f}" in stretched.legend


def test_the_text_on_dividing_by_the_sum_holds_for_all_negative_scores_too() -> None:
    # "Dividing by the sum does that only when all scores are positive": all negative scores work as well.
    import torch

    from core.app import prose

    negative = torch.tensor([-1.0, -3.0, -0.5])
    weights = negative / negative.sum()
    assert bool((weights > 0).all()) and float(weights.sum()) == 1.0 and int(weights.argmax()) == 1
    mixed = torch.tensor([2.0, -1.0, 0.5])
    assert bool(((mixed / mixed.sum()) < 0).any())
    text = prose.section("without_weights", "norms")
    assert "only when all scores are positive" not in text and "all negative works too" in text
