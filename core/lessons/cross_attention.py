"""Lesson 7: queries from one sequence, keys and values from another, for every weight source.

One lesson dataclass and one builder (`lesson_from_cross`, from a head's (T1, T2) weights and (T1, d_v) context)
whatever the source: the sources' random draws here (`cross_lesson`), a model's head in
core/lessons/pretrained_cross.py (`pretrained_cross_lesson`).

Shape legend: T1 = tokens of the first sequence (queries), T2 = of the second (keys and values).
"""

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
class TrainedHead:
    """A model's head reading another sentence: where its weight goes (`?weights=pretrained`)."""

    layer: int
    head: int
    special_share: float  # mean weight of a row on the second sentence's [CLS] and [SEP]
    copy_share: float  # mean share of a shared word's weight on words (not [CLS]/[SEP]) that goes to its copy
    copies_found: int  # shared words whose strongest word key is their copy
    shared_words: int  # content word pieces that occur in both sentences


@dataclass(frozen=True)
class CrossLesson:
    """Lesson 7 for every weight source; a source's own sections are None (False) where it has none."""

    tokens: tuple[str, ...]  # the first sequence (queries)
    second_tokens: tuple[str, ...]  # the second sequence (keys and values)
    weights: pd.DataFrame  # (T1, T2): rectangular
    output: pd.DataFrame  # context vectors, (T1, d_v)
    strongest: pd.DataFrame  # per query token: the key token it weights most, and that weight
    shapes: tuple[tuple[str, tuple[int, ...]], ...]  # (tensor, shape): x_1 (T1, d_in) and x_2 first, context last
    prediction: Prediction
    code: str  # the filled recipe core/recipes/cross_attention.py (pretrained_cross.py)
    translating: bool = False  # random draws: the overview's translation pair
    trained: TrainedHead | None = None  # a model's head

    # The widths are read off the shapes rather than stored twice (every cached entry holds them).
    @property
    def d_in(self) -> int:
        """The first sequence's embedding width."""
        return self.shapes[0][1][-1]

    @property
    def d_in_kv(self) -> int:
        """The second sequence's embedding width (may differ from d_in: only d_k must agree)."""
        return self.shapes[1][1][-1]

    @property
    def d_v(self) -> int:
        """The context vectors' width: the page's d_v, a model head's d_k."""
        return self.shapes[-1][1][-1]


def strongest_keys(
    tokens: tuple[str, ...], second_tokens: tuple[str, ...], weights: torch.Tensor, names: tuple[str, str]
) -> pd.DataFrame:
    """Per query row of weights (T1, T2): the key it weights most and that weight, under `names` (query, key)."""
    best = weights.max(dim=-1)  # (T1,) values and key indices
    return pd.DataFrame(
        {
            names[0]: tokens,
            names[1]: [second_tokens[int(j)] for j in best.indices],
            "weight": best.values.detach().cpu().double().numpy(),
        }
    )


def lesson_from_cross(
    tokens: tuple[str, ...],
    second_tokens: tuple[str, ...],
    weights: torch.Tensor,
    context: torch.Tensor,
    shapes: tuple[tuple[str, tuple[int, ...]], ...],
    *,
    strongest: pd.DataFrame,
    prediction: Prediction,
    code: str,
    translating: bool = False,
    trained: TrainedHead | None = None,
) -> CrossLesson:
    """The lesson from a head's weights (T1, T2) and context (T1, d_v), whatever the source; `shapes` starts with
    x_1 (T1, d_in) and x_2 (T2, d_in_kv) and ends with the context (T1, d_v)."""
    if shapes[-1][1] != tuple(context.shape):
        raise ValueError(f"the last shape {shapes[-1]} is not the context's {tuple(context.shape)}")
    return CrossLesson(
        tokens=tokens,
        second_tokens=second_tokens,
        weights=matrix_frame(weights, tokens, second_tokens),
        output=matrix_frame(context, tokens, dims("z", int(context.shape[-1]))),
        strongest=strongest,
        shapes=shapes,
        prediction=prediction,
        code=code,
        translating=translating,
        trained=trained,
    )


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
    shapes = (
        ("x_1 (first sequence)", tuple(x.shape)),
        ("x_2 (second sequence)", tuple(second.shape)),
        ("queries", tuple(trace.queries.shape)),
        ("keys", tuple(trace.keys.shape)),
        ("values", tuple(trace.values.shape)),
        ("weights", tuple(trace.weights.shape)),
        ("context", tuple(trace.output.shape)),
    )
    return lesson_from_cross(
        tokens,
        second_tokens,
        trace.weights,  # (T1, T2)
        trace.output,  # (T1, d_v)
        shapes,
        strongest=strongest_keys(tokens, second_tokens, trace.weights, ("query (first sequence)", "reads most from")),
        prediction=_shape_question(len(tokens), len(second_tokens)),
        code=code,
        # Only the overview's pair is a translation: your own sentences are not called one.
        translating=not article and (first_text, second_text) == (DEFAULT_FIRST_TEXT, DEFAULT_SECOND_TEXT),
    )


# The cached computation the page calls (ui/cache.py `computed`); keyed on the settings it reads.
LESSON = LessonSpec(
    cross_lesson,
    uses=frozenset({Control.D_OUT, Control.SEED, Control.SCALE, Control.DEVICE}),
    max_entries=64,
)
