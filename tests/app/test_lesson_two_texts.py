"""Lesson 2's sentences follow the sidebar (issue 30, defect 7): the book's seed hint, the scale, d_v."""

from __future__ import annotations

import pytest

from core.app.settings import PresetKey, Settings
from core.lessons import trainable_weights as tw
from tests.support import markdown_text, open_page


def captions(at) -> str:
    return "\n".join(c.value for c in at.caption)


@pytest.mark.parametrize(
    ("seed", "d_out", "expected", "absent"),
    [
        (123, 2, "set the seed to 789", "is the row the book prints"),
        (789, 2, "is the row the book prints", "set the seed to 789"),
        (789, 4, "set both", "is the row the book prints"),
    ],
)
def test_the_book_seed_hint_says_what_is_true_here(seed: int, d_out: int, expected: str, absent: str) -> None:
    # The hint "set the seed to 789" stayed when the seed already was 789, and at d_out 4 (where seed 789
    # does not give the book's two numbers).
    at = open_page("trainable_weights", preset="book", seed=str(seed), d_out=str(d_out))
    # The v1/v2 table and its hint wait for the favourites question (the fourth review): answer it first.
    next(r for r in at.radio if str(r.key).startswith("predict_trainable_weights")).set_value(0).run()
    text = captions(at)
    assert expected in text
    assert absent not in text


def test_the_book_row_at_its_seed_is_measured_not_assumed() -> None:
    settings = Settings(preset=PresetKey.BOOK, seed=789, d_out=2)
    hint = tw.book_v2_hint(settings, (-0.0739, 0.0713))
    assert hint is not None and "is the row the book prints" in hint
    other = tw.book_v2_hint(settings, (-0.0740, 0.0713))
    assert other is not None and "the book prints [-0.0739, 0.0713]" in other
    assert tw.book_v2_hint(Settings(preset=PresetKey.ARTICLE), (0.0, 0.0)) is None


def test_the_lesson_computes_the_books_row_at_seed_789() -> None:
    lesson = tw.trainable_lesson(Settings(preset=PresetKey.BOOK, seed=789, d_out=2), 1)
    assert lesson.versions is not None
    assert lesson.versions.book_hint is not None and "is the row the book prints" in lesson.versions.book_hint


def test_with_the_scale_off_the_recipe_does_not_promise_scaled_scores() -> None:
    on = markdown_text(open_page("trainable_weights", scale="true"))
    off = markdown_text(open_page("trainable_weights", scale="false"))
    assert "ω/√d_k" not in on + off  # "scaled scores ω/√d_k" stayed with the scale off
    assert "or 1 while the sidebar's scale is off" in on and "or 1 while the sidebar's scale is off" in off
    latex_off = " ".join(e.value for e in open_page("trainable_weights", scale="false").get("latex"))
    assert r"\text{scale} = 1.0000" in latex_off


def test_d_v_is_explained_without_promising_a_control() -> None:
    text = markdown_text(open_page("trainable_weights", d_out="3"))
    assert "d_v may differ" not in text
    assert "Here d_k = **3** and d_v = **3**: the sidebar's d_out sets both." in text
