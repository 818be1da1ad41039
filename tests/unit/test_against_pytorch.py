"""core's attention against PyTorch's own implementations."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import core
from tests.conftest import gen


def qkv(shape_q: tuple, shape_k: tuple, d_v: int, device: torch.device, seed: int = 0):
    g = gen(seed)
    q = torch.randn(*shape_q, generator=g).to(device)
    k = torch.randn(*shape_k, generator=g).to(device)
    v = torch.randn(*shape_k[:-1], d_v, generator=g).to(device)
    return q, k, v


@pytest.mark.parametrize("scale", [None, 1.0, 0.3])
@pytest.mark.parametrize("is_causal", [False, True])
def test_sdpa_matches_torch(device: torch.device, scale: float | None, is_causal: bool) -> None:
    q, k, v = qkv((2, 3, 5, 4), (2, 3, 5, 4), 4, device)
    ours = core.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
    theirs = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
    assert ours.context.device == q.device
    assert torch.allclose(ours.context, theirs, atol=1e-5)


@pytest.mark.parametrize("scale", [None, 1.0, 2.5])
def test_sdpa_cross_shapes_and_dv_differs(device: torch.device, scale: float | None) -> None:
    q, k, v = qkv((2, 6, 8), (2, 9, 8), 11, device, seed=1)  # L=6, S=9, d_k=8, d_v=11
    ours = core.scaled_dot_product_attention(q, k, v, scale=scale)
    theirs = F.scaled_dot_product_attention(q, k, v, scale=scale)
    assert ours.weights.shape == (2, 6, 9) and ours.context.shape == (2, 6, 11)
    assert torch.allclose(ours.context, theirs, atol=1e-5)


@pytest.mark.parametrize(("query_heads", "kv_heads"), [(9, 3), (4, 1), (6, 6)])
@pytest.mark.parametrize("is_causal", [False, True])
def test_sdpa_grouped_query_attention_matches_torch(
    device: torch.device, query_heads: int, kv_heads: int, is_causal: bool
) -> None:
    """enable_gqa as PyTorch defines it: query head h reads key/value head h // (Hq / Hkv)."""
    q, k, v = qkv((2, query_heads, 7, 8), (2, kv_heads, 7, 8), 5, device, seed=3)
    ours = core.scaled_dot_product_attention(q, k, v, is_causal=is_causal, enable_gqa=True)
    theirs = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, enable_gqa=True)
    assert ours.weights.shape == (2, query_heads, 7, 7)
    assert ours.keys.shape == (2, kv_heads, 7, 8)  # the trace keeps the keys as given
    assert torch.allclose(ours.context, theirs, atol=1e-5)


def test_sdpa_grouped_query_attention_with_a_cache_mask_matches_torch(device: torch.device) -> None:
    """Three new queries after four cached tokens: a bool mask that lets query t see keys 0 .. 4 + t."""
    q, k, v = qkv((9, 3, 8), (3, 7, 8), 8, device, seed=4)
    allowed = torch.ones(3, 7, dtype=torch.bool, device=device).tril(4)
    ours = core.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=True)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=True)
    assert torch.allclose(ours.context, theirs, atol=1e-5)


def test_sdpa_grouped_query_attention_needs_whole_groups() -> None:
    q, k, v = qkv((5, 3, 4), (2, 3, 4), 4, torch.device("cpu"))
    with pytest.raises(ValueError, match="multiple of the key/value heads"):
        core.scaled_dot_product_attention(q, k, v, enable_gqa=True)


def test_sdpa_boolean_mask_true_means_attend(device: torch.device) -> None:
    q, k, v = qkv((1, 4, 6, 8), (1, 4, 7, 8), 8, device, seed=2)
    mask = torch.rand(6, 7, generator=gen(3)) > 0.4
    mask[:, 0] = True  # every query may attend somewhere: PyTorch gives nan otherwise
    mask = mask.to(device)
    ours = core.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.allclose(ours.context, theirs, atol=1e-5)
    assert torch.all(ours.weights[..., ~mask] == 0)


def test_sdpa_float_mask_is_additive(device: torch.device) -> None:
    q, k, v = qkv((3, 5, 4), (3, 5, 4), 4, device, seed=4)
    bias = torch.randn(5, 5, generator=gen(5)).to(device)
    ours = core.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    assert torch.allclose(ours.context, theirs, atol=1e-5)


def test_fast_path_equals_traced_path(device: torch.device) -> None:
    """The two attention paths: the traced reference and PyTorch's fused kernel, as `fused=` chooses."""
    q, k, v = qkv((2, 2, 7, 4), (2, 2, 7, 4), 4, device, seed=6)
    for is_causal in (False, True):
        fast = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
        slow = core.scaled_dot_product_attention(q, k, v, is_causal=is_causal).context
        assert torch.allclose(fast, slow, atol=1e-5)
    x = torch.randn(2, 7, 8, generator=gen(7)).to(device)
    for scaled in (True, False):
        traced = core.MultiHeadAttention(8, 8, 7, 0.0, 2, generator=gen(8), scale=None if scaled else 1.0)
        fused = core.MultiHeadAttention(8, 8, 7, 0.0, 2, generator=gen(8), fused=True, scale=None if scaled else 1.0)
        traced, fused = traced.to(device).eval(), fused.to(device).eval()
        assert torch.allclose(traced(x), fused(x), atol=1e-5)


@pytest.mark.parametrize("num_heads", [1, 2, 4])
def test_multihead_matches_torch_multiheadattention(device: torch.device, num_heads: int) -> None:
    d = 8
    mha = core.MultiHeadAttention(d, d, 10, 0.0, num_heads, generator=gen(11)).to(device).eval()
    reference = core.torch_multihead_from(mha).to(device).eval()
    x = torch.randn(3, 10, d, generator=gen(12)).to(device)
    future = torch.triu(torch.ones(10, 10, dtype=torch.bool, device=device), diagonal=1)
    # nn.MultiheadAttention's boolean mask means True = NOT allowed (SDPA's is the opposite).
    out, weights = reference(x, x, x, attn_mask=future, need_weights=True, average_attn_weights=False)
    trace = mha.trace(x)
    assert torch.allclose(trace.output, out, atol=1e-5)
    assert weights.shape == trace.weights.shape == (3, num_heads, 10, 10)
    assert torch.allclose(trace.weights, weights, atol=1e-5)
    assert torch.allclose(mha(x), out, atol=1e-5)


def test_multihead_fused_flag_equals_reference(device: torch.device) -> None:
    mha = core.MultiHeadAttention(12, 12, 9, 0.0, 3, qkv_bias=True, generator=gen(2)).to(device).eval()
    x = torch.randn(2, 9, 12, generator=gen(3)).to(device)
    reference = mha(x)
    mha.fused = True
    assert torch.allclose(mha(x), reference, atol=1e-5)


def test_causal_fused_flag_equals_reference(device: torch.device) -> None:
    ca = core.CausalAttention(3, 4, 6, 0.0, generator=gen(2)).to(device).eval()
    x = torch.rand(2, 6, 3, generator=gen(3)).to(device)
    fused = core.CausalAttention(3, 4, 6, 0.0, generator=gen(2), fused=True).to(device).eval()
    assert torch.allclose(ca(x), fused(x), atol=1e-6)
    assert torch.allclose(ca(x), ca.trace(x).output, atol=1e-6)


def test_cross_attention_with_its_own_key_value_width_matches_multihead_kdim_vdim() -> None:
    # Only the projected widths of queries and keys must agree: x_2 is 7 wide, x_1 is 4 wide.
    d_in, d_in_kv, d_k = 4, 7, 4
    ours = core.CrossAttention(d_in, d_k, d_k, d_in_kv=d_in_kv, generator=gen(3))
    x_1, x_2 = torch.rand(5, d_in, generator=gen(4)), torch.rand(9, d_in_kv, generator=gen(5))
    trace = ours.trace(x_1, x_2)
    assert trace.weights.shape == (5, 9) and trace.output.shape == (5, d_k)
    theirs = torch.nn.MultiheadAttention(d_k, 1, bias=False, kdim=d_in_kv, vdim=d_in_kv)
    with torch.no_grad():
        theirs.q_proj_weight.copy_(ours.W_query)  # (d_k, d_in): the same layout as the article's
        theirs.k_proj_weight.copy_(ours.W_key)  # (d_k, d_in_kv)
        theirs.v_proj_weight.copy_(ours.W_value)
        theirs.out_proj.weight.copy_(torch.eye(d_k))
        output, weights = theirs(x_1, x_2, x_2, need_weights=True)
    assert torch.allclose(trace.weights, weights, atol=1e-6)
    assert torch.allclose(trace.output, output, atol=1e-6)


def test_cross_attention_without_d_in_kv_draws_as_before() -> None:
    same = core.CrossAttention(16, 24, 28, generator=gen(123))
    explicit = core.CrossAttention(16, 24, 28, d_in_kv=16, generator=gen(123))
    assert all(torch.equal(a, b) for a, b in zip(same.parameters(), explicit.parameters(), strict=True))
    with pytest.raises(ValueError, match="d_in=16"):
        same.trace(torch.rand(3, 16), torch.rand(3, 5))
