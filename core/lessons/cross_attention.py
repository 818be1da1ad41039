"""Lesson 7: queries from one sequence, keys and values from another."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from core import recipes
from core.app.registry import Control, LessonSpec
from core.app.settings import PresetKey, Settings, effective_d_in
from core.attention.modules import CrossAttention
from core.inputs.device import resolve_device
from core.inputs.examples import Example, embed_text, random_second_sequence
from core.lessons.common import (
    CPU,
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

# The overview's (and the attention notebook's) translation pair: the English being written asks
# (queries), the German source answers (keys and values).
DEFAULT_FIRST_TEXT = "Can you help me translate this sentence"
DEFAULT_SECOND_TEXT = "Kannst du mir helfen diesen Satz zu übersetzen"
ARTICLE_SECOND_LENGTH = 8  # the self-attention article's second sequence: torch.rand(8, 16)


@dataclass(frozen=True)
class CrossLesson:
    tokens: tuple[str, ...]  # the first sequence (queries)
    second_tokens: tuple[str, ...]  # the second sequence (keys and values)
    d_in: int  # the first sequence's embedding width
    d_in_kv: int  # the second sequence's embedding width (may differ: only d_k must agree)
    weights: pd.DataFrame  # (T1, T2): rectangular
    output: pd.DataFrame  # context vectors, (T1, d_v)
    strongest: pd.DataFrame  # per query token: the key token it weights most, and that weight
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


def _embed(which: str, text: str, d_in: int, seed: int) -> Example:
    try:
        return embed_text(text, d_in, seed)
    except ValueError as error:
        raise ValueError(f"{which}: {error}") from error


def cross_lesson(
    settings: Settings,
    second_text: str,
    d_v: int,
    first_text: str | None = None,
    d_in_kv: int | None = None,
) -> CrossLesson:
    """Cross-attention of a first sequence (queries) over a second one (keys and values).

    first_text None: the sidebar's input is the first sequence. The article preset keeps the
    article's own setup whatever the texts: its sentence reads `torch.rand(8, 16)`.
    d_in_kv None: the second sequence has the first one's width.
    Raises ValueError when a sentence or a width cannot be used.
    """
    article = settings.preset == PresetKey.ARTICLE
    if article or first_text is None:
        example, x, device = inputs_on_device(settings)  # x: (T1, d_in)
        first_source = inputs_source(settings)
        first_comment = tokens_comment(settings)
    else:
        device = resolve_device(settings.device)
        example = _embed("First sequence", first_text, effective_d_in(settings), settings.seed)
        x = example.embeddings.to(device)  # (T1, d_in)
        first_source, first_comment = tensor_literal(example.embeddings), " | ".join(example.tokens)
    tokens = unique_labels(example.tokens)
    d_in = x.shape[-1]
    width_kv = d_in if article or d_in_kv is None else int(d_in_kv)
    g = generator(settings.seed, CPU)
    module = CrossAttention(d_in, settings.d_out, int(d_v), d_in_kv=width_kv, generator=g).to(device)
    if article:  # drawn from the same generator, after the weights
        second = random_second_sequence(ARTICLE_SECOND_LENGTH, d_in, generator=g).to(device)  # (8, 16)
        second_tokens = dims("s", ARTICLE_SECOND_LENGTH)
        second_source: recipes.Code | None = None
        second_comment = "torch.rand(8, 16): random, untokenised"
    else:
        other = _embed("Second sequence", second_text, width_kv, settings.seed)
        second, second_tokens = other.embeddings.to(device), unique_labels(other.tokens)  # (T2, d_in_kv)
        second_source = tensor_literal(other.embeddings)
        second_comment = " | ".join(other.tokens)
    with torch.no_grad():
        trace = module.trace(x, second, scale=settings.scale_factor)
    code = recipes.fill(
        "cross_attention",
        {
            "tokens": first_comment,
            "second_tokens": second_comment,
            "x_1": first_source,
            "x_2": second_source,
            "seed": settings.seed,
            "d_out": settings.d_out,
            "d_v": int(d_v),
            "scale_scores": settings.scale,
        },
    )
    best = trace.weights.max(dim=-1)  # per query row: (T1,) values and key indices
    return CrossLesson(
        tokens=tokens,
        second_tokens=second_tokens,
        d_in=d_in,
        d_in_kv=width_kv,
        weights=matrix_frame(trace.weights, tokens, second_tokens),
        output=matrix_frame(trace.output, tokens, dims("z", int(d_v))),
        strongest=pd.DataFrame(
            {
                "query (first sequence)": tokens,
                "reads most from": [second_tokens[int(j)] for j in best.indices],
                "weight": best.values.detach().cpu().double().numpy(),
            }
        ),
        shapes=(
            ("x_1 (first sequence)", tuple(x.shape)),
            ("x_2 (second sequence)", tuple(second.shape)),
            ("queries", tuple(trace.queries.shape)),
            ("keys", tuple(trace.keys.shape)),
            ("values", tuple(trace.values.shape)),
            ("weights", tuple(trace.weights.shape)),
            ("context", tuple(trace.output.shape)),
        ),
        prediction=_shape_question(len(tokens), len(second_tokens)),
        code=code,
    )


# The cached computation the page calls (ui/cache.py `computed`); keyed on the settings it reads.
LESSON = LessonSpec(
    cross_lesson,
    uses=frozenset({Control.D_OUT, Control.SEED, Control.SCALE, Control.DEVICE}),
    max_entries=64,
)
