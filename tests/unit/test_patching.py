"""Activation patching (core/models/patching.py) on SmolLM2-135M in float32: the exact batched patching against one
patched run per head, its end points (every part: 100%, none: 0%), and attribution patching against exact.

All slow: they need the float32 model (conftest's session fixture, ~15 s to load) and ~10 s per exact map.
"""

from __future__ import annotations

import pytest
import torch

from core.models import patching as pt
from core.models import smollm2 as sm

pytestmark = pytest.mark.slow

NAME_PROMPTS = (
    "Alice met Bob. Alice gave the book to",
    "When Mary and John went to the store, John gave a drink to",
    "Tom and Sarah had lunch in the park. Tom handed the sandwich to",
)


def _runs(model: sm.SmolLM2, text: str) -> pt.PatchingRuns:
    corruption = pt.suggest_corruption(model, text)
    assert corruption is not None, text
    clean, corrupted = sm.encode(model, corruption.clean_text), sm.encode(model, corruption.corrupted_text)
    return pt.prepare_runs(model, clean, corrupted, corruption.contrast(model))


def test_the_suggested_corruption_swaps_the_repeated_name(decoder32) -> None:
    corruption = pt.suggest_corruption(decoder32, NAME_PROMPTS[0])
    assert corruption is not None
    assert corruption.corrupted_text == "Alice met Bob. Bob gave the book to"
    contrast = corruption.contrast(decoder32)
    assert contrast is not None and (contrast.answer, contrast.other) == (" Bob", " Alice")
    assert pt.suggest_corruption(decoder32, "The cat sat on the mat.") is None  # no repeated name
    # The s29 review: "The" opens both sentences; it is no name, and France no partner of it.
    assert pt.suggest_corruption(decoder32, "The capital of France is Paris. The capital of Germany is") is None
    when = pt.suggest_corruption(decoder32, "When Mary met John, she smiled. When Mary left, she waved to")
    assert when is not None and (when.repeated, when.replacement) == ("Mary", "John")


def test_prompts_of_different_lengths_or_the_same_prompt_are_refused(decoder32) -> None:
    ids = sm.encode(decoder32, NAME_PROMPTS[0])
    with pytest.raises(sm.TextError):
        pt.prepare_runs(decoder32, ids, ids[:-1])
    with pytest.raises(sm.TextError):
        pt.prepare_runs(decoder32, ids, ids.clone())


def test_patching_every_part_restores_all_and_none_nothing(decoder32) -> None:
    model = decoder32
    runs = _runs(model, NAME_PROMPTS[0])
    assert runs.clean_difference > runs.corrupted_difference
    everything = pt.patched_difference(model, runs, pt.every_part(model.config))
    nothing = pt.patched_difference(model, runs, frozenset())
    assert float(runs.share(torch.tensor(everything))) == pytest.approx(1.0, abs=1e-4)
    assert float(runs.share(torch.tensor(nothing))) == pytest.approx(0.0, abs=1e-4)


def test_exact_patching_by_layer_equals_one_run_per_head(decoder32) -> None:
    model = decoder32
    runs = _runs(model, NAME_PROMPTS[0])
    calls: list[tuple[int, int]] = []
    result = pt.exact_head_patching(model, runs, progress=lambda done, total: calls.append((done, total)))
    assert result.restored.shape == (30, 9) and result.method is pt.PatchingMethod.EXACT
    assert calls[-1] == (270, 270) and len(calls) == 30
    assert (result.clean_difference, result.corrupted_difference) == (runs.clean_difference, runs.corrupted_difference)
    # The batched run (a shared prefix, 9 heads at once) against whole-sequence runs, one head each.
    for layer, head in [*[(lay, h) for lay, h, _ in result.top_heads(2)], (0, 0), (29, 8), (12, 4)]:
        alone = pt.patched_difference(model, runs, frozenset({pt.Part(pt.PartKind.HEAD, layer, head)}))
        assert float(result.restored[layer, head]) == pytest.approx(float(runs.share(torch.tensor(alone))), abs=1e-4)
    assert result.top_heads(1)[0][:2] == (23, 3)  # the head direct attribution names too


def test_exact_patching_can_be_stopped(decoder32) -> None:
    runs = _runs(decoder32, NAME_PROMPTS[0])
    asked = iter([True, True, False])
    with pytest.raises(pt.PatchingCancelled, match="18 of 270"):
        pt.exact_head_patching(decoder32, runs, keep_going=lambda: next(asked))


def test_attribution_patching_follows_exact_patching(decoder32) -> None:
    model = decoder32
    correlations = []
    for text in NAME_PROMPTS:
        runs = _runs(model, text)
        exact = pt.exact_head_patching(model, runs)
        estimate = pt.attribution_patching(model, runs)
        assert estimate.method is pt.PatchingMethod.ATTRIBUTION and estimate.restored.shape == (30, 9)
        r = float(torch.corrcoef(torch.stack((exact.restored.flatten(), estimate.restored.flatten())))[0, 1])
        correlations.append(r)
        assert exact.top_heads(1)[0][:2] == estimate.top_heads(1)[0][:2], text
    assert min(correlations) > 0.8, correlations
