"""Lesson 6's chart frames: the 72-head grid, one head's weights and lines, the measure map, the causal view.

Pure functions of a `RealModelLesson` (core/lessons/real_model.py) that return the DataFrames
core/charts/real_model.py's templates draw. Shape legend as in core/lessons/real_model.py.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from core.attention import functional as fn
from core.attention.head_measures import Measure
from core.lessons.multi_head import heads_frame
from core.lessons.real_model import QUESTION_HEADS, RealModelLesson, head_name, ranked_previous_heads

GRID_FLOOR = 0.02  # grid cells below this weight are left to the panel's background (the colour of 0)


@functools.lru_cache(maxsize=64)
def _label_dtype(labels: tuple[str, ...]) -> pd.CategoricalDtype:
    """One checked categorical type per sentence: pandas validates the categories each time one is made."""
    return pd.CategoricalDtype(categories=list(labels))


def _labels_at(lesson: RealModelLesson, positions: torch.Tensor) -> pd.Categorical:
    """The (unique) labels at `positions`, as a categorical: it reaches the browser as an Arrow
    dictionary column, far cheaper to convert than one Python string per cell (bench/NOTES.md)."""
    return pd.Categorical.from_codes(positions.numpy(), dtype=_label_dtype(lesson.labels))


def grid_frame(lesson: RealModelLesson, layer: int, head: int, floor: float = GRID_FLOOR) -> pd.DataFrame:
    """Every head's weights, long: layer, head, query_index, key_index, query, key, weight, chosen.

    Cells under `floor` are dropped: on a 0..1 colour scale they look like 0 anyway, and the
    72 panels of a 64-piece sentence would otherwise hold 295,000 cells. `chosen` marks the
    cells of the head (layer, head) that the page has opened. The positions are sent as bytes
    (uint8: 64 pieces at most), not int64: at the cap, 0.4 MB in one message instead of 1.6 MB.
    """
    weights = lesson.attentions
    layers, heads, queries, keys = torch.nonzero(weights >= floor, as_tuple=True)
    return pd.DataFrame(
        {
            "layer": layers.numpy().astype(np.uint8),
            "head": heads.numpy().astype(np.uint8),
            "query_index": queries.numpy().astype(np.uint8),
            "key_index": keys.numpy().astype(np.uint8),
            "query": _labels_at(lesson, queries),
            "key": _labels_at(lesson, keys),
            "weight": weights[layers, heads, queries, keys].numpy().round(4),
            "chosen": ((layers == layer) & (heads == head)).numpy(),
        }
    )


def layer_frame(lesson: RealModelLesson, layer: int) -> pd.DataFrame:
    """One layer's heads, long (head, row, col, value, row_index, col_index): core.charts.heads' panels,
    which a phone shows larger than the 72-head grid's squares."""
    return heads_frame(lesson.attentions[layer], lesson.labels, range(lesson.num_heads))


def weights_frame(lesson: RealModelLesson, weights: torch.Tensor) -> pd.DataFrame:
    """A (T, T) matrix over this sentence's pieces, long: row, col, value, row_index, col_index
    (core.lessons.matrix_frame's columns, built without a Python loop: 4,096 cells at the cap)."""
    num_tokens = weights.shape[-1]
    rows, cols = torch.meshgrid(torch.arange(num_tokens), torch.arange(num_tokens), indexing="ij")
    rows, cols = rows.flatten(), cols.flatten()
    return pd.DataFrame(
        {
            "row": _labels_at(lesson, rows),
            "col": _labels_at(lesson, cols),
            "value": weights.detach().double().flatten().numpy(),
            "row_index": rows.numpy(),
            "col_index": cols.numpy(),
        }
    )


def question_heads_frame(lesson: RealModelLesson) -> pd.DataFrame:
    """The QUESTION_HEADS heads with the highest previous-piece scores as small multiples (core.charts.heads'
    long frame), highest first, each named with its score: the verdict's evidence."""
    shown = ranked_previous_heads(lesson)[:QUESTION_HEADS]
    weights = torch.stack([lesson.head(s.layer, s.head) for s in shown])  # (3, T, T)
    return heads_frame(weights, lesson.labels, [f"{head_name(s)}: {s.value:.2f}" for s in shown])


def head_frame(lesson: RealModelLesson, layer: int, head: int) -> pd.DataFrame:
    """One head as a heatmap's long frame (row = query, col = key)."""
    return weights_frame(lesson, lesson.head(layer, head))


def lines_frame(lesson: RealModelLesson, layer: int, head: int, floor: float = 0.05) -> pd.DataFrame:
    """One head as lines: query_index, key_index, query, key, weight (weights under `floor` dropped)."""
    weights = lesson.head(layer, head)
    queries, keys = torch.nonzero(weights >= floor, as_tuple=True)
    return pd.DataFrame(
        {
            "query_index": queries.numpy(),
            "key_index": keys.numpy(),
            "query": _labels_at(lesson, queries),
            "key": _labels_at(lesson, keys),
            "weight": weights[queries, keys].double().numpy().round(4),
        }
    )


def tokens_frame(lesson: RealModelLesson) -> pd.DataFrame:
    """query_index, token: the labels down both sides of the line view."""
    return pd.DataFrame({"query_index": range(len(lesson.labels)), "token": list(lesson.labels)})


def measure_frame(lesson: RealModelLesson, measure: Measure, layer: int = -1, head: int = -1) -> pd.DataFrame:
    """layer, head, value, chosen: one measure as a 6 x 12 table; `chosen` marks (layer, head)."""
    values = lesson.measures.of(measure)  # (L, h)
    layers, heads = torch.meshgrid(torch.arange(values.shape[0]), torch.arange(values.shape[1]), indexing="ij")
    return pd.DataFrame(
        {
            "layer": layers.flatten().numpy(),
            "head": heads.flatten().numpy(),
            "value": values.flatten().numpy(),
            "chosen": ((layers == layer) & (heads == head)).flatten().numpy(),
        }
    )


@dataclass(frozen=True)
class CausalView:
    """The chosen head as the encoder computes it, and with a GPT's causal mask put back.

    weights, causal_weights (T, T). future_share (T,): how much of each query's weight sits on
    later tokens, which is what a causal mask takes away and shares out over the earlier ones.
    Only this head changes: in a causal model every earlier layer would see less too.
    """

    weights: torch.Tensor
    causal_weights: torch.Tensor
    future_share: torch.Tensor
    mean_future_share: float


def causal_view(lesson: RealModelLesson, layer: int, head: int) -> CausalView:
    """Re-apply a causal mask to one head.

    Masking the scores before the softmax equals zeroing the future weights and renormalising
    each row (the book's two methods agree), so the weights alone are enough here;
    tests/unit/test_real_model.py checks this against the masked scores.
    """
    weights = lesson.head(layer, head)
    num_tokens = weights.shape[-1]
    keep = fn.causal_mask(num_tokens, num_tokens)  # (T, T), True = may attend
    future_share = (weights * (~keep)).sum(-1)  # (T,)
    return CausalView(
        weights=weights,
        causal_weights=fn.renormalise_rows(weights, keep),
        future_share=future_share,
        mean_future_share=float(future_share.mean()),
    )


def causal_frame(lesson: RealModelLesson, view: CausalView) -> pd.DataFrame:
    """The causal-mask version of a head as a heatmap's long frame."""
    return weights_frame(lesson, view.causal_weights)
