"""Lesson 4: masked cells never pass for small weights, and one dropout rule for every weight source
(issue 30, defect 8)."""

from __future__ import annotations

import torch

from core.app import registry
from core.app.settings import Settings
from core.charts import colours
from core.charts import heatmap as heatmaps
from core.lessons import causal_dropout
from core.lessons.common import matrix_frame
from tests.support import app, assert_clean, validated_spec


def masked_weights(size: int) -> torch.Tensor:
    scores = torch.randn(size, size, generator=torch.Generator().manual_seed(0))
    future = torch.triu(torch.ones(size, size, dtype=torch.bool), diagonal=1)
    return torch.softmax(scores.masked_fill(future, -torch.inf), dim=-1)  # (T, T), zeros above the diagonal


def test_a_causal_heatmap_greys_the_future_and_names_it() -> None:
    labels = ["a", "b", "c", "d"]
    frame = matrix_frame(masked_weights(4), labels, labels)
    spec = validated_spec(heatmaps.heatmap(frame, "w", value_title="weight", causal=True))
    table = spec["datasets"][heatmaps.HEATMAP_DATA]
    masked = table.column("masked").to_pylist()
    assert masked == [j > i for i in range(4) for j in range(4)]  # exactly the upper triangle
    cells = spec["layer"][0]["encoding"]
    assert cells["color"]["condition"] == {"test": "datum.masked", "value": colours.MASKED_COLOUR}
    assert "masked" in cells["color"]["title"]
    assert any(tip.get("field") == "cell" for tip in cells["tooltip"])
    text = spec["layer"][-1]["encoding"]["text"]
    assert {"test": "datum.masked", "value": heatmaps.MASKED_LABEL} in text["condition"]
    # The grey cells take dark text, whatever the colour scale would have given a 0.
    text_colours = table.column("text_color").to_pylist()
    assert all(colour == "black" for colour, hidden in zip(text_colours, masked, strict=True) if hidden)


def test_a_plain_heatmap_marks_nothing() -> None:
    labels = ["a", "b", "c"]
    spec = heatmaps.heatmap(matrix_frame(masked_weights(3), labels, labels), "w").spec()
    assert "masked" not in spec["datasets"][heatmaps.HEATMAP_DATA].column_names
    assert "condition" not in spec["layer"][0]["encoding"]["color"]


def test_dropout_after_the_mask_keeps_both_marks() -> None:
    labels = ["a", "b", "c"]
    frame = matrix_frame(masked_weights(3), labels, labels)
    frame["marked"] = [False, False, False, True, False, False, False, False, False]
    spec = validated_spec(heatmaps.heatmap(frame, "w", causal=True, marked="dropped"))
    tests = [c["test"] for c in spec["layer"][-1]["encoding"]["text"]["condition"]]
    assert tests == ["datum.masked", "datum.marked"]


def test_one_dropout_rule_for_every_source() -> None:
    at_zero = Settings(dropout=0.0)
    assert causal_dropout.dropout_rate(at_zero, training=True) == causal_dropout.TEACHING_DROPOUT
    assert causal_dropout.dropout_rate(at_zero, training=False) == 0.0
    assert causal_dropout.dropout_note(at_zero, training=True) is not None
    assert causal_dropout.dropout_note(Settings(dropout=0.25), training=True) is None


def test_training_at_rate_zero_drops_weights_on_a_models_head_too() -> None:
    # With random weights training at a rate of 0 used 0.5; on a model's head it dropped nothing.
    at = app(registry.page("causal_dropout").file, weights="pretrained", dropout="0.0")
    at.toggle(key="training").set_value(True).run()
    assert_clean(at)
    text = "\n".join(m.value for m in at.markdown)
    assert "Nothing is dropped" not in text
    assert "Rate 0.50:" in text
    assert any("book's 0.5" in i.value for i in at.info)
