"""Lesson 12's question and sentences (core/lessons/gpt_keys.py): from the page's own numbers."""

from __future__ import annotations

import numpy as np
import pytest

from core.lessons import gpt_keys
from core.lessons import inside_gpt as gpt
from core.lessons import inside_gpt_rope as gpt_rope
from core.lessons.common import Prediction
from core.lessons.gpt_keys import Moved


@pytest.mark.parametrize(
    ("scores", "moved"),
    [
        ((1.0, 1.0 + 5e-6, 1.0 - 5e-6, 1.0, 1.0), Moved.SAME),  # float rounding
        ((1.0, 1.2, 1.5, 2.0, 2.0), Moved.GROWS),
        ((1.0, 0.9, 0.5, 0.5, -3.0), Moved.SHRINKS),
        ((1.0, 1.5, 0.5, 2.0, 1.0), Moved.WANDERS),
    ],
)
def test_the_questions_answer_is_what_the_scores_do(scores: tuple[float, ...], moved: Moved) -> None:
    assert gpt_keys.how_it_moved(scores) is moved


def test_the_groups_sentence_counts_the_groups_and_names_one_layer_s_shared_induction_heads() -> None:
    groups = (0, 0, 0, 1, 1, 1, 2, 2, 2)
    scores = np.zeros((3, 9))
    scores[1, [3, 5]] = 0.7  # layer 1: two heads of group 1
    scores[2, 7] = 0.5
    sentence = gpt_keys.groups_sentence(scores, groups)
    assert sentence.startswith("The 3 heads with an induction score of at least 0.40 read 2 of the 3 key/value heads")
    assert "in layer 1, heads 3 and 5 read the same key/value head (1)" in sentence
    scores[0, 0] = 0.9
    assert "read all 3 key/value heads" in gpt_keys.groups_sentence(scores, groups)
    assert gpt_keys.groups_sentence(np.zeros((3, 9)), groups).startswith("No head")


@pytest.mark.parametrize("example", gpt.EXAMPLES, ids=lambda e: e.key)
def test_on_every_example_prompt_moving_the_pair_leaves_its_score_as_the_question_says(decoder, example) -> None:
    """The answer the page grades: at every head of layer 0, on each example's default pair and an early one."""
    questions: dict[str, Prediction] = {}
    for head in range(9):
        for pair in ((), (2, 1)):
            result = gpt_rope.rope_lesson(decoder, example.text, example.kind, head, *pair)
            question = gpt_keys.shift_question(result)
            assert question.answer == Moved.SAME, (example.key, head, pair, result.scores)
            assert result.spread < gpt_keys.ROUNDING and "up to float rounding" in question.explanation
            # One question for every pair and head (the s30 review: a new pick wiped the student's answer).
            assert question.fingerprint() == questions.setdefault("first", question).fingerprint()
