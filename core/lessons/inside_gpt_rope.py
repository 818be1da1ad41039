"""Lesson 12 (a GPT's keys), section 1: RoPE's offset check on layer 0's query and key of the page's prompt.

`rope_lesson` (the `LessonSpec` ROPE below) moves one query and one key together and compares the scores, and
draws the score against distance rotated and with added sinusoidal positions instead; `pair_sentence` and
the Code box read its result. The model is passed as `_model` (core/lessons/inside_gpt.py).

Shape legend: T tokens, D the model's width (576), H query heads (9), G key/value heads (3), d a head's width (64).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core import recipes
from core.app.registry import LessonSpec
from core.lessons.inside_gpt import MAX_PROMPT_TOKENS, PromptAnalysis, PromptKind, render
from core.models import decoder_measures as measures
from core.models import smollm2

# ----------------------------------------------------------------------------------------------
# 6: RoPE


@dataclass(frozen=True)
class RopeLesson:
    layer: int
    head: int
    query_token: str
    key_token: str
    i: int
    j: int
    shifts: tuple[int, ...]
    scores: tuple[float, ...]  # the score at (i + s, j + s) for each shift
    unrotated: float  # q . k before any rotation: what an order-blind head would score
    rotated_query: tuple[float, ...]  # (d,) the query rotated as at position i: one pair up close
    rotated_key: tuple[float, ...]  # (d,) the key rotated as at position j
    # The same query and key at every distance i - j in DISTANCES, the key at each position of STARTS:
    # rotated (RoPE) and, for contrast, with sinusoidal position vectors added instead.
    rope_curves: tuple[tuple[float, ...], ...]  # (len(STARTS), len(DISTANCES))
    additive_curves: tuple[tuple[float, ...], ...]  # (len(STARTS), len(DISTANCES))

    @property
    def rope_start_gap(self) -> float:
        """The largest difference, at one distance, between the key at one start and at another: RoPE's."""
        return _start_gap(self.rope_curves)

    @property
    def additive_start_gap(self) -> float:
        """The same with added sinusoidal positions: how much where the pair sits changes its score."""
        return _start_gap(self.additive_curves)

    @property
    def spread(self) -> float:
        return max(self.scores) - min(self.scores)

    @property
    def products(self) -> np.ndarray:
        """(d,) q_n x k_n for each dimension n of the rotated pair: their sum is the score at (i, j)."""
        return np.array(self.rotated_query, dtype=np.float64) * np.array(self.rotated_key, dtype=np.float64)


PAIR_NAMED = 3  # the pair view names this many dimensions with the largest products


def pair_sentence(lesson: RopeLesson) -> str:
    """What the pair view's strips show, from their numbers: the products' sum is the table's first score, and
    the dimensions whose products are largest in size, with their sign."""
    products = lesson.products
    largest = np.argsort(-np.abs(products), kind="stable")[:PAIR_NAMED]
    named = ", ".join(f"{int(n)} ({products[n]:+.3f})" for n in largest)
    positive = int((products > 0).sum())
    return (
        f"The {products.size} products add up to {products.sum():.3f}: the score q·k of {lesson.query_token!r} and "
        f"{lesson.key_token!r} at positions {lesson.i} and {lesson.j}, the table's first row. {positive} of them are "
        f"positive and {products.size - positive} are not; the largest in size are in dimensions {named}."
    )


ROPE_SHIFTS = (0, 1, 10, 100, 1000)
DISTANCES = tuple(range(0, 64))  # i - j drawn: the query 0 to 63 tokens after the key
STARTS = (0, 100)  # the key's position in each curve


def _start_gap(curves: tuple[tuple[float, ...], ...]) -> float:
    return max(max(column) - min(column) for column in zip(*curves, strict=True))


DEFAULT_KEY_AT = 1  # the first ordinary token's key (position 0 is the sink, <|im_start|> in a chat)


def pair_positions(num_tokens: int, query_at: int | None, key_at: int | None) -> tuple[int, int]:
    """(i, j): the query's and the key's positions in a prompt of `num_tokens`, by default its last token's query
    and DEFAULT_KEY_AT's key. A key comes at or before its query, as in the causal model; a position past the
    prompt's end (a shorter prompt than the one it was picked on) stands at its last token."""
    i = num_tokens - 1 if query_at is None else max(0, min(query_at, num_tokens - 1))
    j = min(DEFAULT_KEY_AT if key_at is None else max(0, key_at), i)
    return i, j


def rope_lesson(
    _model: smollm2.SmolLM2,
    text: str,
    kind: PromptKind,
    head: int,
    query_at: int | None = None,
    key_at: int | None = None,
) -> RopeLesson:
    """Layer 0's query of one token and key of another (`pair_positions`: the student's pair, by default the
    prompt's last token and its first ordinary token), rotated at shifted positions.

    Layer 0's queries and keys before rotation depend on the token alone (its embedding, normalised),
    so they can be moved to any position; the score then depends only on i - j.
    """
    ids = smollm2.encode(_model, render(_model, text, kind), max_tokens=MAX_PROMPT_TOKENS)
    config, layer = _model.config, _model.weights.layers[0]
    d = config.head_dim
    with torch.inference_mode():
        x = _model.weights.embeddings[ids].float()  # (T, D)
        normed = smollm2.rms_norm(x, layer.attention_norm, config.rms_norm_eps)
        q_all = smollm2.linear(normed, layer.query)  # (T, H * d)
        k_all = smollm2.linear(normed, layer.key)  # (T, G * d)
    i, j = pair_positions(len(ids), query_at, key_at)
    kv = config.kv_head_of(head)
    query = q_all[i, head * d : (head + 1) * d]  # (d,)
    key = k_all[j, kv * d : (kv + 1) * d]  # (d,)
    scores = measures.rope_offset_scores(query, key, i, j, list(ROPE_SHIFTS), config)
    rotated_query, rotated_key = measures.rotated_pair(query, key, i, j, config)
    tokens = smollm2.token_texts(_model, ids)
    rope_curves = tuple(
        tuple(measures.rope_score(query, key, start + distance, start, config) for distance in DISTANCES)
        for start in STARTS
    )
    additive_curves = tuple(
        tuple(measures.additive_score(query, key, start + distance, start) for distance in DISTANCES)
        for start in STARTS
    )
    return RopeLesson(
        0,
        head,
        tokens[i],
        tokens[j],
        i,
        j,
        ROPE_SHIFTS,
        tuple(scores),
        float(query @ key),
        tuple(float(v) for v in rotated_query),
        tuple(float(v) for v in rotated_key),
        rope_curves,
        additive_curves,
    )


# ----------------------------------------------------------------------------------------------
# Code boxes


def rope_code(analysis: PromptAnalysis, result: RopeLesson) -> str:
    """The filled recipe core/recipes/inside_gpt_rope.py: this prompt's ids (`rope_lesson` reads the same
    prompt), this head, this pair."""
    return recipes.fill(
        "inside_gpt_rope", {"ids": list(analysis.token_ids), "head": result.head, "i": result.i, "j": result.j}
    )


ROPE = LessonSpec(rope_lesson, uses=None, max_entries=64)
