"""Lesson 5: several heads side by side, built two ways (a wrapper of heads, one split matrix), for every weight
source.

One lesson dataclass and one builder (`lesson_from_heads`, from a layer's (h, T, T) weights and its output both
ways) whatever the source: the sources' random draws here (`multihead_lesson`), a model's layer in
core/lessons/pretrained.py (`pretrained_multihead_lesson`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd
import torch

from core import recipes
from core.app.registry import Control, LessonSpec
from core.app.settings import Settings, effective_d_in
from core.attention.modules import (
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    count_parameters,
    multihead_from_wrapper,
    multihead_parameter_count,
)
from core.lessons.common import (
    CPU,
    Prediction,
    dims,
    generator,
    inputs_on_device,
    inputs_source,
    matrix_frame,
    tokens_comment,
    unique_labels,
)

if TYPE_CHECKING:  # the model's modules load only where a model's layer is used (memory)
    from core.inputs.pretrained_heads import HeadPattern


@dataclass(frozen=True)
class ShapeStep:
    code: str
    what: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class BookLayer:
    """Random draws: the book's layer as one split matrix, its output and its size."""

    wrapper_width: int  # the wrapper concatenates heads of width d_out / h
    params: int  # parameters of this layer
    shape_steps: tuple[ShapeStep, ...]
    output: pd.DataFrame  # after out_proj, (T, d_out)


@dataclass(frozen=True)
class TrainedLayer:
    """A model's layer: what each trained head was measured to do, and the split form beside the model's pass."""

    layer: int
    patterns: tuple[HeadPattern, ...]  # one per head, in head order
    patterns_table: pd.DataFrame  # head, pattern, entropy, previous, next, [CLS]+[SEP], self
    split_vs_model: float  # max |split form - the model's forward pass| of the layer's output (T, D)
    largest_output: float  # max |the model's output|: what split_vs_model is measured against
    shapes: tuple[tuple[str, tuple[int, ...]], ...]  # (step, shape) of the split form
    d_model: int
    kv_heads: int  # key/value heads: as many as query heads in the encoder, 3 shared by 9 in the decoder

    @property
    def distinct_patterns(self) -> int:
        """How many different summaries the layer's heads have."""
        return len({p.summary.split(" (")[0] for p in self.patterns})


@dataclass(frozen=True)
class MultiHeadLesson:
    """Lesson 5 for every weight source; a source's own sections are None where it has none."""

    tokens: tuple[str, ...]
    num_heads: int  # random draws: the sidebar's count, or the most heads below it that split d_out
    head_dim: int  # d_out / num_heads: the heads split one projection
    head_weights: pd.DataFrame  # head, row, col, value, row_index, col_index: (h, T, T) in one long table
    wrapper_vs_split: float  # max |wrapper - one split matrix| of the layer's output, with the same weights
    causal: bool  # the heads run behind the causal mask (the book's layer; a decoder's)
    prediction: Prediction | None  # whether the heads look different (None: one head, no pair to compare)
    code: str  # the filled recipe: core/recipes/multi_head.py (pretrained_multi_head.py, decoder_multi_head.py)
    heads_note: str | None = None  # random draws: why the heads shown differ from the sidebar's count
    book: BookLayer | None = None  # random draws
    article: ArticleHeads | None = None  # random draws: the same input through the article's full-width heads
    trained: TrainedLayer | None = None  # a model's layer


def heads_frame(weights: torch.Tensor, tokens: tuple[str, ...], names: Sequence[int | str]) -> pd.DataFrame:
    """weights (h, T, T) -> one long table, a matrix_frame per head with its name in a first "head" column."""
    frames = []
    for name, head in zip(names, weights, strict=True):  # head: (T, T)
        frame = matrix_frame(head, tokens, tokens)
        frame.insert(0, "head", name)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def lesson_from_heads(
    tokens: tuple[str, ...],
    weights: torch.Tensor,
    names: Sequence[int | str],
    wrapper: torch.Tensor,
    split: torch.Tensor,
    *,
    head_dim: int,
    causal: bool,
    prediction: Prediction | None,
    code: str,
    heads_note: str | None = None,
    book: BookLayer | None = None,
    article: ArticleHeads | None = None,
    trained: TrainedLayer | None = None,
) -> MultiHeadLesson:
    """The lesson from a layer's heads, whatever the source. weights: (h, T, T); wrapper, split: the layer's output
    built both ways, the same shape ((1, T, D) or (T, D))."""
    return MultiHeadLesson(
        tokens=tokens,
        num_heads=int(weights.shape[0]),
        head_dim=head_dim,
        head_weights=heads_frame(weights, tokens, names),
        wrapper_vs_split=float((wrapper - split).abs().max()),
        causal=causal,
        prediction=prediction,
        code=code,
        heads_note=heads_note,
        book=book,
        article=article,
        trained=trained,
    )


@dataclass(frozen=True)
class ArticleHeads:
    """The self-attention article's multi-head example: full-width heads in one 3-D weight tensor.

    h = num_heads; d_q = d_k = d_out (every head full width); d_v = d_out + 4 (the article's 24 and 28).
    """

    num_heads: int
    d_k: int
    d_v: int
    query_index: int  # the article follows x^(2), index 1
    shape_steps: tuple[ShapeStep, ...]  # the article's calls and their shapes
    weights: pd.DataFrame  # (h, T): each head's weights for the query token, one row per head
    context: pd.DataFrame  # (h, d_v): each head's context vector for the query token
    params: int  # h * (d_k + d_k + d_v) * d: three times the weights of one head for three heads
    code: str  # the filled recipe core/recipes/multi_head_article.py
    apart: float  # the most different pair of these heads: mean |difference| per weight of the query's row
    book_apart: float  # the same for the book's split heads (lesson.head_weights) on the same query's row
    book_heads: int  # how many heads the book's split has (d_out's divisor nearest the sidebar's heads)


@dataclass(frozen=True)
class ParameterCounts:
    """One GPT-2-small-sized layer (768 -> 768, 12 heads), by formula."""

    without_qkv_bias: int  # the book's MultiHeadAttention (qkv_bias=False)
    with_qkv_bias: int  # GPT-2 itself has biases on the query, key and value projections


@dataclass(frozen=True)
class LayerParameters:
    """The parameter counts the page shows: this layer's and a GPT-2-sized one's, with their recipe."""

    this_layer: int  # d_in, d_out from the sidebar (no q/k/v bias, out_proj with bias)
    gpt2: ParameterCounts
    code: str  # the filled recipe core/recipes/multi_head_params.py


def gpt2_parameter_counts() -> ParameterCounts:
    return ParameterCounts(
        without_qkv_bias=multihead_parameter_count(768, 768, qkv_bias=False),
        with_qkv_bias=multihead_parameter_count(768, 768, qkv_bias=True),
    )


HEADS_DIFFER = 0.03  # mean |difference| per weight between the two most different heads: "clearly different"
HEADS_ALIKE = 0.01  # below this they look the same on the heatmaps
HEAD_OPTIONS = (
    "Yes: the heads already differ clearly",
    "A little: they differ slightly",
    "No: they look almost the same",
)


def heads_apart(weights: torch.Tensor) -> float:
    """weights (h, T, T) -> the mean |difference| per weight of the most different pair of heads."""
    heads = weights.shape[0]
    pairs = [(i, j) for i in range(heads) for j in range(i + 1, heads)]
    return max((float((weights[i] - weights[j]).abs().mean()) for i, j in pairs), default=0.0)


def _heads_question(weights: torch.Tensor) -> Prediction | None:
    """weights: (h, T, T) of untrained heads; the answer is read off these heads, not assumed. None for one head:
    "will the heads look different?" had no pair to compare, and was graded on "the most different pair ... 0.0000"
    (the s28 review, at ?num_heads=1)."""
    if weights.shape[0] < 2:
        return None
    num_tokens = weights.shape[-1]
    apart = heads_apart(weights)
    peak = float(weights[:, -1].max(dim=-1).values.mean())  # the last row sees every token
    answer = 0 if apart >= HEADS_DIFFER else (1 if apart >= HEADS_ALIKE else 2)
    why = (
        "Nothing has told any head what to look for: where they differ, they differ by chance, because random "
        "projections of these embeddings give scores far enough apart."
        if answer < 2
        else "Random projections of these small embeddings give small, similar scores, so every softmax stays "
        "near the plain causal average."
    )
    return Prediction(
        question="These heads start from random weights. Will they already look different from one another?",
        options=HEAD_OPTIONS,
        answer=answer,
        explanation=(
            f"The most different pair of heads differs by {apart:.4f} per weight on average, over all "
            f"{num_tokens} × {num_tokens} cells with the masked zeros (we call at least {HEADS_DIFFER} clear, below "
            f"{HEADS_ALIKE} the same), and the last row's largest weight, averaged over the heads, is {peak:.4f} "
            f"where spreading evenly would give {1 / num_tokens:.4f}. {why} Heads specialise only by training "
            "(lesson 8); see what trained heads do in lesson 6."
        ),
    )


def parameter_counts(settings: Settings) -> LayerParameters:
    """By formula; the recipe counts the tensors of real nn.Linear layers instead."""
    d_in = effective_d_in(settings)
    return LayerParameters(
        this_layer=multihead_parameter_count(d_in, settings.d_out),
        gpt2=gpt2_parameter_counts(),
        code=recipes.fill(
            "multi_head_params",
            {"d_in": d_in, "d_out": settings.d_out, "num_heads": heads_that_split(settings.d_out, settings.num_heads)},
        ),
    )


def _shape_steps(num_tokens: int, d_in: int, d_out: int, heads: int) -> tuple[ShapeStep, ...]:
    b, head_dim = 1, d_out // heads
    return (
        ShapeStep("x", "input batch", (b, num_tokens, d_in)),
        ShapeStep("queries = W_query(x)", "one projection for all heads", (b, num_tokens, d_out)),
        ShapeStep("queries.view(b, T, h, hd)", "split the width into heads", (b, num_tokens, heads, head_dim)),
        ShapeStep("queries.transpose(1, 2)", "heads become a batch axis", (b, heads, num_tokens, head_dim)),
        ShapeStep("queries @ keys.transpose(2, 3)", "scores per head", (b, heads, num_tokens, num_tokens)),
        ShapeStep("attn_weights @ values", "context per head", (b, heads, num_tokens, head_dim)),
        ShapeStep("context.transpose(1, 2)", "tokens first again", (b, num_tokens, heads, head_dim)),
        ShapeStep(".contiguous().view(b, T, d_out)", "heads side by side", (b, num_tokens, d_out)),
        ShapeStep("out_proj(context)", "mix the heads", (b, num_tokens, d_out)),
    )


def article_heads(
    settings: Settings, x: torch.Tensor, tokens: tuple[str, ...], book_weights: torch.Tensor
) -> ArticleHeads:
    """The article's way: torch.rand(h, d_q, d) weights, `repeat`, `bmm`, `permute`. x: (T, d).

    book_weights: the book's split heads (h, T, T) on the same input, compared on the same query's row."""
    heads, d_k = settings.num_heads, settings.d_out
    d_v = d_k + 4
    num_tokens, d = x.shape
    query_index = min(settings.preset_info.query_index, num_tokens - 1)
    g = generator(settings.seed, CPU)
    w_query = torch.rand(heads, d_k, d, generator=g).to(x.device)  # (h, d_q, d)
    w_key = torch.rand(heads, d_k, d, generator=g).to(x.device)  # (h, d_k, d)
    w_value = torch.rand(heads, d_v, d, generator=g).to(x.device)  # (h, d_v, d)
    query = w_query.matmul(x[query_index])  # (h, d_q, d) @ (d,) -> (h, d_q)
    stacked = x.T.repeat(heads, 1, 1)  # (T, d) -> (d, T) -> (h, d, T)
    keys = torch.bmm(w_key, stacked)  # (h, d_k, T)
    values = torch.bmm(w_value, stacked)  # (h, d_v, T)
    keys_rows, values_rows = keys.permute(0, 2, 1), values.permute(0, 2, 1)  # (h, T, d_k), (h, T, d_v)
    scores = torch.bmm(keys_rows, query.unsqueeze(-1)).squeeze(-1)  # (h, T, d_k) @ (h, d_k, 1) -> (h, T)
    scale = d_k**-0.5 if settings.scale else 1.0
    weights = torch.softmax(scores * scale, dim=-1)  # (h, T)
    context = torch.bmm(weights.unsqueeze(1), values_rows).squeeze(1)  # (h, 1, T) @ (h, T, d_v) -> (h, d_v)
    steps = (
        ShapeStep("W_query.matmul(x_2)", "the query token, once per head", tuple(query.shape)),
        ShapeStep("inputs.T.repeat(h, 1, 1)", "the sentence, once per head", tuple(stacked.shape)),
        ShapeStep("torch.bmm(W_key, stacked_inputs)", "keys of every head", tuple(keys.shape)),
        ShapeStep("torch.bmm(W_value, stacked_inputs)", "values of every head", tuple(values.shape)),
        ShapeStep("keys.permute(0, 2, 1)", "one token per row again", tuple(keys_rows.shape)),
        ShapeStep("values.permute(0, 2, 1)", "one token per row again", tuple(values_rows.shape)),
        ShapeStep("softmax(keys @ query / √d_k)", "weights of the query, per head", tuple(weights.shape)),
        ShapeStep("weights @ values", "its context vector, per head", tuple(context.shape)),
    )
    head_names = [f"head {h + 1}" for h in range(heads)]
    code = recipes.fill(
        "multi_head_article",
        {
            "tokens": tokens_comment(settings),
            "inputs": inputs_source(settings),
            "seed": settings.seed,
            "num_heads": heads,
            "d_k": d_k,
            "d_v": d_v,
            "query": query_index,
            "scale_scores": settings.scale,
        },
    )
    return ArticleHeads(
        num_heads=heads,
        d_k=d_k,
        d_v=d_v,
        query_index=query_index,
        shape_steps=steps,
        weights=matrix_frame(weights, head_names, tokens),
        context=matrix_frame(context, head_names, dims("z", d_v)),
        params=heads * (2 * d_k + d_v) * d,
        code=code,
        apart=heads_apart(weights.unsqueeze(1)),  # (h, T) -> (h, 1, T): the query's row of every head
        book_apart=heads_apart(book_weights[:, query_index : query_index + 1]),  # (h, 1, T)
        book_heads=int(book_weights.shape[0]),
    )


def article_comparison(article: ArticleHeads, book_head_dim: int) -> str:
    """How far apart the article's heads are against the book's, with the direction read from the numbers.

    The two setups differ in width and in how the weights are drawn; the sentence lists both without naming
    either as the cause (at ?scale=false&d_out=8 the article's heads differed less, 0.0084 against 0.0293, and a
    fixed "because" sentence read as the reason they differed more).
    """
    if article.num_heads < 2 or article.book_heads < 2:  # 0.0000 against 0.0000 read as "more than" (s28 review)
        if article.num_heads < 2 and article.book_heads < 2:
            which = "Both designs have one head here"
        elif article.num_heads < 2:
            which = "The article's design has one head here"
        else:
            which = "The book's split above has one head here"
        return f"{which}, so there is no pair of heads to compare. Choose 2 or more heads in the sidebar."
    ratio = article.apart / article.book_apart if article.book_apart > 0 else float("inf")
    direction = "more than" if ratio > 1.1 else "less than" if ratio < 1 / 1.1 else "about as much as"
    keys = int(article.weights["col_index"].nunique())  # the article's heads see every key of the row
    seen = article.query_index + 1  # the book's causal heads: the query's row sees itself and the keys before it
    return (
        f"For this query token the two most different of these heads differ by **{article.apart:.4f}** per "
        f"weight on average; the book's split heads above, on the same row, by **{article.book_apart:.4f}**: here "
        f"the article's heads differ {direction} the book's. The two setups differ in three ways at once, so this "
        f"comparison cannot say which one matters: these heads spread the row over all {keys} keys, the book's "
        f"causal heads over the first {seen} (the rest are masked zeros); these score with d_k = {article.d_k} "
        f"numbers each, drawn by `torch.rand` (from 0 to 1), the book's with {book_head_dim}, drawn by `nn.Linear` "
        "(small, centred at zero)."
    )


def heads_that_split(d_out: int, wanted: int) -> int:
    """The most heads, at most `wanted`, that split d_out into equal widths (1 always does)."""
    return max(h for h in range(1, max(1, min(wanted, d_out)) + 1) if d_out % h == 0)


def heads_note(d_out: int, wanted: int) -> str | None:
    """Why the lesson shows fewer heads than the sidebar asks for, in plain words; None when it does not."""
    heads = heads_that_split(d_out, wanted)
    if heads == wanted:
        return None
    fits = ", ".join(str(h) for h in range(1, min(d_out, 8) + 1) if d_out % h == 0)
    return (
        f"d_out = {d_out} does not split into {wanted} heads of equal width, so this page shows {heads} "
        f"head{'s' if heads > 1 else ''} of width {d_out // heads} in the book's split design. Head counts that "
        f"split d_out = {d_out}: {fits}. The article's design further down gives every head the full width, so it "
        f"builds all {wanted}."
    )


def multihead_lesson(settings: Settings) -> MultiHeadLesson:
    """The book's heads at the sidebar's count, or at the most heads below it that split d_out (with a note)."""
    example, x, device = inputs_on_device(settings)  # x: (T, d_in)
    tokens = unique_labels(example.tokens)
    num_tokens, d_in = x.shape
    batch = x.unsqueeze(0)  # (1, T, d_in)
    d_out = settings.d_out
    heads = heads_that_split(d_out, settings.num_heads)
    g = generator(settings.seed, CPU)
    mha = MultiHeadAttention(d_in, d_out, num_tokens, settings.dropout, heads, generator=g).to(device).eval()
    head_dim = d_out // heads
    wrapper = MultiHeadAttentionWrapper(
        d_in, head_dim, num_tokens, settings.dropout, heads, generator=generator(settings.seed, CPU)
    )
    wrapper = wrapper.to(device).eval()
    with torch.no_grad():
        trace = mha.trace(batch, scale=settings.scale_factor)
        wrapped = wrapper(batch)  # (1, T, h * head_dim)
        stacked = multihead_from_wrapper(wrapper).to(device).eval()(batch)
    code = recipes.fill(
        "multi_head",
        {
            "tokens": tokens_comment(settings),
            "inputs": inputs_source(settings),
            "seed": settings.seed,
            "d_out": d_out,
            "num_heads": heads,
            "scale_scores": settings.scale,
        },
    )
    book = BookLayer(
        wrapper_width=int(wrapped.shape[-1]),
        params=count_parameters(mha),
        shape_steps=_shape_steps(num_tokens, d_in, d_out, heads),
        output=matrix_frame(trace.output[0], tokens, dims("z", d_out)),
    )
    return lesson_from_heads(
        tokens,
        trace.weights[0],  # (h, T, T)
        [f"head {h + 1}" for h in range(heads)],
        wrapped,
        stacked,
        head_dim=head_dim,
        causal=True,
        prediction=_heads_question(trace.weights[0]),
        code=code,
        heads_note=heads_note(d_out, settings.num_heads),
        book=book,
        article=article_heads(settings, x, tokens, trace.weights[0]),
    )


# The cached computation the page calls (ui/cache.py `computed`); keyed on the settings it reads.
LESSON = LessonSpec(
    multihead_lesson,
    uses=frozenset({Control.D_OUT, Control.SEED, Control.SCALE, Control.DROPOUT, Control.NUM_HEADS, Control.DEVICE}),
    max_entries=32,
)
