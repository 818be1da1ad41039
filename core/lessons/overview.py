"""Lesson 0, the overview: the current input, one embedding vector per token."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from core import recipes
from core.app.registry import LessonSpec
from core.app.settings import PresetKey, Settings, load_example
from core.inputs.examples import life_vocabulary
from core.lessons.common import dims, inputs_source, matrix_frame, tokens_comment, unique_labels


@dataclass(frozen=True)
class OverviewLesson:
    tokens: tuple[str, ...]
    source: str  # where the input comes from, in words
    d_in: int
    embeddings: pd.DataFrame  # matrix_frame of the (T, d_in) inputs
    signed: bool  # whether any embedding value is negative (picks the colour scale)
    vocabulary: tuple[tuple[str, int], ...]  # the self-attention article's word -> id table (empty otherwise)
    token_ids: tuple[int, ...]  # the sentence as ids, the rows nn.Embedding looks up (empty otherwise)
    code: str  # the filled recipe core/recipes/overview.py


def overview_lesson(settings: Settings) -> OverviewLesson:
    example = load_example(settings)
    vocabulary = life_vocabulary() if settings.preset == PresetKey.ARTICLE else {}
    tokens = unique_labels(example.tokens)
    code = recipes.fill("overview", {"tokens": tokens_comment(settings), "inputs": inputs_source(settings)})
    return OverviewLesson(
        tokens=tokens,
        source=settings.preset_info.source,
        d_in=example.d_in,
        embeddings=matrix_frame(example.embeddings, tokens, dims("x", example.d_in)),
        signed=bool((example.embeddings < 0).any()),
        vocabulary=tuple(vocabulary.items()),
        token_ids=tuple(vocabulary[word] for word in example.tokens) if vocabulary else (),
        code=code,
    )


# The cached computation the page calls (ui/cache.py `computed`); keyed on the settings it reads.
LESSON = LessonSpec(overview_lesson, uses=frozenset(), max_entries=64)
