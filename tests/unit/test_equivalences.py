"""Different-looking code that must compute the same thing."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import core
from tests.conftest import gen


def test_v1_with_v2_weights_gives_v2_output(journey: torch.Tensor) -> None:
    v2 = core.SelfAttention_v2(3, 2, generator=gen(789))
    v1 = core.v1_from_v2(v2)
    assert torch.allclose(v1(journey), v2(journey), atol=1e-6)
    fresh_v1 = core.SelfAttention_v1(3, 2, generator=gen(789))
    assert not torch.allclose(fresh_v1(journey), v2(journey), atol=1e-3)  # different init


def test_wrapper_equals_multihead_with_stacked_weights(journey: torch.Tensor) -> None:
    batch = torch.stack((journey, journey))
    for qkv_bias in (False, True):
        wrapper = core.MultiHeadAttentionWrapper(3, 2, 6, 0.0, 3, qkv_bias, generator=gen(123))
        mha = core.multihead_from_wrapper(wrapper)
        assert torch.allclose(wrapper(batch), mha(batch), atol=1e-6)
        assert torch.allclose(wrapper.trace(batch).weights, mha.trace(batch).weights, atol=1e-6)


def test_module_forward_equals_trace_output(journey: torch.Tensor) -> None:
    batch = torch.stack((journey, journey))
    wrapper = core.MultiHeadAttentionWrapper(3, 2, 6, 0.0, 2, generator=gen(1))
    assert torch.allclose(wrapper(batch), wrapper.trace(batch).output)
    assert wrapper.trace(batch).weights.shape == (2, 2, 6, 6)  # (batch, heads, T, T)
    ca = core.CausalAttention(3, 2, 6, 0.0, generator=gen(1))
    assert torch.allclose(ca(batch), ca.trace(batch).output, atol=1e-6)


@settings(max_examples=30, deadline=None)
@given(num_tokens=st.integers(1, 9), seed=st.integers(0, 10_000))
def test_two_causal_methods_agree(num_tokens: int, seed: int) -> None:
    scores = torch.randn(num_tokens, num_tokens, generator=gen(seed))
    after = core.mask_after_softmax(scores).renormalised
    before = core.mask_before_softmax(scores)
    assert torch.allclose(after, before, atol=1e-6)


def test_classic_bug_leaks_the_future() -> None:
    scores = torch.randn(5, 5, generator=gen(0))
    buggy = core.mask_with_classic_bug(scores)
    future = ~core.causal_mask(5, 5)
    assert torch.all(buggy[future] > 0)  # the mask silently vanished
    assert torch.allclose(buggy, torch.softmax(scores, dim=-1))


@settings(max_examples=20, deadline=None)
@given(position=st.integers(1, 5), seed=st.integers(0, 10_000))
def test_future_token_never_changes_earlier_outputs(position: int, seed: int) -> None:
    x = torch.rand(1, 6, 4, generator=gen(seed))
    changed = x.clone()
    changed[0, position] += torch.randn(4, generator=gen(seed + 1)) * 5
    for module in (
        core.CausalAttention(4, 4, 6, 0.0, generator=gen(3)),
        core.MultiHeadAttention(4, 4, 6, 0.0, 2, generator=gen(3)),
        core.SingleSelfAttentionHead(6, 4, 4, generator=gen(3)),
    ):
        before, after = module(x), module(changed)
        assert torch.allclose(before[0, :position], after[0, :position], atol=1e-6)
        assert not torch.allclose(before[0, position:], after[0, position:], atol=1e-6)


def test_dot_product_samplers_agree_statistically() -> None:
    exact = core.dot_product_variance([8, 64], 40_000, gen(1))
    direct = core.dot_product_variance([8, 64], 40_000, gen(2), method="direct")
    # Both estimate d_k; the sample variance of 40k draws has ~1% relative error.
    assert (abs(exact.unscaled_var / direct.unscaled_var - 1) < 0.05).all()
    assert (abs(direct.scaled_var - 1) < 0.05).all()


def test_peakiness_sampler_matches_drawing_the_vectors() -> None:
    fast = core.peakiness_vs_dk([4, 64], num_keys=8, trials=20_000, generator=gen(3)).set_index(["d_k", "scaling"])
    g = gen(4)
    for d in (4, 64):
        q = torch.randn(20_000, 1, d, generator=g, dtype=torch.float64)
        k = torch.randn(20_000, 8, d, generator=g, dtype=torch.float64)
        scores = (q @ k.transpose(1, 2)).squeeze(1)  # (trials, 8)
        for label, factor in (("unscaled", 1.0), ("scaled", d**-0.5)):
            direct = core.peakiness(torch.softmax(scores * factor, dim=-1))["max_weight"].mean().item()
            assert abs(fast.loc[(d, label), "max_weight"] - direct) < 0.01
