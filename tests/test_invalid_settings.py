"""Settings whose effect was invalid or invisible (issue 19, items 5 and 6)."""

from __future__ import annotations

import pytest

from core.lessons import multi_head
from core.settings import Settings
from tests.test_app import navigation_not_pages_directory  # noqa: F401 - autouse fixture
from tests.test_page_links import open_page


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
    assert at.radio(key="predict_multi_head") is not None  # the question is still asked
    assert any(e.label.startswith("Code") for e in at.expander)
