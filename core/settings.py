"""The dashboard's shared settings, their limits, the presets, and link validation.

Pure Python: the sidebar builds its widgets from these ranges, and tests check
them without a server. The rule every link value passes lives in core.links.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from core.examples import (
    MAX_D_IN,
    Example,
    cats_example,
    embed_text,
    journey_example,
    life_example,
    random_words_example,
)

if TYPE_CHECKING:
    from core.links import LinkReading

# Caps on what a student can ask for; see README "Scaling out" for how they were chosen.
LIMITS: dict[str, tuple[float, float]] = {
    "d_in": (1, MAX_D_IN),
    "d_out": (1, 64),
    "seed": (0, 2**31 - 1),
    "dropout": (0.0, 0.9),
    "num_heads": (1, 8),
}


@dataclass(frozen=True)
class Preset:
    """One source's worked example: which inputs, dimensions and seed reproduce it."""

    key: str
    label: str
    source: str
    d_in: int | None  # None: the student chooses (own sentence)
    d_out: int
    seed: int
    num_heads: int
    dropout: float
    query_index: int  # the token the source focuses on
    weights: str  # "rand_x_at_w" (book), "randn" (the attention notebook), "rand_w_at_x" (the self-attention article)


PRESETS: dict[str, Preset] = {
    p.key: p
    for p in (
        Preset(
            "book",
            "Your journey starts with one step (the book chapter)",
            "the book chapter + the trainable-weights notebook",
            3,
            2,
            123,
            2,
            0.0,
            1,
            "rand_x_at_w",
        ),
        Preset(
            "notebook",
            "These are random words and embeddings (the attention notebook)",
            "the attention notebook",
            3,
            2,
            123,
            2,
            0.0,
            2,
            "randn",
        ),
        Preset(
            "article",
            "Life is short, eat dessert first (the self-attention article)",
            "the self-attention article",
            16,
            24,
            123,
            3,
            0.0,
            1,
            "rand_w_at_x",
        ),
        Preset(
            "blog",
            "cats climb trees during storms (the decoder blog)",
            "the decoder blog",
            4,
            4,
            123,
            2,
            0.0,
            2,
            "rand_x_at_w",
        ),
        Preset("custom", "Your own sentence", "you", None, 4, 123, 2, 0.0, 0, "rand_x_at_w"),
    )
}

DEFAULT_TEXT = "The cat sat on the mat because it was tired"


@dataclass(frozen=True)
class Settings:
    """Everything the sidebar controls. Frozen and hashable: a safe cache key."""

    preset: str = "book"
    text: str = DEFAULT_TEXT
    d_in: int = 3  # width of each input embedding (own sentence only)
    d_out: int = 2  # width of queries, keys and values (all heads together)
    seed: int = 123  # seeds every random draw of the page
    dropout: float = 0.0  # probability of dropping an attention weight in training mode
    num_heads: int = 2
    scale: bool = True  # divide scores by sqrt(d_k) before the softmax
    device: str = "cpu"

    @property
    def preset_info(self) -> Preset:
        return PRESETS.get(self.preset, PRESETS["book"])

    @property
    def scale_factor(self) -> float | None:
        """What to pass as SDPA's `scale`: None = 1/sqrt(d_k), 1.0 = no scaling."""
        return None if self.scale else 1.0


def settings_for_preset(key: str, base: Settings | None = None) -> Settings:
    """The settings a preset sets: its dimensions, seed, heads and dropout."""
    preset = PRESETS[key]
    base = base or Settings()
    return Settings(
        preset=key,
        text=base.text,
        d_in=preset.d_in if preset.d_in is not None else base.d_in,
        d_out=preset.d_out,
        seed=preset.seed,
        dropout=preset.dropout,
        num_heads=preset.num_heads,
        scale=True,
        device=base.device,
    )


# The sidebar controls a preset sets, and the type each widget holds (the seed box is float-typed).
PRESET_CONTROLS: dict[str, type] = {
    "d_in": int,
    "d_out": int,
    "seed": float,
    "dropout": float,
    "num_heads": int,
    "scale": bool,
}


def settings_implied_by_link(params: Mapping[str, str | list[str]], devices: list[str]) -> dict[str, object]:
    """What a link opens with beyond what it spells out: its source preset's value for every
    control the link does not give (or gives as a value the app ignores).

    `?preset=article` alone thus opens the article's d_in 16, d_out 24 and 3 heads, as choosing
    the preset in the box does; `?preset=article&seed=7` keeps the link's seed. A link without a
    valid preset, or with "custom" (no source behind it), implies nothing: the sidebar's defaults
    hold. Values come typed as the sidebar widgets hold them.
    """
    raw = params.get("preset")
    key = raw[-1] if isinstance(raw, list) else raw
    if key not in PRESETS or key == "custom":
        return {}
    ignored = {note.parameter for note in read_link(params, devices).notes}
    given = set(params) - ignored
    chosen = settings_for_preset(key)
    return {name: kind(getattr(chosen, name)) for name, kind in PRESET_CONTROLS.items() if name not in given}


def load_example(settings: Settings) -> Example:
    """The input tokens and embeddings for these settings; raises ValueError on bad text."""
    key = settings.preset
    if key == "book":
        return journey_example()
    if key == "notebook":
        return random_words_example()
    if key == "article":
        return life_example(torch.Generator().manual_seed(123))
    if key == "blog":
        return cats_example(d_in=settings.d_in, seed=settings.seed)[0]
    return embed_text(settings.text, settings.d_in, settings.seed)


def effective_d_in(settings: Settings) -> int:
    """The input width actually used: fixed by the source for the source presets."""
    fixed = settings.preset_info.d_in
    return settings.d_in if fixed is None or settings.preset == "blog" else fixed


# ------------------------------------------------------------------ links
def read_link(params: Mapping[str, str | list[str]], devices: list[str]) -> LinkReading:
    """A link's query parameters read by the one rule (core.links.read_link)."""
    from core import links  # not at the top: core.links reads the training lab's caps, whose module imports this one

    return links.read_link(params, devices)


# ------------------------------------------------------------------ cache keys
def input_fields(preset: str) -> frozenset[str]:
    """The fields that shape a preset's input tokens and embeddings (see `load_example`)."""
    if preset == "custom":
        return frozenset({"text", "d_in", "seed"})
    if preset == "blog":
        return frozenset({"d_in", "seed"})  # the blog's sentence is fixed; its embeddings are drawn
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
