"""Lesson 2's explanations say what its numbers show (issue 30's claims): a near-tie is not called a head's
learned choice, and q·k through W_q and W_k is not explained with lesson 1's x·x reasoning."""

from __future__ import annotations

import torch

from core.app.settings import Settings
from core.inputs.pretrained_heads import HeadPattern
from core.lessons import pretrained as pt
from core.lessons import trainable_weights as tw

TOKENS = ("[CLS]", "the", "cat", "sat", "[SEP]")
SPREADS = HeadPattern(
    layer=0, head=4, entropy=1.5, previous=0.2, next=0.2, sinks=0.3, self_weight=0.2, summary="spreads out"
)


def test_a_near_tie_is_called_a_near_tie() -> None:
    # "its W_q and W_k learned to make those scores stand out" was said of 0.2672 against 0.2643.
    row = torch.tensor([0.1, 0.2672, 0.2643, 0.2, 0.1685])
    explanation = pt._strongest_question(TOKENS, 2, row, SPREADS).explanation
    assert "0.2672" in explanation and "0.2643" in explanation
    assert "near-tie" in explanation and "stand out" not in explanation and "clear margin" not in explanation


def test_a_clear_winner_is_called_one() -> None:
    row = torch.tensor([0.05, 0.7, 0.1, 0.1, 0.05])
    explanation = pt._strongest_question(TOKENS, 2, row, SPREADS).explanation
    assert "clear margin (0.6000 of the weight)" in explanation and "near-tie" not in explanation


def test_lesson_two_reasons_with_w_q_and_w_k_not_lesson_ones_embeddings() -> None:
    for seed in (123, 789, 1):
        for query in range(6):
            explanation = tw.trainable_lesson(Settings(seed=seed), query).prediction.explanation
            assert "its own embedding" not in explanation and "longer vector" not in explanation
            assert "W_q and W_k alone decide" in explanation


def test_parks_only_where_most_of_the_weight_lands() -> None:
    # "parks its weight on [CLS] and [SEP]" was said of a head that put 0.44 of each row there.
    tokens = 5
    weights = torch.zeros(tokens, tokens)
    weights[:, 0], weights[:, 2] = 0.44, 0.56 / 1  # 0.44 on [CLS], the rest on one word
    pattern = HeadPattern.of(0, 0, weights)
    assert "parks" not in pattern.summary
    weights[:, 0], weights[:, 2] = 0.6, 0.4
    assert HeadPattern.of(0, 0, weights).summary.startswith("parks most of its weight on [CLS] and [SEP] (0.60")
