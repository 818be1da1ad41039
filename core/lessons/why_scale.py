"""Lesson 3: why the scores are divided by sqrt(d_k): variance, peakiness, saturation."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from core import recipes, stats
from core.lessons.common import Prediction, generator

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
    prediction: Prediction  # what happens to the weights at x16, answered by the sweep


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
    at_16 = float(summary[summary.multiplier == 16.0].iloc[0].max_weight)
    at_1 = float(summary[summary.multiplier == 1.0].iloc[0].max_weight)
    return SweepResult(
        sweep=weights,
        saturation=stats.saturation_sweep(),
        multiplier=float(multiplier),
        max_weight=float(chosen.max_weight),
        effective_tokens=float(chosen.effective_tokens),
        prediction=_peaky_question(at_1, at_16),
    )


def _peaky_question(max_at_1: float, max_at_16: float) -> Prediction:
    options = ("They spread out more evenly", "They stay about the same", "Almost all the weight goes to one token")
    answer = 2 if max_at_16 > 0.9 else (1 if abs(max_at_16 - max_at_1) < 0.05 else 0)
    return Prediction(
        question="Multiply the five scores [0.1, -0.2, 0.3, -0.2, 0.5] by 16 before the softmax. The weights…",
        options=options,
        answer=answer,
        explanation=(
            f"The largest weight goes from {max_at_1:.4f} at ×1 to {max_at_16:.4f} at ×16. The softmax "
            "exponentiates differences, and multiplying the scores multiplies their differences."
        ),
    )
