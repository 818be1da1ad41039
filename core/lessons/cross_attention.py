"""Lesson 7: queries from one sequence, keys and values from another."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from core import recipes
from core.examples import embed_text, random_second_sequence
from core.lessons.common import (
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
    code: str  # the filled recipe core/recipes/cross_attention.py


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
        code=code,
    )
