"""Lesson 1: attention with the inputs as their own queries, keys and values (no weights)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from core import recipes, simple
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
from core.settings import Settings

NORMALISATIONS = ("divide by sum", "naive softmax", "stable softmax")


@dataclass(frozen=True)
class WithoutWeightsLesson:
    tokens: tuple[str, ...]
    query_index: int
    multiplier: float  # the scores of the chosen query are multiplied by this before normalising
    dots: pd.DataFrame  # token, "dot product", "cosine similarity" for the chosen query
    norms: pd.DataFrame  # token, method, weight: the three normalisations of the chosen query's scores
    scores: pd.DataFrame  # matrix_frame of omega = inputs @ inputs.T, (T, T)
    weights: pd.DataFrame  # softmax of the scores, (T, T)
    context: pd.DataFrame  # weights @ inputs, (T, d_in)
    naive_overflows: bool  # exp() overflowed float32 in the naive softmax
    overflow_at: float  # the largest score exp() survives in float32
    max_scaled_score: float
    loop_matches_matrix: bool  # the loop form of scores and context equals the matrix form
    query_context: tuple[float, ...]  # z for the chosen query
    prediction: Prediction  # which token the chosen query attends to most
    code: str  # the filled recipe core/recipes/without_weights.py


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
        weights=matrix_frame(weights, tokens, tokens),
        context=matrix_frame(context, tokens, dims("z", x.shape[1])),
        naive_overflows=bool(torch.isnan(normalised[1]).any()),
        overflow_at=simple.naive_softmax_overflow_threshold(),
        max_scaled_score=float(scaled_row.max()),
        loop_matches_matrix=bool(loop_ok),
        query_context=row_values(context, query_index),
        prediction=strongest_key_question(tokens, query_index, weights[query_index]),
        code=code,
    )
