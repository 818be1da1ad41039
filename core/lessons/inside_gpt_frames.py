"""Long DataFrames for the "Inside a GPT" charts, from core/lessons/inside_gpt*.py's results (pure pandas)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from core.charts.inside_gpt import DRAWN_STAGE, MODEL_STAGE
from core.lessons.inside_gpt import GeneratedToken, PromptAnalysis, SamplingView, TokenAcrossModel
from core.lessons.inside_gpt_cache import CacheTiming
from core.lessons.inside_gpt_induction import InductionLesson
from core.lessons.inside_gpt_rope import DISTANCES, STARTS, RopeLesson

OVERVIEW_BLOCKS = 8  # each head's map in the all-heads overview: at most 8 x 8 blocks of positions, whatever T


def labels(tokens: tuple[str, ...]) -> list[str]:
    """Unique, visible labels: the position first (a token may repeat; a newline must show)."""
    return [f"{i} {token!r}"[:18] for i, token in enumerate(tokens)]


def _labels_at(tokens: tuple[str, ...], positions: np.ndarray) -> pd.Categorical:
    """The labels at `positions` as a categorical: it reaches the browser as an Arrow dictionary column
    (each label sent once, a byte per cell), not one string per cell."""
    return pd.Categorical.from_codes(positions, categories=labels(tokens))


def block_edges(count: int, blocks: int = OVERVIEW_BLOCKS) -> np.ndarray:
    """Where each block of positions starts, and the end: (B + 1,) edges cutting 0..count into
    B = min(count, blocks) blocks whose sizes differ by one at most (64 tokens: eight blocks of 8)."""
    parts = min(count, blocks)
    return (np.arange(parts + 1) * count) // parts


def blocks_sentence(count: int) -> str:
    """How this prompt's positions fall into the overview's blocks, from `block_edges` itself: the page said
    "eight tokens a block for a 64-token prompt" beside a 13-token prompt (an independent review)."""
    sizes = np.diff(block_edges(count))
    smallest, largest = int(sizes.min()), int(sizes.max())
    if largest == 1:
        return f"This prompt's {count} tokens are {count} blocks of one token each: every weight is shown as it is."
    size = f"{largest}" if smallest == largest else f"{smallest} or {largest}"
    return f"This prompt's {count} tokens fall into {len(sizes)} blocks of {size} tokens each."


def block_shares(weights: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """weights (..., T, T) -> (..., B, B): for a block of queries and a block of keys, the weight each of
    those queries puts on those keys together, averaged over the queries. Each row of blocks sums to 1
    (as each row of weights does); a block wholly after its queries is 0 (the causal mask)."""
    starts, sizes = edges[:-1], np.diff(edges)
    by_key_block = np.add.reduceat(weights, starts, axis=-1)  # (..., T, B): each query's weight on each key block
    return np.add.reduceat(by_key_block, starts, axis=-2) / sizes[:, None]  # (..., B, B): mean over the queries


def overview_frame(analysis: PromptAnalysis) -> pd.DataFrame:
    """Every head as a small map of blocks, long, as core.charts.inside_gpt.heads_overview reads it: layer, head,
    query_block, key_block, share (block_shares, 3 decimals). Only the blocks the causal mask leaves open
    (key_block <= query_block): the chart draws the rest in the masked colour.

    Sent compactly: 30 x 9 x 36 rows at most (9,720) whatever the prompt's length, in bytes and float32. The
    heads' every weight was up to 1.1 million cells, 4.4 MB in one message at 64 tokens (issue 40)."""
    weights = analysis.attentions.astype(np.float32)  # (L, H, T, T)
    shares = block_shares(weights, block_edges(weights.shape[-1]))  # (L, H, B, B)
    layers, heads, query_blocks, key_blocks = (a.flatten().astype(np.uint8) for a in np.indices(shares.shape))
    frame = pd.DataFrame(
        {
            "layer": layers,
            "head": heads,
            "query_block": query_blocks,
            "key_block": key_blocks,
            "share": shares.flatten().round(3).astype(np.float32),
        }
    )
    return frame[frame["key_block"] <= frame["query_block"]].reset_index(drop=True)


def overview_heads_frame(analysis: PromptAnalysis, layer: int, head: int) -> pd.DataFrame:
    """One row a head (L x H): layer, head, sink, previous (the measures below the overview, 3 decimals), and
    chosen (the head the page has open): what the overview's click targets name and its outline marks."""
    frame = measure_frame(analysis.sink, layer, head).rename(columns={"value": "sink"})
    frame.insert(3, "previous", analysis.previous.astype(np.float64).flatten())
    return frame.astype({"layer": np.uint8, "head": np.uint8, "sink": np.float32, "previous": np.float32}).round(
        {"sink": 3, "previous": 3}
    )


def layer_frame(analysis: PromptAnalysis, layer: int) -> pd.DataFrame:
    """One layer's heads, every weight, long, as core.charts.heads.head_panels reads them: head, row, col
    (categorical labels), value (float32: the weights are float16), row_index, col_index (int16)."""
    weights = analysis.attentions[layer].astype(np.float32)  # (H, T, T)
    heads, rows, cols = (a.flatten() for a in np.indices(weights.shape, dtype=np.int16))  # (H * T * T,) each
    return pd.DataFrame(
        {
            "head": heads,
            "row": _labels_at(analysis.tokens, rows),
            "col": _labels_at(analysis.tokens, cols),
            "value": weights.flatten(),
            "row_index": rows,
            "col_index": cols,
        }
    )


def model_view_frame(view: TokenAcrossModel) -> pd.DataFrame:
    """One query's row in every head, long: layer, head ("head h"), key (label), key_index, value (float32)."""
    layers, heads, keys = (a.flatten() for a in np.indices(view.rows.shape, dtype=np.int16))  # (L * H * K,) each
    names = [f"head {h}" for h in range(view.rows.shape[1])]
    return pd.DataFrame(
        {
            "layer": layers,
            "head": pd.Categorical.from_codes(heads, categories=names),
            "key": _labels_at(view.tokens, keys),
            "key_index": keys,
            "value": view.rows.flatten(),
        }
    )


def head_frame(analysis: PromptAnalysis, layer: int, head: int) -> pd.DataFrame:
    """One head (T, T) as the heatmap's long frame: row = query, col = key (the future's cells are 0)."""
    weights = analysis.attentions[layer, head].astype(np.float64)  # (T, T)
    count = weights.shape[0]
    rows, cols = np.divmod(np.arange(count * count), count)  # row-major cells
    return pd.DataFrame(
        {
            "row": _labels_at(analysis.tokens, rows),
            "col": _labels_at(analysis.tokens, cols),
            "value": weights.flatten(),
            "row_index": rows,
            "col_index": cols,
        }
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


def group_frame(num_layers: int, num_heads: int, groups: tuple[int, ...], scores: np.ndarray | None) -> pd.DataFrame:
    """layer, head, group, value: each query head's key/value head, beside a measure (the induction score;
    None, before the induction question is answered: 1 for every head, and the chart draws no dots)."""
    shown = np.ones((num_layers, num_heads)) if scores is None else scores  # (L, H)
    frame = measure_frame(shown, -1, -1)
    frame["group"] = [f"KV head {groups[h]}" for h in frame["head"]]
    return frame


def probability_frame(view: SamplingView) -> pd.DataFrame:
    """token, stage, probability, rank: the model's top candidates, and what the settings leave to draw from."""
    rows = []
    for rank, candidate in enumerate(view.candidates):
        label = f"{rank + 1}. {candidate.token!r}"
        rows.append({"token": label, "stage": MODEL_STAGE, "probability": candidate.before, "rank": rank})
        rows.append({"token": label, "stage": DRAWN_STAGE, "probability": candidate.after, "rank": rank})
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
    """The top induction heads, the two scores the section's sentences read first (a phone showed the copying
    column only after a sideways scroll nothing hinted at: an independent review)."""
    group = lesson.num_heads // lesson.num_kv_heads
    return pd.DataFrame(
        {
            "layer": [t[0] for t in lesson.top],
            "head": [t[1] for t in lesson.top],
            "induction score": [t[2] for t in lesson.top],
            "copying (logits)": [float(lesson.copying[t[0], t[1]]) for t in lesson.top],
            "sink share": [float(lesson.sink[t[0], t[1]]) for t in lesson.top],
            "KV head": [t[1] // group for t in lesson.top],
        }
    )


ROTATED = "rotated (RoPE, this model)"
ADDED = "sinusoidal positions added"


PAIR_ROWS = ("q", "k", "q × k")  # the pair view's rows, top to bottom: the rotated query, key, and their products


def pair_frame(lesson: RopeLesson) -> pd.DataFrame:
    """The pair view in one frame, one row per cell (3 x d): row (PAIR_ROWS), order (its place, top first),
    label (the row's name on the chart), dimension, value, and scaled = value / the row's largest |value| (-1..1).

    Each row is coloured on its own scale: the products of a score near 20 reach about 6 where the vectors'
    numbers stay near 1, and on one scale the query and key were a flat band."""
    labels = (
        f"q of {lesson.query_token!r} at {lesson.i}",
        f"k of {lesson.key_token!r} at {lesson.j}",
        "q × k (sum: the score)",
    )
    rows = []
    vectors = [[float(v) for v in values] for values in (lesson.rotated_query, lesson.rotated_key, lesson.products)]
    for order, (row, label, numbers) in enumerate(zip(PAIR_ROWS, labels, vectors, strict=True)):
        largest = max(map(abs, numbers)) or 1.0  # a row of zeros stays at the scale's middle
        rows += [
            {"row": row, "order": order, "label": label, "dimension": n, "value": v, "scaled": v / largest}
            for n, v in enumerate(numbers)
        ]
    return pd.DataFrame(rows)


def rope_frame(lesson: RopeLesson) -> pd.DataFrame:
    """distance, score, positions, start: one row per point of the four curves (two ways x two starts)."""
    rows = []
    for way, curves in ((ROTATED, lesson.rope_curves), (ADDED, lesson.additive_curves)):
        for start, curve in zip(STARTS, curves, strict=True):
            for distance, score in zip(DISTANCES, curve, strict=True):
                rows.append({"distance": distance, "score": score, "positions": way, "start": f"key at {start}"})
    return pd.DataFrame(rows)
