"""Every lesson's "Code" snippet runs on its own and reproduces the lesson's numbers."""

from __future__ import annotations

import pytest
import torch

from core import lessons, snippets
from core.examples import embed_text
from core.settings import PRESETS, Settings, settings_for_preset

SETTINGS = [settings_for_preset(key) for key in PRESETS] + [
    Settings(
        preset="custom",
        text="Attention is all you need, they said",
        d_in=5,
        d_out=6,
        seed=7,
        dropout=0.3,
        num_heads=3,
        scale=False,
    ),
]
IDS = [s.preset if s.preset != "custom" or s.seed == 123 else "custom-unscaled" for s in SETTINGS]


def run(code: str) -> dict:
    namespace: dict = {}
    exec(compile(code, "<snippet>", "exec"), namespace)  # noqa: S102 - our own generated code
    return namespace


def assert_matches(namespace: dict, checks: dict[str, torch.Tensor]) -> None:
    assert checks, "a lesson with no checks would make this test vacuous"
    for name, expected in checks.items():
        got = torch.as_tensor(namespace[name]).detach().double()
        assert got.shape == expected.shape, name
        assert torch.allclose(got, expected.double(), atol=1e-5), name


@pytest.mark.parametrize("settings", SETTINGS, ids=IDS)
def test_simple_and_trainable_snippets(settings: Settings) -> None:
    assert_matches(run(snippets.simple_code(settings)), lessons.simple_lesson(settings, 1).checks)
    assert_matches(run(snippets.trainable_code(settings)), lessons.trainable_lesson(settings, 1).checks)


@pytest.mark.parametrize("settings", SETTINGS, ids=IDS)
@pytest.mark.parametrize("training", [False, True])
def test_causal_snippet(settings: Settings, training: bool) -> None:
    lesson = lessons.causal_lesson(settings, 2, training)
    assert_matches(run(snippets.causal_code(settings, training)), lesson.checks)


@pytest.mark.parametrize("settings", SETTINGS, ids=IDS)
def test_multihead_and_cross_snippets(settings: Settings) -> None:
    if settings.d_out % settings.num_heads == 0:
        assert_matches(run(snippets.multihead_code(settings)), lessons.multihead_lesson(settings).checks)
    second_text = "Un deux trois quatre"
    d_v = settings.d_out + 3
    second = (
        None
        if settings.preset == "article"
        else embed_text(second_text, lessons.load_example(settings).d_in, settings.seed).embeddings
    )
    lesson = lessons.cross_lesson(settings, second_text, d_v)
    assert_matches(run(snippets.cross_code(settings, second, d_v)), lesson.checks)


def test_scaling_snippet() -> None:
    lesson = lessons.scaling_variance(5, 5_000)
    assert_matches(run(snippets.scaling_code(5, 5_000)), lesson.checks)


@pytest.mark.parametrize("settings", SETTINGS, ids=IDS)
def test_overview_inputs_snippet(settings: Settings) -> None:
    namespace = run("import torch\n" + snippets.inputs_code(settings))
    assert torch.equal(namespace["inputs"], lessons.load_example(settings).embeddings)
