"""Lesson 2: queries, keys and values from trainable matrices, for every weight source.

One lesson dataclass and one builder (`lesson_from_trace`) whatever the source: the sources' random draws
here (`trainable_lesson`), a model's head in core/lessons/pretrained.py (`pretrained_trainable_lesson`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd
import torch

from core import recipes
from core.app.registry import Control, LessonSpec
from core.app.settings import PresetKey, Settings, WeightLayout
from core.attention import functional as fn
from core.attention.modules import CrossAttention, SelfAttention_v1, SelfAttention_v2, draw_qkv_weights, v1_from_v2
from core.inputs.weights import Provenance
from core.lessons.common import (
    CPU,
    Prediction,
    clamp_index,
    dims,
    generator,
    inputs_on_device,
    inputs_source,
    matrix_frame,
    row_values,
    tokens_comment,
    unique_labels,
)

if TYPE_CHECKING:  # the model's modules load only where a model's head is used (memory)
    from core.inputs.pretrained_heads import HeadPattern


@dataclass(frozen=True)
class Versions:
    """The sources' SelfAttention_v1 against _v2 on the same input (random draws only)."""

    table: pd.DataFrame  # the outputs of SelfAttention_v1 and _v2, side by side
    copied_max_diff: float  # v1 given v2's weights: equal up to float error
    fresh_max_diff: float  # v1 and v2 with their own initialisations: different
    code: str  # the filled recipe core/recipes/trainable_v1_v2.py
    book_hint: str | None = None  # the book's input: how its printed v2 row relates to the row shown


@dataclass(frozen=True)
class TrainableLesson:
    """Lesson 2's steps for any weight source (core/inputs/weights.py): x through W_q, W_k, W_v to Z."""

    tokens: tuple[str, ...]
    query_index: int
    w_query: pd.DataFrame  # matrix_frames, drawn as (rows shown, d_out) whatever layout the source uses
    w_key: pd.DataFrame
    w_value: pd.DataFrame
    queries: pd.DataFrame  # (T, d_k)
    keys: pd.DataFrame  # (T, d_k)
    values: pd.DataFrame  # (T, d_v)
    scores: pd.DataFrame  # omega = Q K^T, (T, T)
    scaled_scores: pd.DataFrame  # omega * scale, (T, T)
    weights: pd.DataFrame  # softmax of the scaled scores, (T, T)
    context: pd.DataFrame  # weights @ V, (T, d_v)
    one_query: pd.DataFrame  # token, score, scaled score, weight for the chosen query
    d_in: int  # rows of each W (a model's 384 are more than a chart can show: see rows_shown)
    rows_shown: int  # rows of each W kept for its heatmap
    cols_shown: int  # ... and columns (a model's 64 output columns drew as noise beside 12 rows)
    d_k: int
    d_v: int
    scale: float
    query_vector: tuple[float, ...]
    query_context: tuple[float, ...]
    prediction: Prediction  # how many different keys win a row (lesson 1 asked which key one row picks)
    code: str  # the filled recipe (core/recipes/trainable_weights*.py, pretrained_head.py)
    versions: Versions | None = None  # random draws: the sources' SelfAttention_v1 vs _v2
    pattern: HeadPattern | None = None  # a model's head: what it was measured to do on this sentence
    provenance: Provenance | None = None  # a model's head: which model, layer and head
    causal: bool = False  # the head runs behind the causal mask (a decoder's): its future cells are drawn masked

    def query_row(self) -> pd.DataFrame:
        """The chosen query's q, the queries' heatmap frame cut to its row (1 x d_k cells): a model's 64 numbers
        are drawn as a strip, where a line of text was a wall of digits (an independent review)."""
        return self.queries[self.queries["row_index"] == self.query_index]

    def context_row(self) -> pd.DataFrame:
        """The chosen query's context vector z, cut the same way from the context's frame (1 x d_v cells)."""
        return self.context[self.context["row_index"] == self.query_index]


def favourite_keys_question(
    tokens: tuple[str, ...], weights: torch.Tensor, *, head: HeadPattern | None = None, dominant_key: int | None = None
) -> Prediction:
    """'Across all rows, how many different keys take a row's largest weight?', answered by `weights` (T, T).

    Lesson 1 asked which key one query picks; its answer (often the query itself, through x·x) would repeat
    here. Counting every row's favourite asks what W_q and W_k change: random ones have learned no reason to
    send different queries to different keys, a trained head has (`head`: its measured pattern, for the text).
    `dominant_key`: the key at least as large as every other key in each coordinate, when every query has no
    negative number (`dominant_key_of`): such a key wins every row, whatever the query.
    """
    num_tokens = len(tokens)
    favourites = [int(i) for i in weights.argmax(dim=-1)]  # (T,): each query's strongest key
    distinct = len(set(favourites))
    one = "One: every row gives its largest weight to the same token"
    bins: tuple[tuple[int, int], ...]
    labels: tuple[str, ...]
    if num_tokens >= 4:
        half = num_tokens // 2
        bins = ((1, 1), (2, half), (half + 1, num_tokens))  # (lowest, highest) count of different favourites
        labels = (
            one,
            (f"{half}" if half == 2 else f"2 to {half}") + ": a few tokens are the favourite of many rows",
            # Not "most rows have a favourite of their own": 5 favourites over 8 rows can leave 3 rows on one
            # token, as the encoder's layer 4 head 9 does (a review read the reveal against its own option). Nor
            # "the favourites are spread over many tokens", read as the weight spread where a head that looks at
            # itself puts 0.83 of each row on one token (the s29c review).
            f"{half + 1} to {num_tokens}: many different tokens are favourites",
        )
    else:  # too few rows for three ranges
        bins = ((1, 1), (2, max(num_tokens, 2)))
        labels = (one, "More than one: the rows have different favourites")
    answer = next(i for i, (low, high) in enumerate(bins) if low <= distinct <= high)
    where = f"In layer {head.layer}, head {head.head}, each" if head is not None else "Each"
    rows = f"{num_tokens} row" + ("s" if num_tokens != 1 else "")
    question = (
        f"{where} of the {rows} of weights gives its largest weight to one token, its favourite key. "
        f"How many different favourites will the {rows} have?"
    )
    counts = sorted({f: favourites.count(f) for f in favourites}.items(), key=lambda kv: (-kv[1], kv[0]))
    listed = ", ".join(f"“{tokens[f]}” ({n} row{'s' if n > 1 else ''})" for f, n in counts)
    if head is not None:
        why = f"This head, measured on this sentence, {head.summary}."
    elif distinct == 1 and dominant_key is not None:
        # The s22 reviews: "nothing has taught them" did not say why every seed of the book's settings gives one
        # favourite, and "all positive" alone does not make one (seed 13 gives two). A dominating key does.
        spread = float((weights.max(dim=0).values - weights.min(dim=0).values).max())  # widest gap down a column
        why = (
            f"Every query here has no negative number, and the key of “{tokens[dominant_key]}” is at least as large "
            "as every other key in each of its numbers: against such a query it scores highest whatever the "
            f"query, so every row picks it. No two rows differ by more than {spread:.4f} in any weight. Another "
            "seed or d_out need not give such a key; a trained head's queries point different ways (the sidebar's "
            "Weights)."
        )
    elif distinct == 1:
        spread = float((weights.max(dim=0).values - weights.min(dim=0).values).max())  # widest gap down a column
        why = (
            "W_q and W_k are random: nothing has taught them to send different queries to different keys, and "
            f"here one key scores highest against every query. No two rows differ by more than {spread:.4f} "
            "in any weight. Switch the sidebar's Weights to a trained head and count again."
        )
    else:
        why = (
            "W_q and W_k are random, not trained, yet here they already send some queries to different keys: "
            "the projections mix each embedding's numbers differently for queries and for keys."
        )
    return Prediction(
        question=question,
        options=labels,
        answer=answer,
        explanation=(
            f"One favourite for all {rows}: “{tokens[favourites[0]]}”. {why}"
            if distinct == 1
            else f"{distinct} different favourites: {listed}. {why}"
        ),
        shuffle=False,  # one to all: the order of the counts
    )


def dominant_key_of(queries: torch.Tensor, keys: torch.Tensor) -> int | None:
    """The key that wins every row whatever the query: at least as large as every other key in each coordinate,
    with no query holding a negative number (then q·k_j ≥ q·k_i for every query q). None if there is none.
    queries (T, d), keys (T, d)."""
    if bool((queries < 0).any()):
        return None
    dominates = (keys.unsqueeze(1) >= keys.unsqueeze(0)).all(dim=-1).all(dim=-1)  # (T,): key j ≥ every key i
    found = torch.nonzero(dominates).flatten().tolist()
    return int(found[0]) if found else None


def lesson_from_trace(
    tokens: tuple[str, ...],
    trace: fn.AttentionTrace,
    matrices: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    query_index: int,
    *,
    prediction: Prediction,
    code: str,
    rows_shown: int | None = None,
    cols_shown: int | None = None,
    versions: Versions | None = None,
    pattern: HeadPattern | None = None,
    provenance: Provenance | None = None,
    causal: bool = False,
) -> TrainableLesson:
    """The lesson's tables from one head's trace and its W_q, W_k, W_v (each (d_in, d_out)), whatever the
    source; the source adds its question, its Code box and its own sections (v1 vs v2, or the head's pattern)."""
    w_q, w_k, w_v = matrices
    d_in = w_q.shape[0]
    shown = d_in if rows_shown is None else min(rows_shown, d_in)
    shown_cols = w_q.shape[1] if cols_shown is None else min(cols_shown, w_q.shape[1])
    d_k, d_v = trace.keys.shape[-1], trace.values.shape[-1]

    def weight_frame(w: torch.Tensor) -> pd.DataFrame:
        corner = w[:shown, :shown_cols]  # (rows shown, columns shown)
        return matrix_frame(corner, dims("in", corner.shape[0]), dims("out", corner.shape[1]))

    return TrainableLesson(
        tokens=tokens,
        query_index=query_index,
        w_query=weight_frame(w_q),
        w_key=weight_frame(w_k),
        w_value=weight_frame(w_v),
        queries=matrix_frame(trace.queries, tokens, dims("q", d_k)),
        keys=matrix_frame(trace.keys, tokens, dims("k", d_k)),
        values=matrix_frame(trace.values, tokens, dims("v", d_v)),
        scores=matrix_frame(trace.scores, tokens, tokens),
        scaled_scores=matrix_frame(trace.scaled_scores, tokens, tokens),
        weights=matrix_frame(trace.weights, tokens, tokens),
        context=matrix_frame(trace.context, tokens, dims("z", d_v)),
        one_query=pd.DataFrame(
            {
                "token": tokens,
                "score": trace.scores[query_index].cpu().numpy(),
                "scaled score": trace.scaled_scores[query_index].cpu().numpy(),
                "weight": trace.weights[query_index].cpu().numpy(),
            }
        ),
        causal=causal,
        d_in=d_in,
        rows_shown=shown,
        cols_shown=shown_cols,
        d_k=d_k,
        d_v=d_v,
        scale=float(trace.scale),
        query_vector=row_values(trace.queries, query_index),
        query_context=row_values(trace.context, query_index),
        prediction=prediction,
        code=code,
        versions=versions,
        pattern=pattern,
        provenance=provenance,
    )


def _projected(
    settings: Settings, x: torch.Tensor
) -> tuple[fn.AttentionTrace, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Queries/keys/values with the preset's weight layout, traced; W_q, W_k, W_v as (d_in, d_out)."""
    g = generator(settings.seed, CPU)
    scheme = settings.preset_info.weights
    d_in = x.shape[-1]
    if scheme == WeightLayout.RANDN_X_AT_W:  # the attention notebook: torch.randn weights, x @ W
        w_q, w_k, w_v = (
            w.to(x.device) for w in draw_qkv_weights(d_in, settings.d_out, distribution="randn", generator=g)
        )
        trace = fn.scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v, scale=settings.scale_factor)
        return trace, (w_q, w_k, w_v)
    if scheme == WeightLayout.RAND_W_AT_X:  # the self-attention article: (d_out, d_in) weights, d_v = d_k + 4
        module = CrossAttention(d_in, settings.d_out, settings.d_out + 4, generator=g).to(x.device)
        trace = module.trace(x, x, scale=settings.scale_factor)
        return trace, (module.W_query.T, module.W_key.T, module.W_value.T)
    v1 = SelfAttention_v1(d_in, settings.d_out, generator=g).to(x.device)  # the book: torch.rand, x @ W
    trace = v1.trace(x, scale=settings.scale_factor)
    return trace, (v1.W_query, v1.W_key, v1.W_value)


def _versions(settings: Settings, x: torch.Tensor, tokens: tuple[str, ...]) -> Versions:
    v2 = SelfAttention_v2(x.shape[-1], settings.d_out, generator=generator(settings.seed, CPU)).to(x.device)
    v1_fresh = SelfAttention_v1(x.shape[-1], settings.d_out, generator=generator(settings.seed, CPU)).to(x.device)
    v1_copied = v1_from_v2(v2).to(x.device)
    v2_out, v1_out, copied_out = v2(x).cpu(), v1_fresh(x).cpu(), v1_copied(x).cpu()  # each (T, d_out)
    width = v2_out.shape[1]
    table = pd.DataFrame(
        {
            "token": tokens,
            **{f"v1 (own init) z{j + 1}": v1_out[:, j].numpy() for j in range(width)},
            **{f"v2 z{j + 1}": v2_out[:, j].numpy() for j in range(width)},
            **{f"v1 with v2's weights z{j + 1}": copied_out[:, j].numpy() for j in range(width)},
        }
    )
    code = recipes.fill(
        "trainable_v1_v2",
        {
            "tokens": tokens_comment(settings),
            "inputs": inputs_source(settings),
            "seed": settings.seed,
            "d_out": settings.d_out,
        },
    )
    return Versions(
        table,
        float((copied_out - v2_out).abs().max()),
        float((v1_out - v2_out).abs().max()),
        code,
        book_v2_hint(settings, tuple(float(v) for v in v2_out[0])),
    )


# The book prints SelfAttention_v2's output for seed 789 at d_out = 2; its row 1 (tests/unit/test_golden_sources.py).
BOOK_V2_SEED = 789
BOOK_V2_D_OUT = 2
BOOK_V2_ROW = (-0.0739, 0.0713)


def book_v2_hint(settings: Settings, v2_first_row: tuple[float, ...]) -> str | None:
    """What the book's printed v2 row means at these settings; None away from the book's input.

    The hint is only offered when it is not already true: at the book's own seed and width the row
    shown is compared with the printed one (to its four printed decimals) instead.
    """
    if settings.preset != PresetKey.BOOK:
        return None
    printed = "[" + ", ".join(f"{v:.4f}" for v in BOOK_V2_ROW) + "]"
    if settings.d_out != BOOK_V2_D_OUT:
        return (
            f"The book builds v2 with d_out = {BOOK_V2_D_OUT} and seed {BOOK_V2_SEED}: set both to see its "
            f"row 1, {printed}."
        )
    if settings.seed != BOOK_V2_SEED:
        seed = BOOK_V2_SEED
        return f"The book builds v2 with seed {seed}: set the seed to {seed} to see its row 1, {printed}."
    shown = "[" + ", ".join(f"{v:.4f}" for v in v2_first_row) + "]"
    if shown == printed:
        return f"This is the book's seed and width: v2's row 1 here, {shown}, is the row the book prints."
    return f"At the book's seed and width v2's row 1 here is {shown}; the book prints {printed}."


def _code(settings: Settings, query_index: int) -> str:
    values = {
        "tokens": tokens_comment(settings),
        "inputs": inputs_source(settings),
        "seed": settings.seed,
        "d_out": settings.d_out,
        "scale_scores": settings.scale,
        "query": query_index,
    }
    if settings.preset_info.weights == WeightLayout.RAND_W_AT_X:
        return recipes.fill("trainable_weights_article", values)
    draw = "torch.randn" if settings.preset_info.weights == WeightLayout.RANDN_X_AT_W else "torch.rand"
    return recipes.fill("trainable_weights", {**values, "draw": recipes.Code(draw)})


def trainable_lesson(settings: Settings, query_index: int) -> TrainableLesson:
    """Lesson 2 on the sources' random draws (their worked examples, digit for digit)."""
    example, x, _ = inputs_on_device(settings)  # x: (T, d_in)
    tokens = unique_labels(example.tokens)
    query_index = clamp_index(query_index, len(tokens))
    with torch.no_grad():
        trace, matrices = _projected(settings, x)
        versions = _versions(settings, x, tokens)
    return lesson_from_trace(
        tokens,
        trace,
        matrices,
        query_index,
        prediction=favourite_keys_question(
            tokens, trace.weights, dominant_key=dominant_key_of(trace.queries, trace.keys)
        ),
        code=_code(settings, query_index),
        versions=versions,
    )


# The cached computation the page calls (ui/cache.py `computed`); keyed on the settings it reads.
LESSON = LessonSpec(
    trainable_lesson,
    uses=frozenset({Control.D_OUT, Control.SEED, Control.SCALE, Control.DEVICE}),
    max_entries=24,
)
