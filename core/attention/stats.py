"""The numbers behind "why scale by 1/sqrt(d_k)": variance, peakiness, saturation.

Everything is vectorised over trials and seeded by a `torch.Generator`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

DEFAULT_DIMS: tuple[int, ...] = tuple(2**i for i in range(10))  # 1, 2, 4, ..., 512
MAX_TRIALS = 100_000  # the dashboard's cap (core.app.choices.MAX_TRIALS, which a test holds equal)


def _check_dims_trials(dims: Sequence[int], trials: int) -> list[int]:
    dims = [int(d) for d in dims]
    if not dims or min(dims) < 1:
        raise ValueError("Every dimension d_k must be at least 1.")
    if not 2 <= int(trials) <= MAX_TRIALS:
        raise ValueError(f"The number of trials must be between 2 and {MAX_TRIALS:,}, got {trials}.")
    return dims


def sample_dot_products(dims: Sequence[int], trials: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """`trials` samples of q.k for unit-normal q, k in R^d, for each d: -> (trials, len(dims)).

    Drawing d-dimensional q and k costs 2*d numbers per trial (200M for d up to 512).
    We draw the same random variable in two numbers instead: rotate so that q points
    along the first axis; then q.k = |q| * k_1 with k_1 ~ N(0, 1) independent of |q|,
    and |q|^2 is chi-squared with d degrees of freedom (= 2 * Gamma(d/2, 1)).
    `sample_dot_products_direct` draws the vectors and is tested to agree.
    """
    dims = _check_dims_trials(dims, trials)
    half_dims = torch.tensor(dims, dtype=torch.float64) / 2  # (D,)
    alpha = half_dims.expand(int(trials), len(dims)).contiguous()  # (trials, D)
    squared_length = 2.0 * torch._standard_gamma(alpha, generator=generator)  # |q|^2 ~ chi2_d
    projection = torch.randn(int(trials), len(dims), generator=generator, dtype=torch.float64)
    return squared_length.sqrt() * projection  # (trials, D)


def sample_dot_products_direct(
    dims: Sequence[int], trials: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """The sources' experiment without the Python loop: draw q and k, take q.k.

    Chunked so memory stays under ~32 MB whatever d and trials are. -> (trials, D).
    """
    dims = _check_dims_trials(dims, trials)
    columns = []
    for d in dims:
        rows_per_chunk = max(1, (1 << 22) // d)  # about 4M numbers per tensor
        parts = []
        for start in range(0, int(trials), rows_per_chunk):
            n = min(rows_per_chunk, int(trials) - start)
            q = torch.randn(n, d, generator=generator)  # (n, d)
            k = torch.randn(n, d, generator=generator)
            parts.append((q * k).sum(dim=-1, dtype=torch.float64))  # (n,)
        columns.append(torch.cat(parts))
    return torch.stack(columns, dim=1)


def dot_product_variance(
    dims: Sequence[int] = DEFAULT_DIMS,
    trials: int = 100_000,
    generator: torch.Generator | None = None,
    *,
    method: str = "exact",
) -> pd.DataFrame:
    """Variance of q.k and of q.k/sqrt(d_k) for unit-normal q, k: theory says d_k and 1.

    Same estimator as the sources' loop (population variance, numpy's default ddof=0).
    Columns: d_k, unscaled_var, scaled_var, theory_unscaled, theory_scaled.
    """
    sampler = sample_dot_products if method == "exact" else sample_dot_products_direct
    dots = sampler(dims, trials, generator)  # (trials, D)
    dims_t = torch.tensor([int(d) for d in dims], dtype=torch.float64)
    unscaled = dots.var(dim=0, unbiased=False)
    scaled = (dots / dims_t.sqrt()).var(dim=0, unbiased=False)
    return pd.DataFrame(
        {
            "d_k": dims_t.long().numpy(),
            "unscaled_var": unscaled.numpy(),
            "scaled_var": scaled.numpy(),
            "theory_unscaled": dims_t.numpy(),
            "theory_scaled": np.ones(len(dims_t)),
        }
    )


def dot_product_variance_loop(dim: int, num_trials: int, rng: np.random.Generator) -> tuple[float, float]:
    """The sources' Python loop, kept as the reference for the benchmark (not for the app)."""
    dot_products, scaled = [], []
    for _ in range(num_trials):
        q = rng.standard_normal(dim)
        k = rng.standard_normal(dim)
        dot_products.append(np.dot(q, k))
        scaled.append(np.dot(q, k) / np.sqrt(dim))
    return float(np.var(dot_products)), float(np.var(scaled))


def entropy(weights: torch.Tensor) -> torch.Tensor:
    """Shannon entropy in nats along the last axis; 0 * log 0 counts as 0."""
    logs = torch.where(weights > 0, weights.log(), torch.zeros_like(weights))
    return -(weights * logs).sum(dim=-1)


def peakiness(weights: torch.Tensor) -> dict[str, torch.Tensor]:
    """Max weight, entropy and effective number of attended tokens (exp(entropy))."""
    ent = entropy(weights)
    return {"max_weight": weights.max(dim=-1).values, "entropy": ent, "effective_tokens": ent.exp()}


def softmax_multiplier_sweep(
    scores: torch.Tensor, multipliers: Sequence[float], labels: Sequence[str] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """softmax(m * scores) for each multiplier m: the ×8 example of the trainable-weights notebook.

    Returns (weights: multiplier, token, weight) and (summary: multiplier, max_weight,
    entropy, effective_tokens).
    """
    scores = scores.double().flatten()
    labels = list(labels) if labels is not None else [f"x{i + 1}" for i in range(len(scores))]
    mult = torch.tensor([float(m) for m in multipliers], dtype=torch.float64)  # (M,)
    weights = torch.softmax(mult[:, None] * scores[None, :], dim=-1)  # (M, T)
    stats = peakiness(weights)
    long = pd.DataFrame(
        {
            "multiplier": np.repeat(mult.numpy(), len(scores)),
            "token": labels * len(mult),
            "weight": weights.flatten().numpy(),
        }
    )
    summary = pd.DataFrame({"multiplier": mult.numpy(), **{k: v.numpy() for k, v in stats.items()}})
    return long, summary


def peakiness_vs_dk(
    dims: Sequence[int] = DEFAULT_DIMS,
    num_keys: int = 8,
    trials: int = 2_000,
    generator: torch.Generator | None = None,
) -> pd.DataFrame:
    """Mean max weight / entropy / effective tokens of softmax(q.K), scaling on and off.

    For each d_k: `trials` random unit-normal queries against `num_keys` random keys.
    As in `sample_dot_products`, rotating q onto the first axis shows that the scores
    q.k_j are |q| * z_j with z_j ~ N(0, 1) independent and |q|^2 ~ chi-squared(d_k),
    so a trial needs num_keys + 1 random numbers instead of (num_keys + 1) * d_k.
    Columns: d_k, scaling ("scaled" | "unscaled"), max_weight, entropy, effective_tokens.
    """
    dims = _check_dims_trials(dims, trials)
    rows = []
    for d in dims:
        alpha = torch.full((trials, 1), d / 2, dtype=torch.float64)
        length = (2.0 * torch._standard_gamma(alpha, generator=generator)).sqrt()  # |q|, (trials, 1)
        scores = length * torch.randn(trials, num_keys, generator=generator, dtype=torch.float64)
        for label, factor in (("unscaled", 1.0), ("scaled", 1 / math.sqrt(d))):
            stats = peakiness(torch.softmax(scores * factor, dim=-1))
            rows.append({"d_k": d, "scaling": label, **{k_: float(v.mean()) for k_, v in stats.items()}})
    return pd.DataFrame(rows)


def softmax_jacobian(weights: torch.Tensor) -> torch.Tensor:
    """d softmax_j / d x_k = s_j (delta_jk - s_k): (..., T) -> (..., T, T)."""
    diagonal = torch.diag_embed(weights)  # (..., T, T)
    outer = weights.unsqueeze(-1) * weights.unsqueeze(-2)  # (..., T, T)
    return diagonal - outer


def saturation_sweep(
    base_scores: Sequence[float] = (1.0, 0.0, 0.0), multipliers: Sequence[float] | None = None
) -> pd.DataFrame:
    """How the softmax gradient dies as scores grow: the attention notebook's [1,0,0] -> [8,0,0].

    Columns: multiplier, max_weight, jacobian_norm (Frobenius), min_grad (smallest
    diagonal entry of the Jacobian: the gradient that reaches the weakest token).
    """
    if multipliers is None:
        multipliers = np.geomspace(0.25, 32, 36).tolist()
    base = torch.tensor(list(base_scores), dtype=torch.float64)
    rows = []
    for m in multipliers:
        weights = torch.softmax(base * float(m), dim=-1)
        jac = softmax_jacobian(weights)
        rows.append(
            {
                "multiplier": float(m),
                "max_weight": float(weights.max()),
                "jacobian_norm": float(jac.norm()),
                "min_grad": float(jac.diagonal().min()),
            }
        )
    return pd.DataFrame(rows)
