"""Lesson 10's computations together: which run on the model queue, which are shared by every student, how one runs.

ui/gpt_queue.py runs every spec of LESSONS through `run_lesson` and keeps the results that `shared_by_everyone`
names apart from the students' own; the page asks `timed_without_asking` before it times the KV cache, and
CACHE_BUDGET_MIB bounds what all of LESSONS keep (tests/unit/test_inside_gpt.py). Each spec is defined beside its
computation: core/lessons/inside_gpt.py (the prompt, generation), inside_gpt_induction.py (induction, ablation),
inside_gpt_rope.py (RoPE) and inside_gpt_cache.py (grouped-query attention's sizes, the KV cache).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch

from core.app.choices import AblationChoice
from core.app.registry import LessonSpec
from core.lessons import inside_gpt as gpt
from core.lessons import inside_gpt_cache as cache
from core.lessons import inside_gpt_induction as induction
from core.lessons import inside_gpt_rope as rope
from core.models import smollm2

R = TypeVar("R")

# tests/unit/test_inside_gpt.py measures the largest result of each of LESSONS and holds the sum under CACHE_BUDGET_MIB.
CACHE_BUDGET_MIB = 40
LESSONS = (
    gpt.PROMPT,
    gpt.VOCABULARY,
    gpt.GENERATION,
    induction.INDUCTION,
    induction.ABLATION,
    rope.ROPE,
    cache.CACHE_TIMING,
    cache.CACHE_SIZES,
)
STOPPABLE = (gpt.GENERATION, cache.CACHE_TIMING)  # they take `_keep_going` (and stop between tokens, between steps)
EXAMPLE_INPUTS = frozenset((example.text, example.kind) for example in gpt.EXAMPLES)


def timed_without_asking(text: str, kind: gpt.PromptKind) -> bool:
    """Whether the KV cache's timing runs as the page opens: on the example prompts only (their timing is
    computed once per process and shared). On a student's own prompt it runs when the student asks: it
    generates TIMED_TOKENS tokens twice, about 85% of the model's work for a new prompt (loadtest/
    inside_gpt_queue.py), and twenty students changing prompts made every other student wait behind it."""
    return (text, kind) in EXAMPLE_INPUTS


def shared_by_everyone(lesson: LessonSpec, args: tuple) -> bool:
    """Whether a result is one a new student reads at the page's defaults: the example prompts' analyses, RoPE
    checks, timings and default generations, the default induction run and its heads switched off (to zero),
    the vocabulary and the cache's sizes. `args` leave the model out.

    A finite set (4 prompts; x 9 heads for RoPE; 270 heads for the switch-off's small results): the app keeps
    all of it apart from the students' own results, which can never push it out (ui/gpt_queue.py).
    """
    if lesson in (gpt.VOCABULARY, cache.CACHE_SIZES):
        return True
    if lesson in (gpt.PROMPT, rope.ROPE, cache.CACHE_TIMING, gpt.GENERATION) and tuple(args[:2]) not in EXAMPLE_INPUTS:
        return False
    if lesson in (gpt.PROMPT, rope.ROPE):  # ROPE: (text, kind, head)
        return True
    if lesson is cache.CACHE_TIMING:  # (text, kind, new_tokens[, attempt]): a student's "Time it again" is theirs
        return args[2] == cache.TIMED_TOKENS and tuple(args[3:]) in ((), (0,))
    if lesson is gpt.GENERATION:  # (text, kind, settings, seed, new_tokens)
        defaults = (gpt.sampling_settings(gpt.DEFAULT_TEMPERATURE, 0, 1.0), gpt.DEFAULT_SEED, gpt.DEFAULT_NEW_TOKENS)
        return tuple(args[2:5]) == defaults
    if lesson is induction.INDUCTION:  # (length, seed)
        return tuple(args) == (gpt.DEFAULT_REPEAT, gpt.DEFAULT_SEED)
    if lesson is induction.ABLATION:  # (length, seed, layer, head, choice)
        return tuple(args[:2]) == (gpt.DEFAULT_REPEAT, gpt.DEFAULT_SEED) and args[4] == AblationChoice.ZERO
    return False


def run_lesson(lesson: LessonSpec[R], model: smollm2.SmolLM2, args: tuple, keep_going: Callable[[], bool]) -> R:
    """One of the page's computations, as the app's model queue runs it: `lesson.compute(model, *args)` under
    torch.inference_mode (no autograd graph can be recorded, so every intermediate tensor is freed when the run
    ends); the stoppable ones are given `keep_going` (False once nobody waits for the result)."""
    with torch.inference_mode():
        if lesson in STOPPABLE:  # by name: CACHE_TIMING's `attempt` may be left at its default
            return lesson.compute(model, *args, _keep_going=keep_going)
        return lesson.compute(model, *args)
