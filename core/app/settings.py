"""The dashboard's shared settings, their limits, the presets, and link validation.

Pure Python: the sidebar builds its widgets from these ranges, and tests check
them without a server. The rule every link value passes lives in core.app.links.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING

import torch

from core.app.registry import Control
from core.inputs.examples import (
    MAX_D_IN,
    Example,
    cats_example,
    embed_text,
    journey_example,
    life_example,
    random_words_example,
)
from core.inputs.weights import WeightSource

if TYPE_CHECKING:
    pass

# Caps on what a student can ask for; see README "Scaling out" for how they were chosen.
LIMITS: Mapping[Control, tuple[float, float]] = MappingProxyType(
    {
        Control.D_IN: (1, MAX_D_IN),
        Control.D_OUT: (1, 64),
        Control.SEED: (0, 2**31 - 1),
        Control.DROPOUT: (0.0, 0.9),
        Control.NUM_HEADS: (1, 8),
    }
)


class PresetKey(StrEnum):
    """The sidebar's inputs: a source's worked example, or the student's own sentence."""

    BOOK = "book"
    NOTEBOOK = "notebook"
    ARTICLE = "article"
    BLOG = "blog"
    CUSTOM = "custom"


class WeightLayout(StrEnum):
    """How a source draws W_q, W_k, W_v and applies them."""

    RAND_X_AT_W = "rand_x_at_w"  # torch.rand, (d_in, d_out), x @ W: the book (SelfAttention_v1)
    RANDN_X_AT_W = "randn"  # torch.randn, (d_in, d_out), x @ W: the attention notebook
    RAND_W_AT_X = "rand_w_at_x"  # torch.rand, (d_out, d_in), W @ x: the self-attention article, d_v = d_k + 4


@dataclass(frozen=True, kw_only=True)
class Preset:
    """One source's worked example: which inputs, dimensions and seed reproduce it."""

    key: PresetKey
    label: str  # what the sidebar's box shows
    source: str  # the source's name, as the pages cite it
    d_in: int | None  # the width of its embeddings; None: the student chooses (own sentence)
    fixed_inputs: bool  # its tokens and embeddings are fixed data: d_in and the seed draw no input
    d_out: int
    seed: int = 123
    num_heads: int = 2
    dropout: float = 0.0
    query_index: int  # the token the source focuses on
    weights: WeightLayout = WeightLayout.RAND_X_AT_W


PRESETS: Mapping[PresetKey, Preset] = MappingProxyType(
    {
        p.key: p
        for p in (
            Preset(
                key=PresetKey.BOOK,
                label="Your journey starts with one step (the book chapter)",
                source="the book chapter + the trainable-weights notebook",
                d_in=3,
                fixed_inputs=True,
                d_out=2,
                query_index=1,
            ),
            Preset(
                key=PresetKey.NOTEBOOK,
                label="These are random words and embeddings (the attention notebook)",
                source="the attention notebook",
                d_in=3,
                fixed_inputs=True,
                d_out=2,
                query_index=2,
                weights=WeightLayout.RANDN_X_AT_W,
            ),
            Preset(
                key=PresetKey.ARTICLE,
                label="Life is short, eat dessert first (the self-attention article)",
                source="the self-attention article",
                d_in=16,
                fixed_inputs=True,
                d_out=24,
                num_heads=3,
                query_index=1,
                weights=WeightLayout.RAND_W_AT_X,
            ),
            Preset(  # the blog's sentence is fixed, its embeddings are drawn from the seed at any d_in
                key=PresetKey.BLOG,
                label="cats climb trees during storms (the decoder blog)",
                source="the decoder blog",
                d_in=4,
                fixed_inputs=False,
                d_out=4,
                query_index=2,
            ),
            Preset(
                key=PresetKey.CUSTOM,
                label="Your own sentence",
                source="you",
                d_in=None,
                fixed_inputs=False,
                d_out=4,
                query_index=0,
            ),
        )
    }
)

DEFAULT_TEXT = "The cat sat on the mat because it was tired"


@dataclass(frozen=True)
class Settings:
    """Everything the sidebar controls. Frozen and hashable: a safe cache key."""

    preset: PresetKey = PresetKey.BOOK
    text: str = DEFAULT_TEXT
    d_in: int = 3  # width of each input embedding (own sentence only)
    d_out: int = 2  # width of queries, keys and values (all heads together)
    seed: int = 123  # seeds every random draw of the page
    dropout: float = 0.0  # probability of dropping an attention weight in training mode
    num_heads: int = 2
    scale: bool = True  # divide scores by sqrt(d_k) before the softmax
    device: str = "cpu"
    weights: WeightSource = WeightSource.RANDOM  # where W_q, W_k, W_v come from (core/inputs/weights.py)

    @property
    def preset_info(self) -> Preset:
        return PRESETS.get(self.preset, PRESETS[PresetKey.BOOK])

    @property
    def scale_factor(self) -> float | None:
        """What to pass as SDPA's `scale`: None = 1/sqrt(d_k), 1.0 = no scaling."""
        return None if self.scale else 1.0


def settings_for_preset(key: PresetKey, base: Settings | None = None) -> Settings:
    """The settings a preset sets: its dimensions, seed, heads and dropout."""
    preset = PRESETS[key]
    base = base or Settings()
    return Settings(
        preset=preset.key,
        text=base.text,
        d_in=preset.d_in if preset.d_in is not None else base.d_in,
        d_out=preset.d_out,
        seed=preset.seed,
        dropout=preset.dropout,
        num_heads=preset.num_heads,
        scale=True,
        device=base.device,
        weights=base.weights,
    )


def load_example(settings: Settings) -> Example:
    """The input tokens and embeddings for these settings; raises ValueError on bad text."""
    key = settings.preset
    if key == PresetKey.BOOK:
        return journey_example()
    if key == PresetKey.NOTEBOOK:
        return random_words_example()
    if key == PresetKey.ARTICLE:
        return life_example(torch.Generator().manual_seed(123))
    if key == PresetKey.BLOG:
        return cats_example(d_in=settings.d_in, seed=settings.seed)[0]
    return embed_text(settings.text, settings.d_in, settings.seed)


def effective_d_in(settings: Settings) -> int:
    """The input width actually used: fixed by the source for the source presets."""
    preset = settings.preset_info
    return preset.d_in if preset.fixed_inputs and preset.d_in is not None else settings.d_in


# ------------------------------------------------------------------ cache keys
def input_fields(preset: str) -> frozenset[Control]:
    """The fields that shape a preset's input tokens and embeddings (see `load_example`)."""
    if preset == PresetKey.CUSTOM:
        return frozenset({Control.TEXT, Control.D_IN, Control.SEED})
    if preset == PresetKey.BLOG:
        return frozenset({Control.D_IN, Control.SEED})  # the blog's sentence is fixed; its embeddings are drawn
    return frozenset()  # the book's, the notebook's and the article's inputs are fixed data


def cache_key(settings: Settings, uses: frozenset[str]) -> Settings:
    """`settings` with every field a computation does not read put back to its default.

    `uses` names the fields the computation reads besides its input (the preset always counts).
    Two settings that differ only where nothing looks then share one cache entry: a student
    typing a sentence on the book's preset, or moving the dropout slider on a page without
    dropout, creates no new entry. tests/unit/test_cache_budget.py checks each lesson gives the
    same result for both.
    """
    kept = uses | input_fields(settings.preset) | {"preset"}
    default = Settings()
    return Settings(**{name: getattr(settings if name in kept else default, name) for name in _FIELDS})


_FIELDS = tuple(Settings.__dataclass_fields__)
