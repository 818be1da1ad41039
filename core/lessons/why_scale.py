"""Lesson 3: why the scores are divided by sqrt(d_k): variance, peakiness, saturation."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from core import recipes, stats
from core.lessons.common import generator

# The trainable-weights notebook's five scores, multiplied by 8 to show a peaky softmax.
NOTEBOOK_SCORES = (0.1, -0.2, 0.3, -0.2, 0.5)
MULTIPLIERS = (1.0, 2.0, 4.0, 8.0, 16.0)


@dataclass(frozen=True)
class VarianceResult:
    """Monte Carlo variance of q.k and q.k / sqrt(d_k) for every d_k."""

    table: pd.DataFrame  # d_k, unscaled_var, scaled_var, theory_unscaled, theory_scaled
    trials: int
    code: str  # the filled recipe core/recipes/why_scale.py (draws the vectors, as the sources do)


@dataclass(frozen=True)
class SweepResult:
    """softmax(m * scores) for the notebook's five scores, and how its gradient dies."""

    sweep: pd.DataFrame  # multiplier, token, weight
    saturation: pd.DataFrame  # multiplier, max_weight, jacobian_norm, min_grad
    multiplier: float  # the chosen m
    max_weight: float  # at the chosen m
    effective_tokens: float  # exp(entropy) at the chosen m


def variance(seed: int, trials: int) -> VarianceResult:
    """The variance table, drawn from `generator(seed)` with the fast sampler."""
    table = stats.dot_product_variance(stats.DEFAULT_DIMS, trials, generator(seed))
    code = recipes.fill("why_scale", {"seed": int(seed), "trials": int(trials)})
    return VarianceResult(table=table, trials=int(trials), code=code)


def peakiness(seed: int) -> pd.DataFrame:
    """Peakiness vs d_k, scaling on and off, for random queries against 8 keys."""
    return stats.peakiness_vs_dk(stats.DEFAULT_DIMS, num_keys=8, trials=1_000, generator=generator(seed + 1))


def sweep(multiplier: float) -> SweepResult:
    """softmax(m * scores) at m = 1, 2, 4, 8, 16 and the chosen m."""
    multipliers = sorted({*MULTIPLIERS, float(multiplier)})
    weights, summary = stats.softmax_multiplier_sweep(torch.tensor(NOTEBOOK_SCORES), multipliers)
    chosen = summary[summary.multiplier == float(multiplier)].iloc[0]
    return SweepResult(
        sweep=weights,
        saturation=stats.saturation_sweep(),
        multiplier=float(multiplier),
        max_weight=float(chosen.max_weight),
        effective_tokens=float(chosen.effective_tokens),
    )
