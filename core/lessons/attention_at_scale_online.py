"""Lesson 9, section (b): the online softmax over one query row, block by block (the page's ONLINE)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from core import recipes
from core.app.registry import LessonSpec
from core.attention.long_context import online_softmax_row
from core.lessons.common import CPU, Prediction, generator

# ----------------------------------------------------------------------------------------
# (b) The online softmax, one query row
# ----------------------------------------------------------------------------------------

ROW_WIDTH = 4  # q and k width in the online-softmax example
VALUE_WIDTH = 3  # value width: three columns of output fit the table
KEY_CHOICES = range(2, 17)  # keys in the online-softmax example: few enough to read every row
BLOCK_CHOICES = range(1, 17)  # keys per block (the page reads a block wider than the row as the row)


@dataclass(frozen=True)
class OnlineLesson:
    table: pd.DataFrame  # one row per block: keys, block max, m, e^(m_old - m_new), ℓ, weighted sum ÷ ℓ so far
    output: tuple[float, ...]
    reference: tuple[float, ...]
    max_difference: float  # |online − ordinary|, both in float32
    online_error: float  # |online in float32 − softmax · V in float64|
    ordinary_error: float  # |ordinary softmax · V in float32 − the same in float64|
    rounding_bound: float  # what float32 rounding may cost on these numbers (see `rounding_bound`)
    largest_rescale: float  # the smallest e^(m_old - m_new) after the first block: how much a new max shrank the past
    code: str
    prediction: Prediction


def online_lesson(seed: int, num_keys: int, block_size: int) -> OnlineLesson:
    """One random query against `num_keys` keys, read `block_size` keys at a time."""
    if num_keys not in KEY_CHOICES or not (1 <= block_size <= num_keys):
        raise ValueError(f"Choose {min(KEY_CHOICES)} to {max(KEY_CHOICES)} keys and a block of 1 to that many keys.")
    draws = generator(seed, CPU)  # drawn on the CPU, then moved
    query = torch.randn(ROW_WIDTH, generator=draws)  # (E,)
    keys = torch.randn(num_keys, ROW_WIDTH, generator=draws) * 2  # (S, E): spread so the max moves
    values = torch.randn(num_keys, VALUE_WIDTH, generator=draws)  # (S, Ev)
    result = online_softmax_row(query, keys, values, block_size)
    exact = online_softmax_row(query.double(), keys.double(), values.double(), num_keys).reference  # (Ev,) float64
    bound = rounding_bound(num_keys, values)
    table = pd.DataFrame(
        {
            "block": [s.block for s in result.steps],
            "keys": [f"{s.first_key}–{s.last_key}" for s in result.steps],
            "block max": [s.block_max for s in result.steps],
            "m (running max)": [s.running_max for s in result.steps],
            "e^(m_old − m_new)": [s.correction for s in result.steps],
            "ℓ (running sum)": [s.running_sum for s in result.steps],
            # The weighted sum divided by ℓ: the paragraph's "weighted sum" is the running numerator.
            "weighted sum ÷ ℓ so far": [
                "[" + ", ".join(f"{v:.4f}" for v in s.partial_output.tolist()) + "]" for s in result.steps
            ],
        }
    )
    later = [s.correction for s in result.steps[1:]]
    smallest = min(later) if later else 1.0
    return OnlineLesson(
        table=table,
        output=tuple(result.output.tolist()),
        reference=tuple(result.reference.tolist()),
        max_difference=result.max_difference,
        online_error=float((result.output.double() - exact).abs().max()),
        ordinary_error=float((result.reference.double() - exact).abs().max()),
        rounding_bound=bound,
        largest_rescale=smallest,
        code=recipes.fill(
            "attention_at_scale_online", {"seed": int(seed), "num_keys": num_keys, "block_size": block_size}
        ),
        prediction=_online_question(
            float((result.output.double() - exact).abs().max()),
            float((result.reference.double() - exact).abs().max()),
            len(result.steps),
        ),
    )


def rounding_bound(num_keys: int, values: torch.Tensor) -> float:
    """A generous bound on float32 rounding in softmax · V over `num_keys` keys (a few ulps per operation).

    Each output entry is a weighted mean of the values: a sum of `num_keys` terms, each after an exp,
    a product and a rescale, then one division; every step rounds by at most float32's epsilon times
    the size of the numbers, and the numbers are at most max |v|. Differences within this bound are
    rounding, not an approximation (at seed 3364, 16 keys, blocks of 1 the page measured 1.2e-6 and
    once called that "an approximation").
    """
    operations = 4 * num_keys + 8  # exp, product, rescale and sum per key; max, division and slack
    return operations * torch.finfo(torch.float32).eps * float(values.abs().max())


def vector_text(values: tuple[float, ...]) -> str:
    return "[" + ", ".join(f"{v:.4f}" for v in values) + "]"


def online_caption(online: OnlineLesson) -> str:
    """What the table shows about the rescaling, chosen from its numbers."""
    within = max(online.online_error, online.ordinary_error) <= online.rounding_bound
    head = (
        f"Largest |online − ordinary| in float32: {online.max_difference:.1e}. Against the same sum in float64 "
        f"the online result is off by {online.online_error:.1e} and the ordinary one by {online.ordinary_error:.1e}, "
        + ("both within" if within else "more than")
        + f" float32's rounding on these numbers ({online.rounding_bound:.1e}). "
    )
    if len(online.table) == 1:
        return head + "One block holds every key: the online softmax is then the stable softmax itself."
    if online.largest_rescale >= 1.0:
        return head + (
            "The first block held the largest score, so every later factor e^(m_old − m_new) is 1: "
            "try smaller blocks or another seed to see a rescaling."
        )
    return head + (
        f"The smallest factor after the first block, {online.largest_rescale:.4f}, is where a block raised the "
        "maximum: everything summed before it was multiplied by that factor."
    )


def _online_question(online_error: float, ordinary_error: float, blocks: int) -> Prediction:
    """Always answered "exactly": the algebra is exact; the explanation gives the float64 check's numbers."""
    options = (
        "Exactly the ordinary softmax · V, up to float rounding",
        "An approximation that improves with more blocks",
    )
    return Prediction(
        question=f"The online softmax reads the keys in {blocks} block{'s' if blocks != 1 else ''} and never sees all "
        "scores at once. Its result is…",
        options=options,
        answer=0,
        explanation=(
            f"Against softmax · V computed in float64, the online result in float32 is off by {online_error:.1e} and "
            f"the ordinary one-go softmax · V in float32 by {ordinary_error:.1e}: rounding, in both. Each time a block "
            "raises the maximum, every earlier term is multiplied by e^(m_old − m_new), which turns e^(s − m_old) "
            "into e^(s − m_new) exactly: nothing is approximated."
        ),
    )


ONLINE = LessonSpec(online_lesson, uses=None, max_entries=256)
