"""The overview's first screen shows attention at work: a real GPT head on the current input (issue 30)."""

from __future__ import annotations

import pytest
import torch

from core.app.settings import PresetKey, Settings
from core.lessons import inside_gpt as gpt
from core.lessons import overview
from core.lessons.common import frame_matrix
from core.models import smollm2
from tests.support import app, assert_clean


@pytest.mark.parametrize("settings", [Settings(), Settings(preset=PresetKey.CUSTOM, text="The dog chased the ball")])
def test_the_named_head_and_its_numbers_are_measured(decoder: smollm2.SmolLM2, settings: Settings) -> None:
    analysis = gpt.analyse_prompt(decoder, overview.overview_sentence(settings), gpt.PromptKind.TEXT)
    pattern = overview.live_pattern(analysis)
    assert float(analysis.previous[pattern.layer, pattern.head]) == pytest.approx(analysis.previous.max())
    weights = frame_matrix(pattern.weights)  # (T, T) as drawn
    queries = torch.arange(2, weights.shape[0])
    assert pattern.raw_share == pytest.approx(float(weights[queries, queries - 1].mean()), abs=1e-6)
    assert pattern.raw_share + pattern.sink_share <= 1.0 + 1e-6  # the same queries: shares of one row
    assert torch.triu(weights, diagonal=1).abs().max() == 0  # a GPT head: nothing on the future
    assert pattern.score > 0.5  # a clear previous-token head, as the caption says
    # A mean, said as one (the s28 review: "each token puts 80%" where the rows ranged from 71% to 88%).
    assert f"puts on average {pattern.raw_share:.0%} of its weight on the token just before it" in pattern.caption()


def test_the_overview_draws_it_on_the_first_screen(decoder: smollm2.SmolLM2) -> None:
    at = app()
    assert_clean(at)
    assert "Attention at work on this sentence" in [s.value for s in at.subheader]
    analysis = gpt.analyse_prompt(decoder, overview.overview_sentence(Settings()), gpt.PromptKind.TEXT)
    caption = overview.live_pattern(analysis).caption()
    assert caption in [c.value for c in at.caption]
