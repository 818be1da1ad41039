"""Lesson 2's question and explanations say what its numbers show (issue 30): it no longer repeats lesson 1's
question, its answer is the count of the rows' favourite keys, and the head's pattern is the measured one."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from core.app.settings import Settings
from core.inputs.pretrained_heads import HeadPattern
from core.lessons import frame_matrix
from core.lessons import trainable_weights as tw

TOKENS = ("[CLS]", "the", "cat", "sat", "[SEP]")
SPREADS = HeadPattern(
    layer=0, head=4, entropy=1.5, previous=0.2, next=0.2, sinks=0.3, self_weight=0.2, summary="spreads out"
)


def test_lesson_two_counts_favourite_keys_instead_of_repeating_lesson_ones_question() -> None:
    # Issue 30: lesson 2 asked lesson 1's question ("which token will 'journey' attend to most?") and got its
    # answer ("journey"). It now asks how many different keys win a row, answered by every row's argmax.
    lesson = tw.trainable_lesson(Settings(), 1)  # the book's example, seed 123, d_out 2
    prediction = lesson.prediction
    assert "favourite" in prediction.question and "attend to most" not in prediction.question
    weights = frame_matrix(lesson.weights)  # (6, 6)
    assert set(weights.argmax(dim=-1).tolist()) == {1}  # every row's largest weight is on "journey"
    assert prediction.options[prediction.answer].startswith("One:")
    spread = float((weights.max(dim=0).values - weights.min(dim=0).values).max())
    assert "One favourite for all 6 rows: “journey”" in prediction.explanation
    assert f"more than {spread:.4f} in any weight" in prediction.explanation
    assert "its own embedding" not in prediction.explanation  # lesson 1's x·x reasoning
    # The s22 review: the same answer at every seed, and a reason that did not say why. It is measured here.
    queries, keys = frame_matrix(lesson.queries), frame_matrix(lesson.keys)
    assert (queries >= 0).all() and (keys[1] >= keys).all()  # "journey"'s key dominates every other, coordinatewise
    assert "the key of “journey” is at least as large as every other key" in prediction.explanation
    mixed = tw.favourite_keys_question(tuple(lesson.tokens), weights)  # signs not known: not said
    assert "at least as large" not in mixed.explanation and "W_q and W_k are random" in mixed.explanation


@pytest.mark.parametrize("seed", range(0, 40))
def test_a_dominating_key_is_named_only_where_it_wins_every_row(seed: int) -> None:
    # The s22 re-review: "all positive, so one key wins" does not follow (seed 13 gives two favourites).
    lesson = tw.trainable_lesson(Settings(seed=seed), 1)
    weights = frame_matrix(lesson.weights)
    named = "is at least as large as every other key" in lesson.prediction.explanation
    dominant = tw.dominant_key_of(frame_matrix(lesson.queries), frame_matrix(lesson.keys))
    assert named == (dominant is not None and len(set(weights.argmax(dim=-1).tolist())) == 1)
    if dominant is not None:  # then it is every row's favourite (up to a tie in the weights)
        assert all(float(row[dominant]) >= float(row.max()) - 1e-6 for row in weights)


def test_the_count_falls_in_the_range_it_is_offered_under() -> None:
    tokens = ("[CLS]", "the", "cat", "sat", "[SEP]", "a", "b", "c")
    eye = torch.eye(8)  # every row its own favourite: 8 different ones
    prediction = tw.favourite_keys_question(tokens, eye, head=SPREADS)
    assert prediction.options[prediction.answer] == "5 to 8: many different tokens are favourites"
    assert prediction.question.startswith("In layer 0, head 4, each of the 8 rows")
    assert "8 different favourites" in prediction.explanation and "spreads out" in prediction.explanation
    two = torch.zeros(8, 8)
    two[:4, 2], two[4:, 5] = 1.0, 1.0  # two favourites: "cat" for 4 rows, "a" for 4
    prediction = tw.favourite_keys_question(tokens, two)
    assert prediction.options[prediction.answer] == "2 to 4: a few tokens are the favourite of many rows"
    assert "“cat” (4 rows), “a” (4 rows)" in prediction.explanation
    five = torch.zeros(8, 8)  # 5 different favourites, but 4 rows share "[CLS]": not "a favourite of their own"
    five[:4, 0], five[4, 1], five[5, 2], five[6, 3], five[7, 4] = 1.0, 1.0, 1.0, 1.0, 1.0
    prediction = tw.favourite_keys_question(tokens, five)
    assert prediction.options[prediction.answer] == "5 to 8: many different tokens are favourites"
    assert "“[CLS]” (4 rows)" in prediction.explanation and "own" not in prediction.options[prediction.answer]
    small = tw.favourite_keys_question(("a", "b"), torch.eye(2))  # two rows: two ranges only
    assert small.options[small.answer] == "More than one: the rows have different favourites"


@given(st.integers(1, 12), st.integers(0, 2**31 - 1))
def test_the_answer_is_always_the_count_of_distinct_argmaxes(num_tokens: int, seed: int) -> None:
    weights = torch.rand(num_tokens, num_tokens, generator=torch.Generator().manual_seed(seed)).softmax(-1)
    tokens = tuple(f"t{i}" for i in range(num_tokens))
    prediction = tw.favourite_keys_question(tokens, weights)
    distinct = len(set(weights.argmax(dim=-1).tolist()))
    label = prediction.options[prediction.answer]
    if distinct == 1:
        assert label.startswith("One:")
    else:
        low, _, high = label.split(":")[0].replace("More than one", f"2 to {max(num_tokens, 2)}").partition(" to ")
        assert int(low) <= distinct <= int(high or low)


def test_parks_only_where_most_of_the_weight_lands() -> None:
    # "parks its weight on [CLS] and [SEP]" was said of a head that put 0.44 of each row there.
    tokens = 5
    weights = torch.zeros(tokens, tokens)
    weights[:, 0], weights[:, 2] = 0.44, 0.56 / 1  # 0.44 on [CLS], the rest on one word
    pattern = HeadPattern.of(0, 0, weights)
    assert "parks" not in pattern.summary
    weights[:, 0], weights[:, 2] = 0.6, 0.4
    assert HeadPattern.of(0, 0, weights).summary.startswith("parks most of its weight on [CLS] and [SEP] (0.60")


def test_most_is_read_off_the_printed_share_and_a_second_pattern_is_named() -> None:
    # The s24 review: "parks most of its weight on [CLS] and [SEP] (0.50 ...)" for a head at 0.5047 whose map is a
    # next-piece diagonal (0.33): 0.50 is not more than half, and the diagonal went unnamed.
    tokens = 6
    weights = torch.zeros(tokens, tokens)
    weights[:, 0] = 0.5047  # [CLS]
    for query in range(tokens - 1):
        weights[query, query + 1] += 0.33
    weights[tokens - 2, 0] -= 0.33  # this query's next piece is [SEP]: the sink share stays 0.5047
    rest = torch.nn.functional.one_hot(torch.tensor([2, 3, 3, 2, 2, 2]), tokens)  # (T, T): one word per row...
    weights += (1 - weights.sum(dim=-1, keepdim=True)) * rest  # ...takes the rest: rows sum to 1
    assert f"{HeadPattern.of(0, 0, weights).sinks:.4f}" == "0.5047"
    summary = HeadPattern.of(0, 0, weights).summary
    assert "parks" not in summary and summary.startswith("puts a large share on [CLS] and [SEP] (0.5")
    assert ", and looks at the next piece (0.3" in summary
    weights = torch.full((tokens, tokens), 0.05)
    weights[:, 0], weights[:, 1] = 0.6, 0.2  # one clear pattern only: no second label
    assert ", and" not in HeadPattern.of(0, 0, weights).summary


def test_a_decoder_heads_share_says_it_leaves_the_first_row_out() -> None:
    # The s19 review: "looks at itself (0.83 of each row on average)" was the mean of rows 2-6 (query 0 can only
    # look at itself, its row is 1); over all six rows it was 0.86.
    from core.inputs.weights import MODELS, WeightSource

    weights = torch.tensor([[1.0, 0.0, 0.0], [0.2, 0.8, 0.0], [0.1, 0.1, 0.8]])
    summary = HeadPattern.of(0, 0, weights, MODELS[WeightSource.DECODER]).summary
    assert summary == "looks at itself (0.80 of each row after the first on average)"
    assert HeadPattern.of(0, 0, weights).summary == "looks at itself (0.87 of each row on average)"  # the encoder's


def test_a_next_piece_share_names_the_rows_it_is_measured_on() -> None:
    # The s26b review: lesson 4 printed "looks at the next piece (0.54 of each row on average)" beside "0.49 of an
    # average row's weight on later pieces": the first a mean over the rows that have a next piece, the second over
    # all of them. Each says which rows.
    tokens = 4
    following = torch.eye(tokens).roll(1, dims=1) * 0.88 + 0.03  # (T, T): 0.91 on the next piece, cyclically
    following[-1] = 1 / tokens  # the last row has no next piece: an even row
    summary = HeadPattern.of(0, 0, following).summary
    assert summary.startswith("looks at the next piece (0.91 of each row but the last on average)"), summary
    before = torch.eye(tokens).roll(-1, dims=1) * 0.88 + 0.03  # 0.91 on the previous piece
    before[0] = 1 / tokens  # the first row has no previous piece
    summary = HeadPattern.of(0, 0, before).summary
    assert summary.startswith("looks at the previous piece (0.91 of each row after the first on average)"), summary


def test_a_decoder_heads_spread_is_measured_against_what_each_query_can_reach() -> None:
    # The s23 review: a peaked decoder head read "spreads out 0.41" and layer 0's heads 0.40-0.58, because each
    # row's entropy was divided by log T; query i sees i + 1 keys, so its most is log(i + 1).
    from core.inputs.weights import MODELS, WeightSource

    decoder, encoder = MODELS[WeightSource.DECODER], MODELS[WeightSource.ENCODER]
    size = 6
    even = torch.tril(torch.ones(size, size))
    even = even / even.sum(-1, keepdim=True)  # every query spreads evenly over what it sees
    pattern = HeadPattern.of(0, 0, even, decoder)
    assert pattern.summary == "spreads out (entropy 1.00 of its maximum)", pattern.summary
    # The entropy column, like the other columns, is a mean over the queries after the first.
    assert pattern.entropy == pytest.approx(sum(torch.log(torch.arange(2.0, size + 1)).tolist()) / (size - 1))
    uniform = torch.full((size, size), 1 / size)  # an encoder's even head: unchanged, log T over log T
    assert HeadPattern.of(0, 0, uniform, encoder).summary == "spreads out (entropy 1.00 of its maximum)"
