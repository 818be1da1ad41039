"""Lesson 1: attention with the inputs as their own queries, keys and values (no weights)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from core import recipes
from core.app.registry import Control, LessonSpec
from core.app.settings import Settings
from core.attention import simple
from core.charts import common as charts
from core.charts.spec import VegaChart
from core.lessons.common import (
    Prediction,
    clamp_index,
    dims,
    inputs_on_device,
    inputs_source,
    matrix_frame,
    row_values,
    strongest_key_question,
    tokens_comment,
    unique_labels,
)

NORMALISATIONS = ("divide by sum", "naive softmax", "stable softmax")


@dataclass(frozen=True)
class FloatSums:
    """The float32 sums of the chosen query's three normalisations (multiplier 1).

    The scores come from the attention notebook's loop (one torch.dot per key): the sums' last
    bits depend on how the scores were computed, and the notebook's 0.99999988 and 1.0000001
    come from that loop.
    """

    by_sum: float  # (scores / scores.sum()).sum()
    naive_softmax: float  # (exp / exp.sum()).sum()
    torch_softmax: float  # torch.softmax(scores, dim=0).sum()


@dataclass(frozen=True)
class WithoutWeightsLesson:
    tokens: tuple[str, ...]
    query_index: int
    multiplier: float  # the scores of the chosen query are multiplied by this before normalising
    dots: pd.DataFrame  # token, "dot product", "cosine similarity" for the chosen query
    norms: pd.DataFrame  # token, method, weight: the three normalisations of the chosen query's scores
    scores: pd.DataFrame  # matrix_frame of omega = inputs @ inputs.T, (T, T)
    scores_table: pd.DataFrame  # the same (T, T) scores as a wide table: one row per query, one column per key
    norms_table: pd.DataFrame  # the three normalisations as a wide table: one row per method, one column per token
    weights_table: pd.DataFrame  # the (T, T) weights as a wide table, rows = queries
    context_table: pd.DataFrame  # the (T, d_in) context vectors as a wide table, rows = tokens
    weights: pd.DataFrame  # softmax of the scores, (T, T)
    context: pd.DataFrame  # weights @ inputs, (T, d_in)
    naive_overflows: bool  # exp() overflowed float32 in the naive softmax
    overflow_at: float  # the largest score exp() survives in float32
    max_scaled_score: float
    loop_matches_matrix: bool  # the loop form of scores and context equals the matrix form
    query_context: tuple[float, ...]  # z for the chosen query

    @property
    def dots_long(self) -> pd.DataFrame:
        """`dots` with one row per (token, measure): the grouped bar chart's shape."""
        return self.dots.melt(id_vars="token", var_name="measure", value_name="score")

    prediction: Prediction  # which token the chosen query attends to most
    by_sum_weights: tuple[float, ...]  # the chosen query's divide-by-sum weights at multiplier 1
    largest_share: tuple[str, float]  # (token, weight) with the most of it: the notebook's x(2), 28.75%
    smallest_share: tuple[str, float]  # (token, weight) with the least: the notebook's x(6), 6.05%
    sums: FloatSums
    shuffled: ShuffledTokens  # the same tokens in a fixed shuffled order: the weights shuffle with them
    code: str  # the filled recipe core/recipes/without_weights.py


FLOAT_AGREEMENT = 1e-5  # float32 sums of a few terms in another order differ far less than this
SHUFFLE_SEED = 2024  # the one fixed shuffle the page shows (same for every student, so a class compares)


@dataclass(frozen=True)
class ShuffledTokens:
    """The same tokens in another order: attention alone has no idea of order, so the weights move with them.

    order[p] is the original position of the token now at position p.
    """

    order: tuple[int, ...]
    tokens: tuple[str, ...]  # the tokens in the shuffled order (labels as on the other charts)
    weights: pd.DataFrame  # softmax(x' x'^T) for the shuffled inputs x', (T, T) long frame
    reordered: pd.DataFrame  # the original weights with rows and columns put in the shuffled order
    max_difference: float  # largest |shuffled weight - reordered original weight|
    max_context_difference: float  # largest |z' - z reordered|: each token's context vector is unchanged

    @property
    def agrees(self) -> bool:
        """Shuffled and reordered agree to float32 rounding (sums taken in another order differ in the last bits)."""
        return self.max_difference < FLOAT_AGREEMENT and self.max_context_difference < FLOAT_AGREEMENT


def shuffle_order(num_tokens: int) -> torch.Tensor:
    """A fixed shuffle of 0..T-1 that moves at least one token (for T >= 2): (T,) int64 on the CPU.

    Its own generator: no global RNG on the app path.
    """
    order = torch.randperm(num_tokens, generator=torch.Generator().manual_seed(SHUFFLE_SEED))  # (T,)
    if num_tokens > 1 and torch.equal(order, torch.arange(num_tokens)):
        order = order.roll(1)  # the draw left every token in place: move them all one step instead
    return order


def shuffled_tokens(x: torch.Tensor, tokens: tuple[str, ...]) -> ShuffledTokens:
    """Attention weights and context vectors of the inputs x (T, d_in) read in a shuffled order."""
    order = shuffle_order(x.shape[0])
    on_device = order.to(x.device)
    weights = torch.softmax(simple.dot_scores(x), dim=-1)  # (T, T)
    shuffled_x = x[on_device]  # (T, d_in): row p is the token that was at order[p]
    shuffled_weights = torch.softmax(simple.dot_scores(shuffled_x), dim=-1)  # (T, T)
    reordered = weights[on_device][:, on_device]  # (T, T): P W P^T
    context = simple.context_vectors(x, weights)  # (T, d_in)
    shuffled_context = simple.context_vectors(shuffled_x, shuffled_weights)  # (T, d_in)
    labels = tuple(tokens[i] for i in order.tolist())
    return ShuffledTokens(
        order=tuple(order.tolist()),
        tokens=labels,
        weights=matrix_frame(shuffled_weights, labels, labels),
        reordered=matrix_frame(reordered, labels, labels),
        max_difference=float((shuffled_weights - reordered).abs().max()),
        max_context_difference=float((shuffled_context - context[on_device]).abs().max()),
    )


OVERFLOW_CELL = "NaN (overflow)"  # what a naive-softmax weight of inf/inf reads as in the table


def norms_table(normalised: tuple[torch.Tensor, ...], tokens: tuple[str, ...]) -> pd.DataFrame:
    """One row per normalisation, one column per token; NaN cells spelt out when exp() overflowed.

    A float NaN in st.dataframe reads "None", which says nothing about what went wrong. When a row
    holds a NaN, every cell becomes text at four decimals (the table still lines up) and the NaN
    cells read OVERFLOW_CELL.
    """
    table = pd.DataFrame(
        [w.cpu().double().numpy() for w in normalised], index=list(NORMALISATIONS), columns=list(tokens)
    )
    if not table.isna().to_numpy().any():
        return table
    return table.map(lambda value: OVERFLOW_CELL if pd.isna(value) else f"{value:.4f}")


def without_weights_lesson(settings: Settings, query_index: int, multiplier: float = 1.0) -> WithoutWeightsLesson:
    example, x, _ = inputs_on_device(settings)  # x: (T, d_in)
    tokens = unique_labels(example.tokens)
    query_index = clamp_index(query_index, len(tokens))
    scores = simple.dot_scores(x)  # (T, T)
    cosine = simple.cosine_similarity(x)  # (T, T)
    scaled_row = scores[query_index] * float(multiplier)  # (T,)
    normalised = (
        simple.normalize_by_sum(scaled_row),
        simple.softmax_naive(scaled_row),
        simple.softmax_stable(scaled_row),
    )
    loop_row = simple.dot_scores_for_query(x.cpu(), query_index)  # (T,), the notebook's loop
    by_sum = simple.normalize_by_sum(loop_row)  # (T,)
    sums = FloatSums(
        by_sum=float(by_sum.sum()),
        naive_softmax=float(simple.softmax_naive(loop_row).sum()),
        torch_softmax=float(torch.softmax(loop_row, dim=0).sum()),
    )
    weights = torch.softmax(scores, dim=-1)  # (T, T)
    context = simple.context_vectors(x, weights)  # (T, d_in)
    loop_context = simple.context_vector_loop(x, weights, query_index)  # (d_in,)
    loop_ok = torch.allclose(loop_context, context[query_index], atol=1e-6) and torch.allclose(
        simple.dot_scores_loop(x), scores, atol=1e-6
    )
    code = recipes.fill(
        "without_weights",
        {
            "tokens": tokens_comment(settings),
            "inputs": inputs_source(settings),
            "query": query_index,
            "multiplier": float(multiplier),
        },
    )
    return WithoutWeightsLesson(
        tokens=tokens,
        query_index=query_index,
        multiplier=float(multiplier),
        dots=pd.DataFrame(
            {
                "token": tokens,
                "dot product": scores[query_index].cpu().numpy(),
                "cosine similarity": cosine[query_index].cpu().numpy(),
            }
        ),
        norms=pd.DataFrame(
            [
                {"token": tokens[j], "method": name, "weight": float(w[j])}
                for name, w in zip(NORMALISATIONS, normalised, strict=True)
                for j in range(len(tokens))
            ]
        ),
        scores=matrix_frame(scores, tokens, tokens),
        scores_table=pd.DataFrame(scores.cpu().double().numpy(), index=list(tokens), columns=list(tokens)),
        weights_table=pd.DataFrame(weights.cpu().double().numpy(), index=list(tokens), columns=list(tokens)),
        context_table=pd.DataFrame(
            context.cpu().double().numpy(), index=list(tokens), columns=list(dims("z", x.shape[1]))
        ),
        norms_table=norms_table(normalised, tokens),
        weights=matrix_frame(weights, tokens, tokens),
        context=matrix_frame(context, tokens, dims("z", x.shape[1])),
        naive_overflows=bool(torch.isnan(normalised[1]).any()),
        overflow_at=simple.naive_softmax_overflow_threshold(),
        max_scaled_score=float(scaled_row.max()),
        loop_matches_matrix=bool(loop_ok),
        query_context=row_values(context, query_index),
        prediction=strongest_key_question(tokens, query_index, weights[query_index]),
        by_sum_weights=tuple(float(w) for w in by_sum),
        largest_share=(tokens[int(by_sum.argmax())], float(by_sum.max())),
        smallest_share=(tokens[int(by_sum.argmin())], float(by_sum.min())),
        sums=sums,
        shuffled=shuffled_tokens(x, tokens),
        code=code,
    )


# The cached computation the page calls (ui/cache.py `computed`); keyed on the settings it reads.
LESSON = LessonSpec(without_weights_lesson, uses=frozenset({Control.DEVICE}), max_entries=64)


def norms_chart(lesson: WithoutWeightsLesson, query_index: int, scale: float) -> VegaChart:
    """The three normalisations of the query's scores as grouped bars, each always in its own colour.

    At ×200 every naive-softmax weight is NaN: the fixed groups keep that series in the legend and
    the stable softmax in its own colour (it used to take the naive softmax's).
    """
    token = lesson.tokens[query_index]
    return charts.grouped_bars(
        lesson.norms,
        "token",
        "weight",
        "method",
        f"Weights for “{token}” with scores × {scale:g}",
        groups=NORMALISATIONS,
    )


def dots_chart(lesson: WithoutWeightsLesson, query_index: int) -> VegaChart:
    """The query's dot products and cosine similarities with every token, as grouped bars."""
    token = lesson.tokens[query_index]
    return charts.grouped_bars(
        lesson.dots_long,
        "token",
        "score",
        "measure",
        f"Dot product and cosine similarity with “{token}”",
        groups=tuple(lesson.dots.columns.drop("token")),
    )
