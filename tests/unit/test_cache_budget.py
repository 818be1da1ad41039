"""Memory bounded by bytes (issue 10, item 4): every lesson's cache is bounded by size and time,
holds only what a page draws, and settings a page ignores share one entry."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import pickle
import pkgutil

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import core.lessons
from core.app import registry
from core.app.registry import LessonSpec
from core.app.settings import LIMITS, PRESETS, Settings, cache_key
from core.inputs.examples import MAX_D_IN, MAX_TOKENS
from core.lessons import (
    attention_at_scale,
    attention_at_scale_kv,
    attention_at_scale_online,
    causal_dropout,
    common,
    cross_attention,
    inside_gpt_runs,
    multi_head,
    overview,
    pretrained,
    pretrained_cross,
    real_model,
    to_the_answer,
    trainable_weights,
    training_lab,
    why_scale,
    without_weights,
)
from ui import cache, training_queue

pytestmark = pytest.mark.slow  # computes every lesson at its largest settings

# Every module of core/lessons: a lesson's own module (named after its registry row) and its helpers,
# so a new lesson's caches join the budget without a list to update.
LESSON_MODULES = tuple(
    importlib.import_module(f"core.lessons.{info.name}") for info in pkgutil.iter_modules(core.lessons.__path__)
)
SPECS = {spec.name: spec for module in LESSON_MODULES for spec in vars(module).values() if isinstance(spec, LessonSpec)}
LARGEST = Settings(
    preset="custom",
    text=" ".join(f"w{i}" for i in range(MAX_TOKENS)),
    d_in=MAX_D_IN,
    d_out=int(LIMITS["d_out"][1]),
    seed=5,
    dropout=0.9,
    num_heads=int(LIMITS["num_heads"][1]),
)
SECOND = " ".join(f"v{i}" for i in range(MAX_TOKENS))
# Budgeted elsewhere: a real-model lesson (~1.2 MB at the 64-piece cap, 32 kept) and a training run
# (~50 kB, 64 kept) would take a model load and a 30 s run to measure here.
NOT_MEASURED_HERE = {real_model.LESSON.name, training_lab.RUN.name}
# Lesson 10 (inside a GPT) loads SmolLM2: budgeted in tests/unit/test_inside_gpt.py.
NOT_MEASURED_HERE |= {spec.name for spec in inside_gpt_runs.LESSONS}
# Lesson 11 (to the answer) runs on the same model and queue: budgeted in tests/unit/test_to_the_answer.py.
NOT_MEASURED_HERE |= {spec.name for spec in to_the_answer.LESSONS}


LONGEST_PIECES = " ".join(["word"] * 62)  # + [CLS] and [SEP]: the real model's 64-piece cap
LONGEST_TOKENS = " ".join(["word"] * 64)  # SmolLM2's lessons: 64 tokens, the cap (decoder_heads.LESSON_MAX_TOKENS)


def the_largest(*values: object) -> object:
    """Of one computation's results for each model source, the one that pickles largest (what the budget keeps)."""
    return max(values, key=lambda value: len(pickle.dumps(value)))


@functools.cache
def largest_values() -> dict[str, object]:
    """What each lesson's cache stores at the largest settings, by computation name (computed once)."""
    model = cache.real_model()  # st.cache_resource: outside a server it is a plain call, loaded once
    gpt = cache.gpt_model()  # the DECODER source of lessons 2, 4 and 5 shares their caches
    return {
        "token_labels": common.token_labels(LARGEST),
        "overview_lesson": overview.overview_lesson(LARGEST),
        "without_weights_lesson": without_weights.without_weights_lesson(LARGEST, 0, 1.0),
        "trainable_lesson": trainable_weights.trainable_lesson(LARGEST, 0),
        "causal_lesson": causal_dropout.causal_lesson(LARGEST, 2, True),
        "multihead_lesson": multi_head.multihead_lesson(LARGEST),
        "cross_lesson": cross_attention.cross_lesson(LARGEST, SECOND, 64),
        "variance": why_scale.variance(5, 100_000),
        "peakiness": why_scale.peakiness(5),
        "sweep_view": why_scale.sweep_view(16.0),
        # Lesson 9: the most tiles (blocks of 2), the longest key row, the longest generation timed; the
        # measurement at 1,024 tokens (its table grows by one row per doubling: 4,096 adds two).
        "online_lesson": attention_at_scale_online.online_lesson(5, 16, 1),
        "tiling_lesson": attention_at_scale.tiling_lesson(5, 2, 2, True),
        "kv_lesson": attention_at_scale_kv.kv_lesson("cpu", max(attention_at_scale_kv.TIMING_CHOICES)),
        "cost_view": attention_at_scale.cost_view("cpu", 1024),
        # Lesson 8's start statistics: eight numbers whatever the setting.
        "start_of": training_lab.start_of(training_lab.TrainingConfig(d_k=256, heads=1)),
        # A model's head (core/inputs/weights.py ENCODER) at the 64-piece cap; lesson 7 reads two such sentences,
        # longer than any pair it offers.
        "_trainable": the_largest(
            pretrained.pretrained_trainable_lesson(model, LONGEST_PIECES, 3, 3, 5),
            pretrained.pretrained_trainable_lesson(gpt, LONGEST_TOKENS, 3, 3, 5),
        ),
        "_causal": the_largest(
            pretrained.pretrained_causal_lesson(model, LONGEST_PIECES, 3, 3, True, 0.5, 1),
            pretrained.pretrained_causal_lesson(gpt, LONGEST_TOKENS, 3, 3, True, 0.5, 1),
        ),
        "_multihead": the_largest(
            pretrained.pretrained_multihead_lesson(model, LONGEST_PIECES, 3),
            pretrained.pretrained_multihead_lesson(gpt, LONGEST_TOKENS, 3),
        ),
        "_cross": pretrained_cross.pretrained_cross_lesson(model, LONGEST_PIECES, LONGEST_PIECES, 3, 3),
        "_usable_sentence": the_largest(
            pretrained.usable_sentence(model, LONGEST_PIECES), pretrained.usable_sentence(gpt, LONGEST_TOKENS)
        ),
    }


def test_every_lesson_of_the_registry_has_its_module_among_the_measured() -> None:
    names = {module.__name__.rsplit(".", 1)[1] for module in LESSON_MODULES}
    assert {spec.slug for spec in registry.PAGES} <= names
    # the computations behind every weight source are measured, a model's head included
    assert {pretrained.TRAINABLE.name, pretrained_cross.CROSS.name} <= set(SPECS) - NOT_MEASURED_HERE


def stored(spec: LessonSpec):
    """The st.cache_data storage behind `cache.cached(spec)` (Streamlit's own object, measured)."""
    cached = cache.cached(spec)
    return cached._info.get_function_cache(cached._function_key)


def test_every_lesson_cache_is_bounded_by_size_and_time() -> None:
    """Measured on the caches themselves: each is made with its spec's bounds, and one filled past
    max_entries keeps max_entries (the oldest go). Training runs are kept by the training queue."""
    for spec in SPECS.values():
        if spec is training_lab.RUN:
            queue = training_queue.training_queue()
            assert (queue._max_results, queue._ttl_s) == (spec.max_entries, spec.ttl_s)
            continue
        storage = stored(spec)
        assert storage.max_entries == spec.max_entries <= 256, spec.name
        assert storage.ttl_seconds == spec.ttl_s <= 3600, spec.name
    spec = common.TOKEN_LABELS  # the cheapest computation: fill its cache past the bound
    cache.cached(spec).clear()
    for number in range(spec.max_entries + 5):
        cache.computed(spec, Settings(preset="custom", text=f"w{number}"))
    entries = stored(spec).get_stats()["cache_memory_bytes"]
    assert len(entries) == spec.max_entries
    cache.cached(spec).clear()


def test_the_caches_together_stay_under_the_byte_budget() -> None:
    """Streamlit keeps each entry pickled; a full cache holds max_entries of the largest."""
    sizes = {name: len(pickle.dumps(value)) for name, value in largest_values().items()}
    assert set(sizes) == set(SPECS) - NOT_MEASURED_HERE
    total = sum(sizes[name] * SPECS[name].max_entries for name in sizes) + 64 * 50_000  # + prose sections
    assert total / 2**20 < cache.CACHE_BUDGET_MIB, {k: round(v / 2**20, 3) for k, v in sizes.items()}


def test_cached_lessons_hold_only_what_a_page_draws() -> None:
    """Typed lessons hold tables, numbers and text: no tensors (those made the old cache entries big)."""
    for name, value in largest_values().items():
        if dataclasses.is_dataclass(value):
            for field in dataclasses.fields(value):
                assert type(getattr(value, field.name)).__module__.split(".")[0] != "torch", (name, field.name)


# ------------------------------------------------------------------ ignored settings share one entry
def test_a_sentence_on_a_source_preset_does_not_make_a_new_entry() -> None:
    book = Settings(preset="book")
    for name, uses in ((spec.name, spec.uses) for spec in SPECS.values() if spec.uses is not None):
        assert cache_key(book, uses) == cache_key(Settings(preset="book", text="anything at all"), uses), name
    assert cache_key(Settings(dropout=0.5), trainable_weights.LESSON.uses) == cache_key(
        Settings(), trainable_weights.LESSON.uses
    )


def same_lesson(a: object, b: object) -> bool:
    assert type(a) is type(b)
    for field in dataclasses.fields(a):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, pd.DataFrame):
            pd.testing.assert_frame_equal(x, y)
        else:
            assert pickle.dumps(x) == pickle.dumps(y), field.name
    return True


small_settings = st.builds(
    Settings,
    preset=st.sampled_from(list(PRESETS)),
    text=st.sampled_from(["one two three", "the cat sat", "a"]),
    d_in=st.integers(1, 5),
    d_out=st.sampled_from([2, 4, 6]),
    seed=st.integers(0, 1000),
    dropout=st.sampled_from([0.0, 0.5]),
    num_heads=st.sampled_from([1, 2]),
    scale=st.booleans(),
)


@settings(max_examples=30, deadline=None)
@given(s=small_settings)
def test_a_normalised_key_gives_the_same_lesson(s: Settings) -> None:
    """cache_key only resets what a lesson does not read: its result is the same."""
    key = lambda name: cache_key(s, SPECS[name].uses)  # noqa: E731
    assert common.token_labels(key("token_labels")) == common.token_labels(s)
    assert same_lesson(overview.overview_lesson(key("overview_lesson")), overview.overview_lesson(s))
    ww = without_weights.without_weights_lesson
    assert same_lesson(ww(key("without_weights_lesson"), 1, 2.0), ww(s, 1, 2.0))
    tw = trainable_weights.trainable_lesson
    assert same_lesson(tw(key("trainable_lesson"), 1), tw(s, 1))
    cd = causal_dropout.causal_lesson
    assert same_lesson(cd(key("causal_lesson"), 2, True), cd(s, 2, True))
    mh = multi_head.multihead_lesson
    assert same_lesson(mh(key("multihead_lesson")), mh(s))
    ca = cross_attention.cross_lesson
    assert same_lesson(ca(key("cross_lesson"), "x y", 3), ca(s, "x y", 3))


@pytest.mark.parametrize("preset", ["book", "notebook", "article"])
def test_source_presets_ignore_text_d_in_and_an_input_seed(preset: str) -> None:
    one, other = Settings(preset=preset), Settings(preset=preset, text="zz", d_in=9)
    assert cache_key(one, without_weights.LESSON.uses) == cache_key(other, without_weights.LESSON.uses)
    assert cache_key(Settings(preset=preset, seed=1), without_weights.LESSON.uses) == cache_key(
        one, without_weights.LESSON.uses
    )
