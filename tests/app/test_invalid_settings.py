"""Settings whose effect was invalid or invisible (issue 19, items 5 and 6)."""

from __future__ import annotations

import pytest

from core.app.settings import Settings
from core.charts import heatmap as heatmaps
from core.lessons import causal_dropout, multi_head
from tests.support import answered, open_page


# ------------------------------------------------------------------ item 5: heads that do not split d_out
@pytest.mark.parametrize(
    ("d_out", "wanted", "shown"), [(6, 4, 3), (6, 6, 6), (7, 8, 7), (5, 2, 1), (64, 8, 8), (1, 8, 1)]
)
def test_the_heads_shown_are_the_most_that_split_d_out(d_out: int, wanted: int, shown: int) -> None:
    assert multi_head.heads_that_split(d_out, wanted) == shown
    assert (multi_head.heads_note(d_out, wanted) is None) == (shown == wanted)


def test_the_lesson_runs_with_a_count_that_does_not_split() -> None:
    settings = Settings(preset="custom", text="the cat sat on the mat", d_in=4, d_out=6, num_heads=4)
    lesson = multi_head.multihead_lesson(settings)
    assert lesson.num_heads == 3 and lesson.head_dim == 2
    assert lesson.head_weights["head"].nunique() == 3
    assert "4 heads" in lesson.heads_note and "3 heads of width 2" in lesson.heads_note
    assert "1, 2, 3, 6" in lesson.heads_note


def test_the_page_keeps_every_section_with_four_heads_and_d_out_six() -> None:
    at = open_page("multi_head", preset="custom", text="the cat sat on the mat", d_out="6", num_heads="4")
    assert not at.error, [e.value for e in at.error]
    assert any("does not split into 4 heads" in i.value for i in at.info)
    subheaders = [h.value for h in at.subheader]
    assert "3 heads of width 2" in subheaders, subheaders
    assert any("article" in h for h in subheaders), subheaders
    assert any(radio.label == "Your prediction" for radio in at.radio)  # the question is still asked
    assert any(e.label.startswith("Code") for e in at.expander)


# ------------------------------------------------------------------ item 6: dropout you can see
def test_training_mode_at_rate_zero_shows_the_books_rate() -> None:
    book = Settings()  # every source preset sets dropout to 0
    lesson = causal_dropout.causal_lesson(book, 2, True)
    assert lesson.dropout == causal_dropout.TEACHING_DROPOUT == 0.5
    assert lesson.dropout_note and "0.5" in lesson.dropout_note
    assert lesson.kept_fraction is not None and lesson.kept_fraction < 1.0  # something was dropped
    evaluation = causal_dropout.causal_lesson(book, 2, False)
    assert evaluation.dropout_note is None and not evaluation.dropped["marked"].any()
    assert not lesson.dropped["value"].equals(evaluation.dropped["value"])  # the switch changes what is shown


def test_the_sidebars_rate_is_used_when_it_is_not_zero() -> None:
    lesson = causal_dropout.causal_lesson(Settings(dropout=0.2), 2, True)
    assert lesson.dropout == 0.2 and lesson.dropout_note is None


def test_dropped_cells_are_exactly_the_zeroed_weights() -> None:
    lesson = causal_dropout.causal_lesson(Settings(dropout=0.5, seed=3), 2, True)
    before = lesson.masked.set_index(["row_index", "col_index"])["value"]
    after = lesson.dropped.set_index(["row_index", "col_index"])
    zeroed = (after["value"] == 0) & (before > 0)
    assert after["marked"].equals(zeroed.rename("marked")) and zeroed.any()


def test_the_heatmap_marks_dropped_cells_with_an_outline_and_a_cross() -> None:
    lesson = causal_dropout.causal_lesson(Settings(dropout=0.5, seed=3), 2, True)
    spec = heatmaps.heatmap(lesson.dropped, "after dropout", marked="dropped").spec()
    outlines = [layer for layer in spec["layer"] if layer["mark"]["type"] == "rect" and layer.get("transform")]
    assert outlines and outlines[0]["transform"] == [{"filter": "datum.marked"}]
    assert outlines[0]["mark"]["strokeDash"] and not outlines[0]["mark"]["filled"]
    text = next(layer for layer in spec["layer"] if layer["mark"]["type"] == "text")
    assert text["encoding"]["text"]["condition"] == {"test": "datum.marked", "value": "✕"}
    marked = spec["datasets"][heatmaps.HEATMAP_DATA].column("marked").to_pylist()
    assert marked == lesson.dropped["marked"].tolist()
    plain = heatmaps.heatmap(lesson.renormalised, "unmarked").spec()
    assert len(plain["layer"]) == 2 and "marked" not in plain["datasets"][heatmaps.HEATMAP_DATA].column_names


def test_the_page_shows_dropout_at_work_when_training_is_switched_on() -> None:
    at = open_page("causal_dropout", seed="5")
    at.toggle(key="training").set_value(True).run()
    assert not at.error, [e.value for e in at.error]
    assert any("book's 0.5" in i.value for i in at.info)
    # How many weights the mask lets through tells its triangle, the question's answer: it waits for a choice.
    assert not [m for m in at.metric if "the mask lets through" in m.label]
    answered(at)
    # It read 0.42 here: the share kept of all 36 cells, the 15 masked ones included; the heatmap shows 7 of 21.
    kept = next(m for m in at.metric if m.label == "fraction kept of the 21 weights the mask lets through")
    assert kept.value == "0.33" and kept.help.startswith("7 of 21 kept")
