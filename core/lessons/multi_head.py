"""Lesson 5: several heads side by side, built two ways (a wrapper of heads, one split matrix)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from core import recipes
from core.lessons.common import (
    Prediction,
    dims,
    generator,
    inputs_on_device,
    inputs_source,
    matrix_frame,
    tokens_comment,
    unique_labels,
)
from core.modules import (
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    count_parameters,
    multihead_from_wrapper,
    multihead_parameter_count,
)
from core.settings import Settings


@dataclass(frozen=True)
class ShapeStep:
    code: str
    what: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class MultiHeadLesson:
    tokens: tuple[str, ...]
    head_dim: int  # d_out / num_heads: the book's heads split one projection
    head_weights: pd.DataFrame  # matrix_frame rows of every head, with a "head" column ("head 1", ...)
    output: pd.DataFrame  # after out_proj, (T, d_out)
    wrapper_width: int  # the wrapper concatenates heads of width d_out / h
    wrapper_max_diff: float  # wrapper vs MultiHeadAttention with the same weights
    params: int  # parameters of this layer
    shape_steps: tuple[ShapeStep, ...]
    prediction: Prediction  # whether untrained heads look different
    code: str  # the filled recipe core/recipes/multi_head.py


@dataclass(frozen=True)
class ParameterCounts:
    """One GPT-2-small-sized layer (768 -> 768, 12 heads), by formula."""

    without_qkv_bias: int  # the book's MultiHeadAttention (qkv_bias=False)
    with_qkv_bias: int  # GPT-2 itself has biases on the query, key and value projections


def gpt2_parameter_counts() -> ParameterCounts:
    return ParameterCounts(
        without_qkv_bias=multihead_parameter_count(768, 768, qkv_bias=False),
        with_qkv_bias=multihead_parameter_count(768, 768, qkv_bias=True),
    )


def _heads_question(weights: torch.Tensor) -> Prediction:
    """weights: (h, T, T) of untrained heads."""
    heads, num_tokens = weights.shape[0], weights.shape[-1]
    pairs = [(i, j) for i in range(heads) for j in range(i + 1, heads)]
    apart = max((float((weights[i] - weights[j]).abs().mean()) for i, j in pairs), default=0.0)
    peak = float(weights[:, -1].max(dim=-1).values.mean())  # the last row sees every token
    return Prediction(
        question="These heads start from random weights. Will each one already look for something different?",
        options=("Yes: each head has its own clear pattern", "No: they look alike and fairly flat until training"),
        answer=1,
        explanation=(
            f"The most different pair of heads differs by {apart:.4f} per weight on average, and the last row's "
            f"largest weight is {peak:.4f} where spreading evenly would give {1 / num_tokens:.4f}. Random "
            "projections of a few small embeddings give small, similar scores; heads specialise only by training "
            "(lesson 8) — see what trained heads do in lesson 6."
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


def multihead_lesson(settings: Settings) -> MultiHeadLesson:
    """Raises ValueError when d_out is not divisible by the number of heads."""
    example, x, device = inputs_on_device(settings)  # x: (T, d_in)
    tokens = unique_labels(example.tokens)
    num_tokens, d_in = x.shape
    batch = x.unsqueeze(0)  # (1, T, d_in)
    heads, d_out = settings.num_heads, settings.d_out
    g = generator(settings.seed)
    mha = MultiHeadAttention(d_in, d_out, num_tokens, settings.dropout, heads, generator=g).to(device).eval()
    head_dim = d_out // heads
    wrapper = MultiHeadAttentionWrapper(
        d_in, head_dim, num_tokens, settings.dropout, heads, generator=generator(settings.seed)
    )
    wrapper = wrapper.to(device).eval()
    with torch.no_grad():
        trace = mha.trace(batch, scale=settings.scale_factor)
        wrapped = wrapper(batch)  # (1, T, h * head_dim)
        stacked = multihead_from_wrapper(wrapper).to(device).eval()(batch)
    frames = [matrix_frame(trace.weights[0, h], tokens, tokens).assign(head=f"head {h + 1}") for h in range(heads)]
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
    return MultiHeadLesson(
        tokens=tokens,
        head_dim=head_dim,
        head_weights=pd.concat(frames, ignore_index=True),
        output=matrix_frame(trace.output[0], tokens, dims("z", d_out)),
        wrapper_width=int(wrapped.shape[-1]),
        wrapper_max_diff=float((wrapped - stacked).abs().max()),
        params=count_parameters(mha),
        shape_steps=_shape_steps(num_tokens, d_in, d_out, heads),
        prediction=_heads_question(trace.weights[0]),
        code=code,
    )
