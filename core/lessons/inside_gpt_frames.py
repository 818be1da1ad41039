"""Long DataFrames for the "Inside a GPT" charts, from core/lessons/inside_gpt.py's results (pure pandas)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from core.lessons.inside_gpt import (
    DISTANCES,
    STARTS,
    CacheTiming,
    GeneratedToken,
    InductionLesson,
    PromptAnalysis,
    RopeLesson,
    SamplingView,
)

GRID_FLOOR = 0.02  # grid cells under this look like 0 on a 0..1 scale: dropped to keep 270 panels light


def labels(tokens: tuple[str, ...]) -> list[str]:
    """Unique, visible labels: the position first (a token may repeat; a newline must show)."""
    return [f"{i} {token!r}"[:18] for i, token in enumerate(tokens)]


def grid_frame(analysis: PromptAnalysis, layer: int, head: int) -> pd.DataFrame:
    """Every head's weights, long, as core.charts.real_model.grid reads them (cells under the floor dropped)."""
    weights = analysis.attentions.astype(np.float32)  # (L, H, T, T)
    layers, heads, queries, keys = np.nonzero(weights >= GRID_FLOOR)
    names = pd.Categorical.from_codes(np.arange(len(analysis.tokens)), categories=labels(analysis.tokens))
    return pd.DataFrame(
        {
            "layer": layers,
            "head": heads,
            "query_index": queries,
            "key_index": keys,
            "query": names[queries],
            "key": names[keys],
            "weight": weights[layers, heads, queries, keys].round(4),
            "chosen": (layers == layer) & (heads == head),
        }
    )


def head_frame(analysis: PromptAnalysis, layer: int, head: int) -> pd.DataFrame:
    """One head (T, T) as the heatmap's long frame: row = query, col = key (the future's cells are 0)."""
    weights = analysis.attentions[layer, head].astype(np.float64)  # (T, T)
    count = weights.shape[0]
    rows, cols = np.divmod(np.arange(count * count), count)  # row-major cells
    names = np.array(labels(analysis.tokens), dtype=object)
    return pd.DataFrame(
        {"row": names[rows], "col": names[cols], "value": weights.flatten(), "row_index": rows, "col_index": cols}
    )


def measure_frame(values: np.ndarray, layer: int, head: int) -> pd.DataFrame:
    """An (L, H) measure as core.charts.real_model.measure reads it: layer, head, value, chosen."""
    layers, heads = np.meshgrid(np.arange(values.shape[0]), np.arange(values.shape[1]), indexing="ij")
    return pd.DataFrame(
        {
            "layer": layers.flatten(),
            "head": heads.flatten(),
            "value": values.astype(np.float64).flatten(),
            "chosen": ((layers == layer) & (heads == head)).flatten(),
        }
    )


def group_frame(
    num_layers: int, num_heads: int, groups: tuple[int, ...], scores: np.ndarray | None
) -> pd.DataFrame:
    """layer, head, group, value: each query head's key/value head, beside a measure (the induction score;
    None, before the induction question is answered: 1 for every head, so nothing fades)."""
    shown = np.ones((num_layers, num_heads)) if scores is None else scores  # (L, H)
    frame = measure_frame(shown, -1, -1)
    frame["group"] = [f"KV head {groups[h]}" for h in frame["head"]]
    return frame


def probability_frame(view: SamplingView) -> pd.DataFrame:
    """token, stage, probability, rank: the top candidates before and after the filters."""
    rows = []
    for rank, candidate in enumerate(view.candidates):
        label = f"{rank + 1}. {candidate.token!r}"
        rows.append({"token": label, "stage": "before the filters", "probability": candidate.before, "rank": rank})
        rows.append({"token": label, "stage": "after the filters", "probability": candidate.after, "rank": rank})
    return pd.DataFrame(rows)


def row_frame(step: GeneratedToken, tokens: tuple[str, ...], layer: int, head: int) -> pd.DataFrame:
    """token, position, weight: the attention row (one head) of the position that predicted `step`."""
    weights = step.row[layer, head].astype(np.float64)  # (tokens so far,)
    return pd.DataFrame(
        {"token": labels(tokens[: len(weights)]), "position": np.arange(len(weights)), "weight": weights}
    )


def timing_frame(timing: CacheTiming) -> pd.DataFrame:
    """length, run, ms: time per generated token with and without the cache."""
    with_cache = pd.DataFrame({"length": timing.lengths, "run": "with the KV cache", "ms": timing.with_cache_ms})
    without = pd.DataFrame(
        {"length": timing.lengths, "run": "without (whole sequence again)", "ms": timing.without_cache_ms}
    )
    return pd.concat((with_cache, without), ignore_index=True)


def top_heads_frame(lesson: InductionLesson) -> pd.DataFrame:
    group = lesson.num_heads // lesson.num_kv_heads
    return pd.DataFrame(
        {
            "layer": [t[0] for t in lesson.top],
            "head": [t[1] for t in lesson.top],
            "KV head": [t[1] // group for t in lesson.top],
            "induction score": [t[2] for t in lesson.top],
            "sink share": [float(lesson.sink[t[0], t[1]]) for t in lesson.top],
        }
    )


ROTATED = "rotated (RoPE, this model)"
ADDED = "sinusoidal positions added"


def rope_frame(lesson: RopeLesson) -> pd.DataFrame:
    """distance, score, positions, start: one row per point of the four curves (two ways x two starts)."""
    rows = []
    for way, curves in ((ROTATED, lesson.rope_curves), (ADDED, lesson.additive_curves)):
        for start, curve in zip(STARTS, curves, strict=True):
            for distance, score in zip(DISTANCES, curve, strict=True):
                rows.append({"distance": distance, "score": score, "positions": way, "start": f"key at {start}"})
    return pd.DataFrame(rows)
