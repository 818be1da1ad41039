"""Measures of attention heads: how spread out, how far, how much on [CLS] / [SEP] / the neighbours.

Pure functions of a stack of attention maps (rows sum to 1), used by the real-model lesson.
Shape legend: L = layers, h = heads per layer, T = tokens (queries along rows, keys along columns).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import pandas as pd
import torch


class Measure(StrEnum):
    """What we measure per head, averaged over the sentence's query tokens."""

    ENTROPY = "entropy"
    DISTANCE = "distance"
    WORD_DISTANCE = "word_distance"
    CLS = "cls"
    SEP = "sep"
    PREVIOUS = "previous"
    NEXT = "next"

    @property
    def label(self) -> str:  # not `title`: that would shadow str.title
        return _MEASURE_TITLES[self]


_MEASURE_TITLES = {
    Measure.ENTROPY: "entropy (nats)",
    Measure.DISTANCE: "mean attention distance, all keys (tokens)",
    Measure.WORD_DISTANCE: "mean attention distance, words only (tokens)",
    Measure.CLS: "weight on [CLS]",
    Measure.SEP: "weight on [SEP]",
    Measure.PREVIOUS: "previous-token score",
    Measure.NEXT: "next-token score",
}


@dataclass(frozen=True)
class HeadMeasures:
    """Per-head measures, each (L, h), averaged over query tokens.

    entropy    -sum_j w_ij log w_ij: 0 = all weight on one key, log(T) = spread evenly
    distance   sum_j w_ij |i - j|: how far (in word pieces) a query looks on average
    word_distance  the same over the word pieces only: [CLS] and [SEP] left out as queries and as keys,
               each row's remaining weight renormalised to 1. [CLS] and [SEP] sit at the two ends, so a
               head parking its weight there looks "far" by `distance` whatever it does with the rest.
    cls, sep   weight on the [CLS] / [SEP] key (attention "sinks": a place to park weight)
    previous   w_{i, i-1} averaged over queries 1..T-1 (1.0 = always exactly the previous piece)
    next       w_{i, i+1} averaged over queries 0..T-2
    """

    entropy: torch.Tensor
    distance: torch.Tensor
    word_distance: torch.Tensor
    cls: torch.Tensor
    sep: torch.Tensor
    previous: torch.Tensor
    next: torch.Tensor
    num_tokens: int

    def of(self, measure: Measure) -> torch.Tensor:
        """The (L, h) values of one measure."""
        return getattr(self, measure.value)

    def frame(self) -> pd.DataFrame:
        """Long table: layer, head, measure (its value), value; one row per head and measure."""
        rows = []
        for measure in Measure:
            values = self.of(measure)
            for layer in range(values.shape[0]):
                for head in range(values.shape[1]):
                    rows.append((layer, head, measure.value, float(values[layer, head])))
        return pd.DataFrame(rows, columns=["layer", "head", "measure", "value"])


def row_entropy(weights: torch.Tensor) -> torch.Tensor:
    """Each query's entropy in nats, -sum_j w_ij log w_ij, of `weights` (..., T, T) as float64: (..., T)."""
    weights = weights.double()
    plogp = torch.where(weights > 0, weights * weights.clamp(min=1e-30).log(), torch.zeros_like(weights))
    return -plogp.sum(-1)


def head_measures(weights: torch.Tensor, cls_position: int = 0, sep_position: int | None = None) -> HeadMeasures:
    """Measure every head of `weights` (..., T, T) (rows sum to 1); results have the leading shape.

    `sep_position` defaults to the last key (where [SEP] sits in an unpadded sentence).
    """
    weights = weights.double()
    num_tokens = weights.shape[-1]
    sep_position = num_tokens - 1 if sep_position is None else sep_position
    positions = torch.arange(num_tokens, dtype=weights.dtype)
    distance = (positions[:, None] - positions[None, :]).abs()  # (T, T): |i - j|
    previous = weights.diagonal(offset=-1, dim1=-2, dim2=-1)  # (..., T-1): w[i, i-1] for i = 1..T-1
    following = weights.diagonal(offset=1, dim1=-2, dim2=-1)  # (..., T-1): w[i, i+1] for i = 0..T-2
    empty = torch.zeros(weights.shape[:-2], dtype=weights.dtype)
    return HeadMeasures(
        entropy=row_entropy(weights).mean(-1),
        distance=(weights * distance).sum(-1).mean(-1),
        word_distance=_word_distance(weights, distance, cls_position, sep_position),
        cls=weights[..., :, cls_position].mean(-1),
        sep=weights[..., :, sep_position].mean(-1),
        previous=previous.mean(-1) if num_tokens > 1 else empty,
        next=following.mean(-1) if num_tokens > 1 else empty,
        num_tokens=num_tokens,
    )


def _word_distance(weights: torch.Tensor, distance: torch.Tensor, cls_position: int, sep_position: int) -> torch.Tensor:
    """Mean |i - j| over word-piece queries, each row renormalised over word-piece keys: (..., T, T) -> (...)."""
    num_tokens = weights.shape[-1]
    words = torch.ones(num_tokens, dtype=torch.bool)
    words[[cls_position, sep_position]] = False
    if not words.any():  # no word piece between [CLS] and [SEP]: nothing to measure
        return torch.zeros(weights.shape[:-2], dtype=weights.dtype)
    on_words = weights[..., words, :][..., :, words]  # (..., W, W): word queries, word keys
    # A softmax row never puts exactly zero on every word; the clamp only guards the division.
    renormalised = on_words / on_words.sum(-1, keepdim=True).clamp(min=1e-30)  # (..., W, W)
    return (renormalised * distance[words][:, words]).sum(-1).mean(-1)


class Pattern(StrEnum):
    """Patterns the measures can find; each has a prose section of the same name."""

    PREVIOUS = "previous"
    NEXT = "next"
    SINK = "sink"
    BROAD = "broad"


@dataclass(frozen=True)
class HeadScore:
    layer: int
    head: int
    value: float


@dataclass(frozen=True)
class Finding:
    """The heads showing one pattern in this sentence (strongest first) and the strongest overall."""

    pattern: Pattern
    threshold: float
    heads: tuple[HeadScore, ...]  # those at or above the threshold
    strongest: HeadScore


# Thresholds: half the weight on one place is far above chance (1/T) for any sentence here.
THRESHOLDS = {Pattern.PREVIOUS: 0.5, Pattern.NEXT: 0.5, Pattern.SINK: 0.5, Pattern.BROAD: 0.8}


def pattern_scores(measures: HeadMeasures) -> dict[Pattern, torch.Tensor]:
    """(L, h) score per pattern: previous, next, weight on [CLS] + [SEP], entropy / log(T)."""
    return {
        Pattern.PREVIOUS: measures.previous,
        Pattern.NEXT: measures.next,
        Pattern.SINK: measures.cls + measures.sep,
        Pattern.BROAD: measures.entropy / math.log(max(measures.num_tokens, 2)),
    }


def find_patterns(measures: HeadMeasures) -> tuple[Finding, ...]:
    """For each pattern, the heads whose score passes its threshold (sorted, strongest first)."""
    findings = []
    for pattern, scores in pattern_scores(measures).items():
        num_heads = scores.shape[1]
        ranked = sorted(
            (HeadScore(i // num_heads, i % num_heads, float(v)) for i, v in enumerate(scores.flatten())),
            key=lambda s: -s.value,
        )
        threshold = THRESHOLDS[pattern]
        passing = tuple(s for s in ranked if s.value >= threshold)
        findings.append(Finding(pattern=pattern, threshold=threshold, heads=passing, strongest=ranked[0]))
    return tuple(findings)


def previous_token_share(attention: np.ndarray, lookback: Sequence[bool]) -> np.ndarray:
    """(L, h, T, T) -> (L, h): mean weight a query puts on the token just before it, over the rows
    where that matters (`lookback` (T,), never row 0): on the induction task, the first copy."""
    rows = np.flatnonzero(np.asarray(lookback, dtype=bool))
    rows = rows[rows >= 1]
    return attention[..., rows, rows - 1].mean(axis=-1)
