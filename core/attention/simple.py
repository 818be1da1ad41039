"""Attention without trainable weights: the inputs are their own queries, keys and values.

Shape legend: T = number of tokens, d = embedding width.
"""

from __future__ import annotations

import math

import torch


def dot_scores_for_query(inputs: torch.Tensor, query_index: int) -> torch.Tensor:
    """omega_i: the dot product of token `query_index` with every token, as a loop.

    inputs: (T, d) -> (T,). The loop mirrors the sources' first version on purpose.
    """
    _check_query_index(inputs, query_index)
    query = inputs[query_index]  # (d,)
    scores = torch.empty(inputs.shape[0], dtype=inputs.dtype, device=inputs.device)
    for j, x_j in enumerate(inputs):
        scores[j] = torch.dot(query, x_j)
    return scores


def dot_scores_loop(inputs: torch.Tensor) -> torch.Tensor:
    """All pairwise dot products with two Python loops: (T, d) -> (T, T)."""
    num_tokens = inputs.shape[0]
    scores = torch.empty(num_tokens, num_tokens, dtype=inputs.dtype, device=inputs.device)
    for i, x_i in enumerate(inputs):
        for j, x_j in enumerate(inputs):
            scores[i, j] = torch.dot(x_i, x_j)
    return scores


def dot_scores(inputs: torch.Tensor) -> torch.Tensor:
    """All pairwise dot products as one matrix product: (T, d) -> (T, T)."""
    return inputs @ inputs.T  # (T, d) @ (d, T) -> (T, T)


def cosine_similarity(inputs: torch.Tensor) -> torch.Tensor:
    """Dot products divided by both lengths, so only direction counts: (T, d) -> (T, T)."""
    lengths = inputs.norm(dim=-1, keepdim=True).clamp_min(1e-12)  # (T, 1)
    unit = inputs / lengths  # (T, d)
    return unit @ unit.T


def normalize_by_sum(scores: torch.Tensor) -> torch.Tensor:
    """Divide by the sum: sums to 1 but breaks with negative or zero-sum scores."""
    return scores / scores.sum(dim=-1, keepdim=True)


def softmax_naive(scores: torch.Tensor) -> torch.Tensor:
    """exp(x) / sum(exp(x)) as written on paper: overflows to inf/inf = nan for large x."""
    exps = torch.exp(scores)
    return exps / exps.sum(dim=-1, keepdim=True)


def softmax_stable(scores: torch.Tensor) -> torch.Tensor:
    """Subtract the row maximum first: same result, no overflow (what torch.softmax does)."""
    shifted = scores - scores.max(dim=-1, keepdim=True).values
    exps = torch.exp(shifted)
    return exps / exps.sum(dim=-1, keepdim=True)


def naive_softmax_overflow_threshold(dtype: torch.dtype = torch.float32) -> float:
    """The smallest score at which exp() overflows to inf in `dtype` (about 88.72 for float32)."""
    return math.log(torch.finfo(dtype).max)


def context_vector_loop(inputs: torch.Tensor, weights: torch.Tensor, query_index: int) -> torch.Tensor:
    """z_i = sum_j alpha_ij x_j, one term at a time: -> (d,)."""
    _check_query_index(inputs, query_index)
    context = torch.zeros_like(inputs[0])
    for j, x_j in enumerate(inputs):
        context += weights[query_index, j] * x_j
    return context


def context_vectors(inputs: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """All context vectors at once: (T, T) @ (T, d) -> (T, d)."""
    return weights @ inputs


def _check_query_index(inputs: torch.Tensor, query_index: int) -> None:
    if not 0 <= int(query_index) < inputs.shape[0]:
        raise ValueError(f"The query token index must be between 0 and {inputs.shape[0] - 1}, got {query_index}.")
