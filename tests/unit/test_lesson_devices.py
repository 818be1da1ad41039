"""Every lesson runs on every device: each random draw uses a generator on the device it draws for.

On an H100 the causal lesson in training mode failed with "Expected a 'cuda' device type for
generator but found 'cpu'": its dropout generator was made on the CPU while the weights it drew
for were on the GPU. A CPU-only machine cannot see that error, so `test_each_draw_uses_a_generator_on_its_device`
runs every lesson on PyTorch's "meta" device (tensors with shapes but no data) and records, for
every random draw, the device the generator was made for and the device of the tensor it fills.
The CUDA tests run every lesson at several settings on a GPU and compare it with the CPU.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import pandas as pd
import pytest
import torch

from core.app.settings import PRESETS, Settings, settings_for_preset
from core.lessons import (
    causal_dropout,
    common,
    cross_attention,
    multi_head,
    overview,
    trainable_weights,
    without_weights,
)
from tests.conftest import requires_cuda

# Every lesson that runs on the sidebar's device, as (name, call). Lessons 3 (why scale), 6 (the
# real model) and 8 (the training lab) compute on the CPU only and take no device.
LESSONS: dict[str, Callable[[Settings], object]] = {
    "overview": overview.overview_lesson,
    "without_weights": lambda s: without_weights.without_weights_lesson(s, 1, 1.5),
    "trainable_weights": lambda s: trainable_weights.trainable_lesson(s, 1),
    "causal_evaluation": lambda s: causal_dropout.causal_lesson(s, 2, False),
    "causal_training": lambda s: causal_dropout.causal_lesson(s, 2, True),
    "multi_head": multi_head.multihead_lesson,
    "cross_attention": lambda s: cross_attention.cross_lesson(s, "a second sentence to attend to", 5),
    "cross_attention_own_width": lambda s: cross_attention.cross_lesson(s, "another one", 3, None, 6),
}

SETTINGS = [dataclasses.replace(settings_for_preset(key), dropout=0.4) for key in PRESETS] + [
    Settings(preset="custom", text="the cat sat on the mat", d_in=5, d_out=6, seed=7, dropout=0.3, num_heads=3),
    Settings(preset="custom", text="one", d_in=2, d_out=4, seed=1, dropout=0.9, num_heads=4, scale=False),
    Settings(preset="blog", d_in=8, d_out=8, seed=3, dropout=0.5, num_heads=8),
]
SETTING_IDS = [f"{s.preset}-{s.seed}-{s.d_out}" for s in SETTINGS]

# The draws a lesson can make, as (owner, name, where the drawn tensor lives).
_TENSOR_METHODS = ("bernoulli_", "uniform_", "normal_", "random_", "exponential_", "geometric_")
_FACTORIES = ("rand", "randn", "randint", "randperm", "rand_like", "randn_like", "bernoulli", "multinomial")


@dataclasses.dataclass
class Draw:
    """One random draw: where its generator was made for, and where its tensor lives."""

    what: str
    generator_device: torch.device
    tensor_device: torch.device


@pytest.fixture
def draws(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Draw]]:
    """Run lessons on "meta" and record every draw that passes a generator.

    A generator cannot live on "meta", so `torch.Generator(device)` here makes a CPU generator
    that remembers the device it was asked for; each draw then compares that with its tensor's.
    """
    recorded: list[Draw] = []

    class AskedGenerator(torch.Generator):
        """A CPU generator that remembers the device it was asked for (none can live on "meta")."""

        def __new__(cls, device: torch.device | str = "cpu") -> AskedGenerator:
            made = super().__new__(cls, "cpu")
            made.asked = torch.device(device)
            return made

        def __init__(self, device: torch.device | str = "cpu") -> None:
            pass  # made by __new__

    def where(generator: torch.Generator) -> torch.device:
        return getattr(generator, "asked", generator.device)

    def spy_method(name: str) -> None:
        original = getattr(torch.Tensor, name)

        def drawn(self: torch.Tensor, *args, generator: torch.Generator | None = None, **kwargs):
            if generator is not None:
                recorded.append(Draw(f"Tensor.{name}", where(generator), self.device))
            return original(self, *args, generator=generator, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, drawn)

    def spy_factory(name: str) -> None:
        original = getattr(torch, name)

        def drawn(*args, generator: torch.Generator | None = None, **kwargs):
            result = original(*args, generator=generator, **kwargs)
            if generator is not None:
                recorded.append(Draw(f"torch.{name}", where(generator), result.device))
            return result

        monkeypatch.setattr(torch, name, drawn)

    monkeypatch.setattr(torch, "Generator", AskedGenerator)
    for name in _TENSOR_METHODS:
        spy_method(name)
    for name in _FACTORIES:
        spy_factory(name)
    monkeypatch.setattr(common, "resolve_device", lambda name: torch.device("meta"))
    yield recorded


def run_on_meta(call: Callable[[Settings], object], settings: Settings) -> None:
    """Run a lesson until it needs real numbers ("meta" tensors hold none): every draw before that is recorded."""
    try:
        call(settings)
    except (NotImplementedError, RuntimeError) as error:  # a meta tensor read as numbers
        if "meta" not in str(error):
            raise


@pytest.mark.parametrize("settings", SETTINGS, ids=SETTING_IDS)
@pytest.mark.parametrize("lesson", list(LESSONS))
def test_each_draw_uses_a_generator_on_its_device(draws: list[Draw], lesson: str, settings: Settings) -> None:
    run_on_meta(LESSONS[lesson], settings)
    wrong = [draw for draw in draws if draw.generator_device.type != draw.tensor_device.type]
    assert not wrong, f"{lesson}: a generator drew for a tensor on another device: {wrong}"


def test_the_meta_check_sees_the_dropout_draw(draws: list[Draw]) -> None:
    """The check above is not vacuous: training mode's dropout is drawn on the inputs' device."""
    run_on_meta(LESSONS["causal_training"], dataclasses.replace(settings_for_preset("book"), dropout=0.5))
    on_device = [draw for draw in draws if draw.tensor_device.type == "meta"]
    assert on_device and all(draw.generator_device.type == "meta" for draw in on_device)


def test_a_cpu_generator_for_a_device_tensor_is_caught(draws: list[Draw]) -> None:
    """The spy itself: the mistake the H100 met, made on purpose, is recorded as a mismatch."""
    torch.empty(3, 3, device="meta").bernoulli_(0.5, generator=torch.Generator())
    assert [(d.generator_device.type, d.tensor_device.type) for d in draws] == [("cpu", "meta")]


# ------------------------------------------------------------------ on a real GPU (skipped without one)
def _tables(result: object) -> Iterator[tuple[str, object]]:
    """Every DataFrame and float a lesson result holds, by field path (nested dataclasses too)."""
    for field in dataclasses.fields(result):  # type: ignore[arg-type]
        value = getattr(result, field.name)
        if isinstance(value, pd.DataFrame | float):
            yield field.name, value
        elif dataclasses.is_dataclass(value):
            yield from ((f"{field.name}.{name}", inner) for name, inner in _tables(value))


# Fields drawn by dropout: on CUDA a CUDA generator draws them, a different stream from the CPU's.
_RANDOM_ON_DEVICE = {"dropped", "kept_fraction"}


@requires_cuda
@pytest.mark.parametrize("settings", SETTINGS, ids=SETTING_IDS)
@pytest.mark.parametrize("lesson", list(LESSONS))
def test_every_lesson_runs_on_cuda_and_matches_the_cpu(lesson: str, settings: Settings) -> None:
    on_cpu = LESSONS[lesson](settings)
    on_gpu = LESSONS[lesson](dataclasses.replace(settings, device="cuda"))
    compared = 0
    for (name, expected), (_, got) in zip(_tables(on_cpu), _tables(on_gpu), strict=True):
        if name.split(".")[-1] in _RANDOM_ON_DEVICE:
            continue
        if isinstance(expected, float):
            assert got == pytest.approx(expected, abs=1e-4), name
        else:
            numeric = expected.select_dtypes("number").columns
            assert list(got.columns) == list(expected.columns), name
            # A table of words alone (the causal lesson's context / next-token pairs) must match exactly;
            # on an H200 its empty numeric difference gave NaN, which failed "<= 1e-4".
            words = expected.columns.difference(numeric)
            pd.testing.assert_frame_equal(got[words], expected[words], obj=name)
            if len(numeric) and not expected.empty:
                assert (got[numeric] - expected[numeric]).abs().max().max() <= 1e-4, name
        compared += 1
    assert compared > 0


@requires_cuda
@pytest.mark.parametrize("settings", SETTINGS, ids=SETTING_IDS)
def test_dropout_on_cuda_keeps_the_promised_share(settings: Settings) -> None:
    """Training mode on CUDA draws its dropout there: survivors scaled by 1/(1-p), reproducible per seed."""
    on_gpu = dataclasses.replace(settings, device="cuda")
    first = causal_dropout.causal_lesson(on_gpu, 2, True)
    again = causal_dropout.causal_lesson(on_gpu, 2, True)
    pd.testing.assert_frame_equal(first.dropped, again.dropped)
    assert first.kept_fraction is not None and 0.0 <= first.kept_fraction <= 1.0
    survivors = first.dropped.value[first.dropped.value > 0]
    weights = first.masked.value[first.dropped.value > 0]
    assert torch.allclose(torch.tensor(survivors.to_numpy()), torch.tensor(weights.to_numpy()) * first.rescale)
