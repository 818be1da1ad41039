"""Lesson 12: a GPT's keys, shared (grouped-query attention), rotated (RoPE) and cached (the KV cache).

The numbers come from lesson 10's computations on SmolLM2 (core/lessons/inside_gpt_rope.py and
inside_gpt_cache.py, run through the model queue); this module asks the lesson's question from them.
"""

from __future__ import annotations

import enum

import numpy as np

from core.lessons.common import Prediction
from core.lessons.inside_gpt_rope import RopeLesson

# Scores that move by less than this as the pair moves along the text are float rounding: on every example prompt,
# at every layer-0 head, they spread by about 1e-5 (tests/unit/test_gpt_keys.py holds them under this).
ROUNDING = 1e-3


class Moved(enum.IntEnum):
    """What the pair's score does as the query and the key move together: the question's options, in order."""

    SAME = 0
    GROWS = 1
    SHRINKS = 2
    WANDERS = 3


OPTIONS = {
    Moved.SAME: "It stays the same, up to float rounding",
    Moved.GROWS: "It grows the further they move",
    Moved.SHRINKS: "It shrinks the further they move",
    Moved.WANDERS: "It changes, up and down",
}


def how_it_moved(scores: tuple[float, ...]) -> Moved:
    """The scores at shifts 0, 1, 10, ... in order: the same within ROUNDING, rising, falling, or neither."""
    if max(scores) - min(scores) < ROUNDING:
        return Moved.SAME
    steps = [b - a for a, b in zip(scores, scores[1:], strict=False)]
    if all(step >= 0 for step in steps):
        return Moved.GROWS
    if all(step <= 0 for step in steps):
        return Moved.SHRINKS
    return Moved.WANDERS


def shift_question(result: RopeLesson) -> Prediction:
    """Move the query and the key along the text together, keeping their distance: what does their score do?

    Asked of whichever pair and head the student picked, in words that name none of them, with the pair's own
    numbers under it (`shift_table`'s caption): a new pick changed the question's text, so the student's answer
    was wiped and the table locked again, though the answer is the same for every pair (the s30 review). Only
    an answer that changes (scores beyond ROUNDING) makes it a new question."""
    moved = how_it_moved(result.scores)
    return Prediction(
        question=(
            "Take layer 0's query and key of the pair picked above, and move both further along the text, keeping "
            "the distance between them. What does their score do?"
        ),
        options=tuple(OPTIONS[m] for m in Moved),
        answer=int(moved),
        explanation=(
            "Each rotation turns q and k by angles proportional to their positions, and a dot product of two "
            "turned vectors depends only on the difference of the angles, so only on the distance i − j: the table "
            "below moves the pair and finds the same score, up to float rounding."
            if moved is Moved.SAME
            else "Here the table below finds the score moving by more than float rounding."
        ),
    )


INDUCTION_AT_LEAST = 0.4  # an induction score this high: the head copies what followed the earlier copy


def _listed(numbers: list[int]) -> str:
    words = [str(n) for n in numbers]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def groups_sentence(scores: np.ndarray, groups: tuple[int, ...]) -> str:
    """Where the induction heads sit among the key/value groups, from the scores (L, H): how many groups they
    read, and a layer whose heads of one group are all induction heads, if there is one."""
    found = [(layer, head) for layer, row in enumerate(scores) for head, v in enumerate(row) if v >= INDUCTION_AT_LEAST]
    if not found:
        return f"No head has an induction score of at least {INDUCTION_AT_LEAST:.2f} on this sequence."
    read = sorted({groups[head] for _, head in found})
    total = max(groups) + 1
    which = f"all {total}" if len(read) == total else f"{len(read)} of the {total}"
    sentence = (
        f"The {len(found)} heads with an induction score of at least {INDUCTION_AT_LEAST:.2f} read {which} "
        "key/value heads"
    )
    for layer in sorted({layer for layer, _ in found}):
        for group in read:
            together = [head for at, head in found if at == layer and groups[head] == group]
            if len(together) > 1:
                return (
                    f"{sentence}; in layer {layer}, heads {_listed(together)} read the same key/value head "
                    f"({group}) and all score at least {INDUCTION_AT_LEAST:.2f}."
                )
    return sentence + "."
