"""Lesson 7: queries from one sequence, keys and values from another."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from core import recipes
from core.examples import embed_text, random_second_sequence
from core.lessons.common import (
    Prediction,
    dims,
    generator,
    inputs_on_device,
    inputs_source,
    matrix_frame,
    tensor_literal,
    tokens_comment,
    unique_labels,
)
from core.modules import CrossAttention
from core.settings import Settings

DEFAULT_SECOND_TEXT = "Das Leben ist kurz, iss den Nachtisch zuerst"
ARTICLE_SECOND_LENGTH = 8  # the self-attention article's second sequence: torch.rand(8, 16)


@dataclass(frozen=True)
class CrossLesson:
    tokens: tuple[str, ...]  # the first sequence (queries)
    second_tokens: tuple[str, ...]  # the second sequence (keys and values)
    weights: pd.DataFrame  # (T1, T2): rectangular
    output: pd.DataFrame  # context vectors, (T1, d_v)
    shapes: tuple[tuple[str, tuple[int, ...]], ...]  # (tensor, shape)
    prediction: Prediction  # the weights' shape, asked before it is shown
    code: str  # the filled recipe core/recipes/cross_attention.py


def _shape_question(first: int, second: int) -> Prediction:
    options = (f"{first} × {first} (square, like self-attention)", f"{first} × {second}", f"{second} × {first}")
    return Prediction(
        question=f"The first sequence has {first} tokens, the second {second}. What shape will the weights have?",
        options=options,
        answer=1,
        explanation=(
            "One row per query (the first sequence) and one column per key (the second): "
            "each row is a softmax over the second sequence, so each row sums to 1."
        ),
    )


def cross_lesson(settings: Settings, second_text: str, d_v: int) -> CrossLesson:
    """Raises ValueError when the second sentence cannot be used."""
    example, x, device = inputs_on_device(settings)  # x: (T1, d_in)
    tokens = unique_labels(example.tokens)
    d_in = x.shape[-1]
    g = generator(settings.seed)
    module = CrossAttention(d_in, settings.d_out, int(d_v), generator=g).to(device)
    if settings.preset == "article":  # drawn from the same generator, after the weights
        second = random_second_sequence(ARTICLE_SECOND_LENGTH, d_in, generator=g).to(device)  # (8, 16)
        second_tokens = dims("s", ARTICLE_SECOND_LENGTH)
        second_source: recipes.Code | None = None
    else:
        other = embed_text(second_text, d_in, settings.seed)
        second, second_tokens = other.embeddings.to(device), unique_labels(other.tokens)
        second_source = tensor_literal(other.embeddings)
    with torch.no_grad():
        trace = module.trace(x, second, scale=settings.scale_factor)
    code = recipes.fill(
        "cross_attention",
        {
            "tokens": tokens_comment(settings),
            "x_1": inputs_source(settings),
            "x_2": second_source,
            "seed": settings.seed,
            "d_out": settings.d_out,
            "d_v": int(d_v),
            "scale_scores": settings.scale,
        },
    )
    return CrossLesson(
        tokens=tokens,
        second_tokens=second_tokens,
        weights=matrix_frame(trace.weights, tokens, second_tokens),
        output=matrix_frame(trace.output, tokens, dims("z", int(d_v))),
        shapes=(
            ("queries", tuple(trace.queries.shape)),
            ("keys", tuple(trace.keys.shape)),
            ("values", tuple(trace.values.shape)),
            ("weights", tuple(trace.weights.shape)),
            ("context", tuple(trace.output.shape)),
        ),
        prediction=_shape_question(len(tokens), len(second_tokens)),
        code=code,
    )
