"""Scaled dot-product attention that returns every intermediate, and its fused twin.

Arguments and mask semantics copy `torch.nn.functional.scaled_dot_product_attention`:
a boolean mask is True where a query MAY attend to a key; a float mask is added to
the scaled scores; `scale=None` means 1/sqrt(d_k); `scale=1.0` means no scaling.

Shape legend: ... = any leading batch/head dims, L = number of queries,
S = number of keys/values, E = d_k (query/key width), Ev = d_v (value width).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class AttentionTrace:
    """Every step of one attention computation.

    queries (..., L, E), keys (..., S, E), values (..., S, Ev)
    scores          (..., L, S)  raw q.k, before scaling
    scaled_scores   (..., L, S)  scores * scale, plus a float mask if one was given
    masked_scores   (..., L, S)  scaled scores with -inf where attention is not allowed
    weights         (..., L, S)  softmax of masked_scores, before dropout
    dropped_weights (..., L, S)  weights after dropout (== weights when dropout_p == 0)
    context         (..., L, Ev) dropped_weights @ values
    mask            (L, S) or broadcastable, bool, True = may attend; None if no mask
    dropout_mask    like weights, bool, True = kept; None without dropout
    scale           the factor the scores were multiplied by
    output          what a module's forward() returns (== context for the function)
    """

    queries: torch.Tensor
    keys: torch.Tensor
    values: torch.Tensor
    scores: torch.Tensor
    scaled_scores: torch.Tensor
    masked_scores: torch.Tensor
    weights: torch.Tensor
    dropped_weights: torch.Tensor
    context: torch.Tensor
    mask: torch.Tensor | None
    dropout_mask: torch.Tensor | None
    scale: float
    output: torch.Tensor


def causal_mask(num_queries: int, num_keys: int, device: torch.device | None = None) -> torch.Tensor:
    """Boolean (L, S) lower-triangular mask, True = may attend (query i sees keys <= i)."""
    return torch.ones(num_queries, num_keys, dtype=torch.bool, device=device).tril()


def dropout_with_generator(
    weights: torch.Tensor, p: float, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inverted dropout: zero each entry with probability p, scale survivors by 1/(1-p).

    Returns (dropped, keep_mask). The mask is drawn from `generator`, never from the
    global RNG when a generator is given, so concurrent sessions cannot disturb it.
    """
    _check_dropout(p)
    keep = torch.empty_like(weights).bernoulli_(1.0 - p, generator=generator).bool()
    return weights * keep / (1.0 - p), keep


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    *,
    generator: torch.Generator | None = None,
) -> AttentionTrace:
    """The readable reference path: softmax(q k^T * scale + mask) @ v, step by step.

    A query row whose keys are all masked gets zero weights and a zero context vector
    (PyTorch's math would give 0/0 = nan there; zeros are what a student expects to see).
    Dropout is applied whenever dropout_p > 0, as in PyTorch: pass 0.0 for evaluation.

    `enable_gqa`, as in PyTorch: grouped-query attention, where query (..., Hq, L, E) has more heads
    than key and value (..., Hkv, S, E): each key/value head serves Hq / Hkv consecutive query heads
    (query head h reads key head h // (Hq / Hkv)), as in SmolLM2 and Llama. The trace keeps the
    keys and values as given; its scores and weights have one map per query head.
    """
    _check_dropout(dropout_p)
    shared_key, shared_value = (
        (_share_kv_heads(query, key), _share_kv_heads(query, value)) if enable_gqa else (key, value)
    )
    _check_shapes(query, shared_key, shared_value)
    num_queries, num_keys = query.shape[-2], key.shape[-2]
    scale_factor = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)

    scores = query @ shared_key.transpose(-2, -1)  # (..., L, E) @ (..., E, S) -> (..., L, S)
    scaled_scores = scores * scale_factor

    allowed = _combine_masks(attn_mask, is_causal, num_queries, num_keys, query.device)
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        scaled_scores = scaled_scores + attn_mask  # float masks are additive
    masked_scores = scaled_scores
    if allowed is not None:
        masked_scores = scaled_scores.masked_fill(~allowed, float("-inf"))

    weights = torch.softmax(masked_scores, dim=-1)  # (..., L, S)
    # A row of only -inf makes softmax return nan: define its weights as 0.
    weights = torch.nan_to_num(weights, nan=0.0)

    dropout_mask = None
    dropped_weights = weights
    if dropout_p > 0.0:
        dropped_weights, dropout_mask = dropout_with_generator(weights, dropout_p, generator)

    context = dropped_weights @ shared_value  # (..., L, S) @ (..., S, Ev) -> (..., L, Ev)
    return AttentionTrace(
        queries=query,
        keys=key,
        values=value,
        scores=scores,
        scaled_scores=scaled_scores,
        masked_scores=masked_scores,
        weights=weights,
        dropped_weights=dropped_weights,
        context=context,
        mask=allowed,
        dropout_mask=dropout_mask,
        scale=scale_factor,
        output=context,
    )


@dataclass(frozen=True)
class AfterSoftmaxMask:
    """The book's first causal method, step by step; every tensor (..., T, T)."""

    weights: torch.Tensor  # softmax of the scaled scores, future included
    masked: torch.Tensor  # the same with every entry above the diagonal set to 0
    renormalised: torch.Tensor  # each row of `masked` divided by its sum: the causal weights


def mask_after_softmax(scaled_scores: torch.Tensor) -> AfterSoftmaxMask:
    """The book's first causal method: softmax, zero the future, renormalise each row. (..., T, T)."""
    num_tokens = scaled_scores.shape[-1]
    weights = torch.softmax(scaled_scores, dim=-1)
    keep = causal_mask(num_tokens, num_tokens, scaled_scores.device).to(weights.dtype)
    masked = weights * keep
    renormalised = masked / masked.sum(dim=-1, keepdim=True)
    return AfterSoftmaxMask(weights=weights, masked=masked, renormalised=renormalised)


def renormalise_rows(weights: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Zero the entries where `keep` is False and rescale each row to sum to 1."""
    masked = weights * keep.to(weights.dtype)
    return masked / masked.sum(dim=-1, keepdim=True)


def mask_before_softmax(scaled_scores: torch.Tensor) -> torch.Tensor:
    """The efficient method: put -inf above the diagonal, then softmax. (..., T, T)."""
    num_tokens = scaled_scores.shape[-1]
    future = ~causal_mask(num_tokens, num_tokens, scaled_scores.device)
    return torch.softmax(scaled_scores.masked_fill(future, float("-inf")), dim=-1)


def mask_with_classic_bug(scaled_scores: torch.Tensor) -> torch.Tensor:
    """What `masked_fill` (no underscore) without assignment does: nothing.

    `masked_fill` returns a new tensor; when its result is thrown away the scores keep
    their future entries and the softmax attends to the future. Kept as a lesson.
    """
    num_tokens = scaled_scores.shape[-1]
    future = ~causal_mask(num_tokens, num_tokens, scaled_scores.device)
    scaled_scores.clone().masked_fill(future, float("-inf"))  # result discarded: the bug
    return torch.softmax(scaled_scores, dim=-1)


def _combine_masks(
    attn_mask: torch.Tensor | None,
    is_causal: bool,
    num_queries: int,
    num_keys: int,
    device: torch.device,
) -> torch.Tensor | None:
    """The boolean 'may attend' mask from a bool attn_mask and/or is_causal."""
    allowed = causal_mask(num_queries, num_keys, device) if is_causal else None
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        allowed = attn_mask if allowed is None else allowed & attn_mask
    return allowed


def _share_kv_heads(query: torch.Tensor, key_or_value: torch.Tensor) -> torch.Tensor:
    """Repeat each key/value head for the query heads it serves: (..., Hkv, S, E) -> (..., Hq, S, E)."""
    if query.dim() < 3 or key_or_value.dim() < 3:
        raise ValueError("Grouped-query attention needs a head dimension: (..., heads, tokens, features).")
    query_heads, kv_heads = query.shape[-3], key_or_value.shape[-3]
    if kv_heads == 0 or query_heads % kv_heads:
        raise ValueError(
            f"With grouped-query attention the query heads must be a multiple of the key/value heads: "
            f"{query_heads} query heads, {kv_heads} key/value heads."
        )
    return key_or_value.repeat_interleave(query_heads // kv_heads, dim=-3)  # (..., Hq, S, E)


def _check_shapes(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> None:
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise ValueError("query, key and value need at least 2 dims: (tokens, features).")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"Queries and keys must have the same width d_k to take dot products: "
            f"query has {query.shape[-1]}, key has {key.shape[-1]}."
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(f"Every key needs a value: key has {key.shape[-2]} rows, value has {value.shape[-2]}.")


def _check_dropout(p: float) -> None:
    if not (isinstance(p, (int, float)) and 0.0 <= float(p) < 1.0):
        raise ValueError(f"The dropout rate must be in [0, 1), got {p}.")
