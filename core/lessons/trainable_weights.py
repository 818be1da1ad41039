"""Lesson 2: queries, keys and values from trainable matrices (random here, as in the sources)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from core import recipes
from core.app.registry import Control, LessonSpec
from core.app.settings import Settings, WeightLayout
from core.attention import functional as fn
from core.attention.modules import CrossAttention, SelfAttention_v1, SelfAttention_v2, draw_qkv_weights, v1_from_v2
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
    strongest_key_question,
    tokens_comment,
    unique_labels,
)


@dataclass(frozen=True)
class TrainableLesson:
    tokens: tuple[str, ...]
    query_index: int
    w_query: pd.DataFrame  # matrix_frames, drawn as (d_in, d_out) whatever layout the source uses
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
    v1_vs_v2: pd.DataFrame  # the outputs of SelfAttention_v1 and _v2, side by side
    d_k: int
    d_v: int
    scale: float
    query_vector: tuple[float, ...]
    query_context: tuple[float, ...]
    v1_copied_max_diff: float  # v1 given v2's weights: equal up to float error
    v1_fresh_max_diff: float  # v1 and v2 with their own initialisations: different
    prediction: Prediction  # which token the chosen query attends to most, now through W_q and W_k
    v1_v2_code: str  # the filled recipe core/recipes/trainable_v1_v2.py
    code: str  # the filled recipe (core/recipes/trainable_weights*.py)


def _projected(settings: Settings, x: torch.Tensor) -> tuple[fn.AttentionTrace, tuple[torch.Tensor, ...]]:
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


def _v1_vs_v2(settings: Settings, x: torch.Tensor, tokens: tuple[str, ...]) -> tuple[pd.DataFrame, float, float]:
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
    return table, float((copied_out - v2_out).abs().max()), float((v1_out - v2_out).abs().max())


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
    example, x, _ = inputs_on_device(settings)  # x: (T, d_in)
    tokens = unique_labels(example.tokens)
    query_index = clamp_index(query_index, len(tokens))
    with torch.no_grad():
        trace, (w_q, w_k, w_v) = _projected(settings, x)
        v1_vs_v2, copied_diff, fresh_diff = _v1_vs_v2(settings, x, tokens)
    d_k, d_v = trace.keys.shape[-1], trace.values.shape[-1]
    return TrainableLesson(
        tokens=tokens,
        query_index=query_index,
        w_query=matrix_frame(w_q, dims("in", w_q.shape[0]), dims("out", w_q.shape[1])),
        w_key=matrix_frame(w_k, dims("in", w_k.shape[0]), dims("out", w_k.shape[1])),
        w_value=matrix_frame(w_v, dims("in", w_v.shape[0]), dims("out", w_v.shape[1])),
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
        v1_vs_v2=v1_vs_v2,
        d_k=d_k,
        d_v=d_v,
        scale=float(trace.scale),
        query_vector=row_values(trace.queries, query_index),
        query_context=row_values(trace.context, query_index),
        v1_copied_max_diff=copied_diff,
        v1_fresh_max_diff=fresh_diff,
        prediction=strongest_key_question(tokens, query_index, trace.weights[query_index]),
        code=_code(settings, query_index),
        v1_v2_code=recipes.fill(
            "trainable_v1_v2",
            {
                "tokens": tokens_comment(settings),
                "inputs": inputs_source(settings),
                "seed": settings.seed,
                "d_out": settings.d_out,
            },
        ),
    )


# The cached computation the page calls (ui/cache.py `computed`); keyed on the settings it reads.
LESSON = LessonSpec(
    trainable_lesson,
    uses=frozenset({Control.D_OUT, Control.SEED, Control.SCALE, Control.DEVICE}),
    max_entries=48,
)
