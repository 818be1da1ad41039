"""Lesson 6's "who attends to whom" chart (issue 30, defect 10): tall rows, wide click targets, plain tooltips."""

from __future__ import annotations

import json

import pandas as pd

from core.charts import real_model as charts_rm


def lines_spec(num_tokens: int) -> dict:
    tokens = pd.DataFrame({"query_index": range(num_tokens), "token": [f"t{i}" for i in range(num_tokens)]})
    lines = pd.DataFrame({"query_index": [0], "key_index": [0], "weight": [1.0], "query": ["t0"], "key": ["t0"]})
    return charts_rm.lines(lines, tokens, "Who attends to whom").spec()


def test_each_word_piece_gets_a_row_tall_enough_to_click() -> None:
    # About 240 px for a sentence, with click targets the size of the text.
    spec = lines_spec(12)
    assert spec["height"] >= 12 * 30
    targets = [layer for layer in spec["layer"] if layer["mark"].get("type") == "tick"]
    assert len(targets) == 1 and targets[0]["mark"]["size"] >= 60 and targets[0]["mark"]["thickness"] >= 24
    # Altair lifts a layer's selection to the top, naming the view it listens on: the click target's.
    views = [view for param in spec.get("params", []) for view in param.get("views", [])]
    assert targets[0].get("params") or targets[0]["name"] in views, "the click target carries the query selection"


def test_no_tooltip_shows_a_raw_field_name() -> None:
    spec = lines_spec(5)
    for layer in spec["layer"]:
        tooltip = layer["encoding"].get("tooltip")
        assert tooltip is not None, layer["mark"]  # without one, a default tooltip listed "query_index"
        for entry in tooltip if isinstance(tooltip, list) else [tooltip]:
            assert "_" not in entry.get("title", entry["field"]), entry
    assert "query_index" not in json.dumps([layer["encoding"].get("tooltip") for layer in spec["layer"]]).replace(
        '"field": "query_index"', ""
    )


def test_the_lines_take_the_themes_colour_light_or_dark() -> None:
    # A fixed viridis blue (#3b528b) reached 2.5:1 on the dark theme's background: the lines all but vanished.
    # One constant category takes the theme's first palette colour (a dark blue on white, a light blue on black);
    # a rule's own default colour is Vega-Lite's black, whatever the theme, so the colour must come from a scale.
    (rules,) = [layer for layer in lines_spec(5)["layer"] if layer["mark"].get("type") == "rule"]
    assert "color" not in rules["mark"], rules["mark"]
    colour = rules["encoding"]["color"]
    assert colour["type"] == "nominal" and colour["legend"] is None
    assert not {"scheme", "range"} & set(colour.get("scale", {})), colour  # the theme's palette, not ours
    calculated = {step["as"]: step["calculate"] for step in rules.get("transform", []) if "calculate" in step}
    assert calculated[colour["field"]].startswith("'"), calculated  # one constant: one colour for every line
