"""Lesson 3: why the scores are divided by sqrt(d_k): variance, peakiness, saturation."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from core import recipes
from core.app import choices
from core.app.registry import LessonSpec
from core.attention import stats
from core.charts import spec as chart_spec
from core.charts import why_scale as scale_charts
from core.lessons.common import CPU, Prediction, generator

# The trainable-weights notebook's five scores, multiplied by 8 to show a peaky softmax.
NOTEBOOK_SCORES = (0.1, -0.2, 0.3, -0.2, 0.5)
MULTIPLIERS = choices.MULTIPLIERS

# The trainable-weights notebook's variance experiment: 1,000 draws at d = 5 and d = 100, no seed set.
NOTEBOOK_DIMS = (5, 100)
NOTEBOOK_TRIALS = 1_000
NOTEBOOK_PRINTED = {5: (5.244715543858811, 1.0489431087717622), 100: (100.44738499329094, 1.0044738499329093)}


@dataclass(frozen=True)
class VarianceResult:
    """Monte Carlo variance of q.k and q.k / sqrt(d_k) for every d_k."""

    table: pd.DataFrame  # d_k, unscaled_var, scaled_var, theory_unscaled, theory_scaled
    trials: int
    code: str  # the filled recipe core/recipes/why_scale.py (the page's sampler: the same digits)
    notebook: NotebookVariance  # the trainable-weights notebook's own widths, 5 and 100


@dataclass(frozen=True)
class NotebookVariance:
    """The trainable-weights notebook's experiment at its own widths, drawn again from a seed.

    The notebook's run had no seed, so only the law can be compared: unscaled ~ d, scaled ~ 1,
    and scaled = unscaled / d exactly.
    """

    table: pd.DataFrame  # d, unscaled_var, scaled_var (this run), printed_unscaled, printed_scaled (the notebook's)
    code: str  # the filled recipe core/recipes/why_scale_notebook.py

    @property
    def labelled(self) -> pd.DataFrame:
        """`table` with the column names a student reads on the page."""
        return self.table.set_axis([NOTEBOOK_LABELS.get(c, c) for c in self.table.columns], axis=1)


NOTEBOOK_LABELS = {
    "unscaled_var": "var(q·k), this run",
    "scaled_var": "var(q·k/√d), this run",
    "printed_unscaled": "the notebook's run (no seed)",
    "printed_scaled": "the notebook's run, scaled",
}


@dataclass(frozen=True)
class Dk64Example:
    """The attention notebook's "d_k = 64 gives scores around 8; 8 / sqrt(64) = 1"."""

    d_k: int  # 64
    typical_score: float  # sqrt(d_k): the standard deviation of q.k for unit-normal q and k
    unscaled_weights: tuple[float, ...]  # softmax([8, 0, 0]), about [1, 0, 0]
    scaled_weights: tuple[float, ...]  # softmax([8 / sqrt(64), 0, 0]) = [0.5761, 0.2119, 0.2119]
    unscaled_gradient: float  # Frobenius norm of the softmax Jacobian at [8, 0, 0]
    scaled_gradient: float  # ... at [1, 0, 0]


@dataclass(frozen=True)
class SweepResult:
    """softmax(m * scores) for the notebook's five scores, and how its gradient dies."""

    sweep: pd.DataFrame  # multiplier, token, weight
    saturation: pd.DataFrame  # multiplier, max_weight, jacobian_norm, min_grad
    multiplier: float  # the chosen m
    max_weight: float  # at the chosen m
    effective_tokens: float  # exp(entropy) at the chosen m
    prediction: Prediction  # what happens to the weights at x16, answered by the sweep
    sweep_table: pd.DataFrame  # the chart's weights as a table: one row per multiplier, one column per score
    dk64: Dk64Example
    code: str  # the filled recipe core/recipes/why_scale_softmax.py


def variance(seed: int, trials: int) -> VarianceResult:
    """The variance table, drawn from `generator(seed, CPU)` with the fast sampler."""
    table = stats.dot_product_variance(stats.DEFAULT_DIMS, trials, generator(seed, CPU))
    code = recipes.fill("why_scale", {"seed": int(seed), "trials": int(trials)})
    return VarianceResult(table=table, trials=int(trials), code=code, notebook=notebook_variance(seed))


PEAKINESS_TRIALS = 1_000


def peakiness(seed: int) -> pd.DataFrame:
    """Peakiness vs d_k, scaling on and off, for random queries against 8 keys."""
    return stats.peakiness_vs_dk(
        stats.DEFAULT_DIMS, num_keys=8, trials=PEAKINESS_TRIALS, generator=generator(seed + 1, CPU)
    )


def peakiness_table(peaks: pd.DataFrame, measure: str) -> pd.DataFrame:
    """One measure of `peakiness` as a wide table: one row per d_k, one column per scaling."""
    return peaks.pivot(index="d_k", columns="scaling", values=measure)


def peakiness_code(seed: int) -> str:
    """The filled recipe core/recipes/why_scale_peakiness.py: the page's sampler in plain PyTorch, same digits."""
    return recipes.fill("why_scale_peakiness", {"seed": int(seed) + 1, "trials": PEAKINESS_TRIALS})


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
        sweep_table=weights.pivot(index="multiplier", columns="token", values="weight"),
        dk64=dk64_example(),
        code=recipes.fill("why_scale_softmax", {"multiplier": float(multiplier)}),
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


def dk64_example(d_k: int = 64) -> Dk64Example:
    """Scores of typical size sqrt(d_k) = 8, before and after dividing by sqrt(d_k)."""
    typical = d_k**0.5
    unscaled = torch.tensor([typical, 0.0, 0.0], dtype=torch.float64)  # (3,)
    scaled = unscaled / typical  # [1, 0, 0]
    weights = torch.softmax(unscaled, dim=-1), torch.softmax(scaled, dim=-1)
    norms = [float(stats.softmax_jacobian(w).norm()) for w in weights]
    return Dk64Example(
        d_k=d_k,
        typical_score=typical,
        unscaled_weights=tuple(float(v) for v in weights[0]),
        scaled_weights=tuple(float(v) for v in weights[1]),
        unscaled_gradient=norms[0],
        scaled_gradient=norms[1],
    )


def notebook_variance(seed: int) -> NotebookVariance:
    """The notebook's two widths, 1,000 draws each, q and k drawn as vectors (as its loop does)."""
    drawn = stats.dot_product_variance(NOTEBOOK_DIMS, NOTEBOOK_TRIALS, generator(seed, CPU), method="direct")
    table = pd.DataFrame(  # one construction, not rename + select + assignments (bench/NOTES.md)
        {
            "d": list(NOTEBOOK_DIMS),
            "unscaled_var": drawn["unscaled_var"].to_numpy(),
            "scaled_var": drawn["scaled_var"].to_numpy(),
            "printed_unscaled": [NOTEBOOK_PRINTED[d][0] for d in NOTEBOOK_DIMS],
            "printed_scaled": [NOTEBOOK_PRINTED[d][1] for d in NOTEBOOK_DIMS],
        }
    )
    code = recipes.fill("why_scale_notebook", {"seed": int(seed)})
    return NotebookVariance(table=table, code=code)


def sweep_view(multiplier: float) -> tuple[SweepResult, chart_spec.VegaChart, chart_spec.VegaChart]:
    """The seed-independent part of the page, with its two charts (built once per multiplier)."""
    result = sweep(multiplier)
    return result, scale_charts.sweep_chart(result.sweep, multiplier), scale_charts.saturation_chart(result.saturation)


# The cached computations the page calls (ui/cache.py `computed`): none reads the sidebar's Settings.
VARIANCE = LessonSpec(variance, uses=None, max_entries=64)
PEAKINESS = LessonSpec(peakiness, uses=None, max_entries=64)
SWEEP = LessonSpec(sweep_view, uses=None, max_entries=8)
