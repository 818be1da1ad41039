"""A head of SmolLM2-135M as a HeadInput (core/inputs/decoder_heads.py): the weights `head_trace` gives
are the ones our own forward pass computes for that layer and head (issue 29, item 8)."""

from __future__ import annotations

import pytest
import torch

from core.inputs import decoder_heads as dh
from core.inputs.weights import BFLOAT16_WEIGHT_GAP, head_trace
from core.models import smollm2 as sm

TEXTS = ("The cat sat on the mat because it was tired", "1 2 3 4 5 6 7 8", "Attention, über alles?")
HEADS = [(0, 0), (3, 4), (16, 0), (17, 3), (29, 8)]  # every KV group, first and last layer


@pytest.mark.parametrize("text", TEXTS)
def test_a_decoder_heads_causal_weights_are_the_models_own(decoder32: sm.SmolLM2, text: str) -> None:
    attentions = sm.forward(decoder32, sm.encode(decoder32, text), return_attentions=True).attentions
    assert attentions is not None
    for layer, head in HEADS:
        trace = head_trace(dh.decoder_head(decoder32, text, layer, head), causal=True)
        assert torch.allclose(trace.weights, attentions[layer, head], atol=1e-5), (layer, head)


def test_the_head_is_taken_apart_as_the_model_is_built(decoder32: sm.SmolLM2) -> None:
    head = dh.decoder_head(decoder32, TEXTS[0], 17, 5)
    d = decoder32.config.head_dim
    assert head.x.shape == (len(head.tokens), dh.DECODER_SHAPE.hidden_size)
    assert head.w_query.shape == head.w_key.shape == head.w_value.shape == (dh.DECODER_SHAPE.hidden_size, d)
    # query heads 3, 4 and 5 share KV head 1: the same keys and values, their own queries
    other = dh.decoder_head(decoder32, TEXTS[0], 17, 3)
    assert torch.equal(head.w_key, other.w_key) and torch.equal(head.w_value, other.w_value)
    assert not torch.equal(head.w_query, other.w_query)
    assert head.rope_base == decoder32.config.rope_base and head.scale == pytest.approx(d**-0.5)
    assert float(head.b_query.abs().sum()) == 0.0  # a Llama layer has no biases


def test_without_rope_the_positions_are_lost(decoder32: sm.SmolLM2) -> None:
    # RoPE is how position enters: the same head without the rotation computes other weights.
    from dataclasses import replace

    head = dh.decoder_head(decoder32, TEXTS[0], 16, 0)
    rotated, plain = (
        head_trace(head, causal=True).weights,
        head_trace(replace(head, rope_base=None), causal=True).weights,
    )
    assert float((rotated - plain).abs().max()) > 0.1


def test_the_4_bit_model_gives_the_same_head_within_its_rounding(decoder: sm.SmolLM2) -> None:
    attentions = sm.forward(decoder, sm.encode(decoder, TEXTS[0]), return_attentions=True).attentions
    assert attentions is not None
    trace = head_trace(dh.decoder_head(decoder, TEXTS[0], 16, 0), causal=True)
    assert float((trace.weights - attentions[16, 0]).abs().max()) < 0.05  # bfloat16 products


def test_a_head_outside_the_model_is_refused_in_words(decoder32: sm.SmolLM2) -> None:
    with pytest.raises(ValueError, match="layers 0-29 and heads 0-8"):
        dh.decoder_head(decoder32, TEXTS[0], 30, 0)


def test_the_pages_bound_on_the_bfloat16_gap_holds_for_every_head(decoder: sm.SmolLM2) -> None:
    # The overview and the decoder lessons print the same head's weights from two arithmetics; the pages say how
    # far apart they can be (BFLOAT16_WEIGHT_GAP). Every head on a sentence, and the gap is real (not zero), so the
    # sentence is needed.
    attentions = sm.forward(decoder, sm.encode(decoder, TEXTS[0]), return_attentions=True).attentions
    assert attentions is not None
    gaps = torch.tensor(
        [
            float(
                (
                    head_trace(dh.decoder_head(decoder, TEXTS[0], layer, head), causal=True).weights
                    - attentions[layer, head]
                )
                .abs()
                .max()
            )
            for layer in range(decoder.config.num_layers)
            for head in range(decoder.config.num_heads)
        ]
    )  # (270,)
    assert float(gaps.max()) < BFLOAT16_WEIGHT_GAP
    assert float(gaps.max()) > BFLOAT16_WEIGHT_GAP / 3
