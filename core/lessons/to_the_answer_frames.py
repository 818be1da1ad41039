"""Lesson 11's numbers as the DataFrames its chart builders read (core/charts/to_the_answer.py and the maps)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from core.app.markup import token_shown
from core.lessons.inside_gpt_frames import _labels_at as pattern_labels
from core.lessons.inside_gpt_frames import measure_frame
from core.lessons.to_the_answer import AnswerLesson, PatchingLesson


def parts_frame(lesson: AnswerLesson) -> pd.DataFrame:
    """The largest parts of the final residual: part, share, rank (largest first)."""
    return pd.DataFrame(
        {
            "part": list(lesson.part_labels),
            "share": lesson.part_shares.astype(np.float64),
            "rank": np.arange(len(lesson.part_labels)),
        }
    )


def lens_frame(lesson: AnswerLesson) -> pd.DataFrame:
    """The lens: point, position, the answer's probability and rank (1 = top) there, and its top tokens (one
    string)."""
    return pd.DataFrame(
        {
            "point": list(lesson.lens_labels),
            "position": np.arange(len(lesson.lens_labels)),
            "probability": lesson.answer_probabilities.astype(np.float64),
            "rank": lesson.answer_ranks.astype(np.int64),
            "top": [
                ", ".join(f"{token_shown(t)} {p:.0%}" for t, p in zip(tokens, probs, strict=True))
                for tokens, probs in zip(lesson.lens_tokens, lesson.lens_probabilities, strict=True)
            ],
        }
    )


def lens_table(lesson: AnswerLesson) -> pd.DataFrame:
    """Every layer: the answer's rank (1 = top) after its attention and after its MLP, and the top tokens after its
    MLP. The lens points alternate attention, MLP (`lens_labels`), so a layer's two are 2l and 2l + 1."""
    after_attention, after_mlp = lesson.answer_ranks[0::2], lesson.answer_ranks[1::2]  # (L,) each
    answer = token_shown(lesson.answer)
    return pd.DataFrame(
        {
            "layer": np.arange(len(after_mlp)),
            f"rank of {answer} after attention": after_attention.astype(np.int64),
            f"rank of {answer} after MLP": after_mlp.astype(np.int64),
            "top tokens after MLP": [
                " | ".join(token_shown(t) for t in lesson.lens_tokens[i]) for i in range(1, len(lesson.lens_labels), 2)
            ],
        }
    )


def head_map_frame(values: np.ndarray, layer: int, head: int) -> pd.DataFrame:
    """An (L, H) map as the clickable map reads it: layer, head, value, chosen."""
    return measure_frame(values, layer, head)


def pattern_frame(lesson: AnswerLesson, layer: int, head: int) -> pd.DataFrame:
    """One head's weights (T, T) as the heatmap's long frame: row = query, col = key."""
    weights = lesson.attentions[layer, head].astype(np.float64)  # (T, T)
    count = weights.shape[0]
    rows, cols = np.divmod(np.arange(count * count), count)  # row-major cells
    return pd.DataFrame(
        {
            "row": pattern_labels(lesson.tokens, rows),
            "col": pattern_labels(lesson.tokens, cols),
            "value": weights.flatten(),
            "row_index": rows,
            "col_index": cols,
        }
    )


def agreement_frame(estimate: PatchingLesson, exact: PatchingLesson, named: int = 3) -> pd.DataFrame:
    """One row per head: head ("L23H3"), layer, head_index, exact and estimate (its shares), and label (the head's
    name for the `named` heads on top of either map, else "")."""
    layers, heads = np.meshgrid(
        np.arange(exact.restored.shape[0]), np.arange(exact.restored.shape[1]), indexing="ij"
    )  # (L, H) each
    names = [f"L{a}H{b}" for a, b in zip(layers.flatten(), heads.flatten(), strict=True)]
    on_top = {f"L{a}H{b}" for a, b, _ in (*exact.top_heads(named), *estimate.top_heads(named))}
    return pd.DataFrame(
        {
            "head": names,
            "layer": layers.flatten(),
            "head_index": heads.flatten(),
            "exact": exact.restored.astype(np.float64).flatten(),
            "estimate": estimate.restored.astype(np.float64).flatten(),
            "label": [name if name in on_top else "" for name in names],
        }
    )
