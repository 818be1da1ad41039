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


@dataclass(frozen=True)
class OnlineLesson:
    table: pd.DataFrame  # one row per block: keys, block max, m, e^(m_old - m_new), ℓ, output so far
    output: tuple[float, ...]
    reference: tuple[float, ...]
    max_difference: float
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
    table = pd.DataFrame(
        {
            "block": [s.block for s in result.steps],
            "keys": [f"{s.first_key}–{s.last_key}" for s in result.steps],
            "block max": [s.block_max for s in result.steps],
            "m (running max)": [s.running_max for s in result.steps],
            "e^(m_old − m_new)": [s.correction for s in result.steps],
            "ℓ (running sum)": [s.running_sum for s in result.steps],
            "output so far": [
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
        largest_rescale=smallest,
        code=recipes.fill(
            "attention_at_scale_online", {"seed": int(seed), "num_keys": num_keys, "block_size": block_size}
        ),
        prediction=_online_question(result.max_difference, len(result.steps)),
    )


def vector_text(values: tuple[float, ...]) -> str:
    return "[" + ", ".join(f"{v:.4f}" for v in values) + "]"


def online_caption(online: OnlineLesson) -> str:
    """What the table shows about the rescaling, chosen from its numbers."""
    head = f"Largest |online − ordinary| in float32: {online.max_difference:.1e}. "
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


def _online_question(max_difference: float, blocks: int) -> Prediction:
    options = (
        "Exactly the ordinary softmax · V, up to float rounding",
        "An approximation that improves with more blocks",
    )
    return Prediction(
        question=f"The online softmax reads the keys in {blocks} block{'s' if blocks != 1 else ''} and never sees all "
        "scores at once. Its result is…",
        options=options,
        answer=0 if max_difference <= 1e-6 else 1,
        explanation=(
            f"The largest difference from softmax · V computed in one go is {max_difference:.1e}. Each time a block "
            "raises the maximum, every earlier term is multiplied by e^(m_old − m_new), which turns e^(s − m_old) "
            "into e^(s − m_new) exactly: nothing is approximated."
        ),
    )


ONLINE = LessonSpec(online_lesson, uses=None, max_entries=256)
