"""The attention modules of the book chapter, in the order it builds them.

Class names, constructor arguments, attribute names and the order of random draws
follow the book, so seeding torch with 123 (as the book does) before `SelfAttention_v1(3, 2)` gives the book's
numbers. Each class also takes a keyword-only `generator`: with one, construction
draws only from that generator and never touches torch's global RNG (the hosted app
serves many students from one process; a global seed would leak between them).

`forward(x)` returns the context vectors as in the book; `trace(x)` returns an
`AttentionTrace` with every intermediate.

Shape legend: b = batch, T = tokens, d_in = input width, d_out = output width,
h = heads, hd = head_dim = d_out // h.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import cast

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import init

from core.attention.functional import AttentionTrace, scaled_dot_product_attention


def make_linear(d_in: int, d_out: int, bias: bool, generator: torch.Generator | None = None) -> nn.Linear:
    """An `nn.Linear` initialised exactly like PyTorch's default, drawing from `generator`.

    Built on the meta device first so that construction itself draws nothing; then the
    weight and bias are filled in nn.Linear's own order (weight, then bias). The parameters are
    plain new tensors, not `to_empty()`: that goes through PyTorch's Python reference ops for
    meta tensors, far slower, and a page builds up to a dozen layers per rerun (bench/NOTES.md).
    """
    layer = nn.Linear(d_in, d_out, bias=bias, device="meta")
    layer.weight = nn.Parameter(torch.empty(d_out, d_in))  # (d_out, d_in), as nn.Linear stores it
    if bias:
        layer.bias = nn.Parameter(torch.empty(d_out))
    init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
    if layer.bias is not None:
        bound = 1 / math.sqrt(d_in) if d_in > 0 else 0.0
        init.uniform_(layer.bias, -bound, bound, generator=generator)
    return layer


def _check_dims(**dims: int) -> None:
    for name, value in dims.items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}.")


def _check_dropout(dropout: float) -> None:
    if not (isinstance(dropout, (int, float)) and 0.0 <= float(dropout) < 1.0):
        raise ValueError(f"The dropout rate must be at least 0 and below 1 (it is a probability), got {dropout}.")


def _check_input(x: torch.Tensor, d_in: int, context_length: int | None = None) -> None:
    if x.dim() < 2 or x.shape[-1] != d_in:
        raise ValueError(f"Each token must be a vector of width d_in={d_in}; got input of shape {tuple(x.shape)}.")
    if context_length is not None and x.shape[-2] > context_length:
        raise ValueError(
            f"The input has {x.shape[-2]} tokens, but this module was built for at most "
            f"context_length={context_length}. Use fewer tokens or a longer context."
        )


class SelfAttention_v1(nn.Module):
    """Self-attention with weight matrices drawn uniformly from [0, 1): x @ W."""

    def __init__(self, d_in: int, d_out: int, *, generator: torch.Generator | None = None):
        super().__init__()
        _check_dims(d_in=d_in, d_out=d_out)
        self.d_out = d_out
        self.W_query = nn.Parameter(torch.rand(d_in, d_out, generator=generator))  # (d_in, d_out)
        self.W_key = nn.Parameter(torch.rand(d_in, d_out, generator=generator))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out, generator=generator))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.trace(x).output

    def trace(
        self, x: torch.Tensor, *, generator: torch.Generator | None = None, scale: float | None = None
    ) -> AttentionTrace:
        _check_input(x, self.W_query.shape[0])
        queries = x @ self.W_query  # (T, d_in) @ (d_in, d_out) -> (T, d_out)
        keys = x @ self.W_key
        values = x @ self.W_value
        return scaled_dot_product_attention(queries, keys, values, scale=scale)


class SelfAttention_v2(nn.Module):
    """Self-attention with `nn.Linear` projections (PyTorch's default initialisation)."""

    def __init__(
        self,
        d_in: int,
        d_out: int,
        qkv_bias: bool = False,
        *,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        _check_dims(d_in=d_in, d_out=d_out)
        self.d_out = d_out
        self.W_query = make_linear(d_in, d_out, qkv_bias, generator)
        self.W_key = make_linear(d_in, d_out, qkv_bias, generator)
        self.W_value = make_linear(d_in, d_out, qkv_bias, generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.trace(x).output

    def trace(
        self, x: torch.Tensor, *, generator: torch.Generator | None = None, scale: float | None = None
    ) -> AttentionTrace:
        _check_input(x, self.W_query.in_features)
        queries = self.W_query(x)  # (T, d_out)
        keys = self.W_key(x)
        values = self.W_value(x)
        return scaled_dot_product_attention(queries, keys, values, scale=scale)


class CausalAttention(nn.Module):
    """Single-head attention that cannot look ahead, with dropout on the weights."""

    mask: torch.Tensor  # a registered buffer: nn.Module's __getattr__ alone would type it Tensor | Module

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        qkv_bias: bool = False,
        *,
        generator: torch.Generator | None = None,
        fused: bool = False,
    ):
        super().__init__()
        _check_dims(d_in=d_in, d_out=d_out, context_length=context_length)
        _check_dropout(dropout)
        self.d_out = d_out
        self.context_length = context_length
        self.fused = fused  # True: forward() uses PyTorch's fused kernel
        self.W_query = make_linear(d_in, d_out, qkv_bias, generator)
        self.W_key = make_linear(d_in, d_out, qkv_bias, generator)
        self.W_value = make_linear(d_in, d_out, qkv_bias, generator)
        self.dropout = nn.Dropout(dropout)
        # 1 above the diagonal = "this key is in the future" (the book's convention).
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(x, self.W_query.in_features, self.context_length)
        if self.fused:  # the fast path: PyTorch's fused kernel (tests/unit/test_against_pytorch.py ties the two)
            dropout_p = self.dropout.p if self.training else 0.0
            queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)  # (b, T, d_out) each
            return F.scaled_dot_product_attention(queries, keys, values, dropout_p=dropout_p, is_causal=True)
        return self.trace(x).context  # the readable path; the book's own listing is core/recipes/causal_dropout.py

    def trace(
        self, x: torch.Tensor, *, generator: torch.Generator | None = None, scale: float | None = None
    ) -> AttentionTrace:
        _check_input(x, self.W_query.in_features, self.context_length)
        num_tokens = x.shape[-2]
        allowed = ~self.mask.bool()[:num_tokens, :num_tokens]  # (T, T), True = may attend
        dropout_p = self.dropout.p if self.training else 0.0
        return scaled_dot_product_attention(
            self.W_query(x),
            self.W_key(x),
            self.W_value(x),
            attn_mask=allowed,
            dropout_p=dropout_p,
            scale=scale,
            generator=generator,
        )


def _check_heads(d_out: int, num_heads: int) -> None:
    _check_dims(num_heads=num_heads)
    if d_out % num_heads != 0:
        raise ValueError(
            f"d_out ({d_out}) must be divisible by the number of heads ({num_heads}) so that "
            f"every head gets the same width; try d_out = {num_heads * max(1, d_out // num_heads)}."
        )


class MultiHeadAttentionWrapper(nn.Module):
    """Several `CausalAttention` heads side by side; outputs concatenated (d_out * h wide)."""

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        qkv_bias: bool = False,
        *,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        _check_dims(num_heads=num_heads)
        self.heads = nn.ModuleList(
            [
                CausalAttention(d_in, d_out, context_length, dropout, qkv_bias, generator=generator)
                for _ in range(num_heads)
            ]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([head(x) for head in self.heads], dim=-1)  # (b, T, d_out * h)

    def trace(
        self, x: torch.Tensor, *, generator: torch.Generator | None = None, scale: float | None = None
    ) -> AttentionTrace:
        heads = cast(Iterable[CausalAttention], self.heads)  # nn.ModuleList yields plain Modules
        traces = [head.trace(x, generator=generator, scale=scale) for head in heads]
        head_axis = x.dim() - 2  # heads go just before the token axis: (b, h, T, ...)

        def stack(name: str) -> torch.Tensor:
            return torch.stack([getattr(t, name) for t in traces], dim=head_axis)

        dropout_masks = [t.dropout_mask for t in traces]
        return AttentionTrace(
            queries=stack("queries"),  # (b, h, T, d_out)
            keys=stack("keys"),
            values=stack("values"),
            scores=stack("scores"),  # (b, h, T, T)
            scaled_scores=stack("scaled_scores"),
            masked_scores=stack("masked_scores"),
            weights=stack("weights"),
            dropped_weights=stack("dropped_weights"),
            context=stack("context"),  # (b, h, T, d_out)
            mask=traces[0].mask,
            dropout_mask=None if dropout_masks[0] is None else stack("dropout_mask"),
            scale=traces[0].scale,
            output=torch.cat([t.context for t in traces], dim=-1),  # (b, T, d_out * h)
        )


class MultiHeadAttention(nn.Module):
    """One set of projections split into heads, attention per head, then `out_proj`."""

    mask: torch.Tensor  # a registered buffer

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        qkv_bias: bool = False,
        *,
        generator: torch.Generator | None = None,
        fused: bool = False,
        scale: float | None = None,
    ):
        super().__init__()
        _check_dims(d_in=d_in, d_out=d_out, context_length=context_length)
        _check_heads(d_out, num_heads)
        _check_dropout(dropout)
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.context_length = context_length
        self.fused = fused  # True: forward() uses PyTorch's fused kernel
        # The factor on q.k, as PyTorch's `scale`: None = 1/sqrt(head_dim); 1.0 = no scaling
        # (the training lab switches it off to show what the scaling does to learning).
        self.scale = scale
        self.W_query = make_linear(d_in, d_out, qkv_bias, generator)
        self.W_key = make_linear(d_in, d_out, qkv_bias, generator)
        self.W_value = make_linear(d_in, d_out, qkv_bias, generator)
        self.out_proj = make_linear(d_out, d_out, True, generator)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def split_heads(self, t: torch.Tensor) -> torch.Tensor:
        """(b, T, d_out) -> (b, h, T, hd): one slice of the width per head."""
        b, num_tokens, _ = t.shape
        t = t.view(b, num_tokens, self.num_heads, self.head_dim)  # (b, T, h, hd)
        return t.transpose(1, 2)  # (b, h, T, hd)

    def merge_heads(self, t: torch.Tensor) -> torch.Tensor:
        """(b, h, T, hd) -> (b, T, d_out): heads side by side again."""
        b, _, num_tokens, _ = t.shape
        t = t.transpose(1, 2)  # (b, T, h, hd)
        return t.contiguous().view(b, num_tokens, self.d_out)  # (b, T, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fused:
            return self._forward_fused(x)
        return self.trace(x).output

    def _forward_fused(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(x, self.W_query.in_features, self.context_length)
        queries = self.split_heads(self.W_query(x))  # (b, h, T, hd)
        keys = self.split_heads(self.W_key(x))
        values = self.split_heads(self.W_value(x))
        dropout_p = self.dropout.p if self.training else 0.0
        context = F.scaled_dot_product_attention(
            queries, keys, values, dropout_p=dropout_p, is_causal=True, scale=self.scale
        )  # (b, h, T, hd)
        return self.out_proj(self.merge_heads(context))  # (b, T, d_out)

    def trace(
        self, x: torch.Tensor, *, generator: torch.Generator | None = None, scale: float | None = None
    ) -> AttentionTrace:
        _check_input(x, self.W_query.in_features, self.context_length)
        if x.dim() != 3:
            raise ValueError(f"MultiHeadAttention expects (batch, tokens, d_in), got {tuple(x.shape)}.")
        num_tokens = x.shape[1]
        queries = self.split_heads(self.W_query(x))  # (b, h, T, hd)
        keys = self.split_heads(self.W_key(x))
        values = self.split_heads(self.W_value(x))
        allowed = ~self.mask.bool()[:num_tokens, :num_tokens]  # (T, T)
        dropout_p = self.dropout.p if self.training else 0.0
        trace = scaled_dot_product_attention(
            queries,
            keys,
            values,
            attn_mask=allowed,
            dropout_p=dropout_p,
            scale=self.scale if scale is None else scale,
            generator=generator,
        )
        output = self.out_proj(self.merge_heads(trace.context))  # (b, T, d_out)
        return _with_output(trace, output)


class SimpleAverageSelfAttention(nn.Module):
    """The decoder blog's baseline: every token averages itself and all earlier tokens equally.

    The scores are all zero, so after the causal -inf mask the softmax gives 1/(i+1)
    to each of the first i+1 tokens. Nothing is learned.
    """

    causal_mask: torch.Tensor  # a registered buffer

    def __init__(self, chunk_size: int):
        super().__init__()
        _check_dims(chunk_size=chunk_size)
        self.register_buffer("causal_mask", torch.tril(torch.ones(chunk_size, chunk_size)))

    def attention_weights(self, num_tokens: int) -> torch.Tensor:
        """(T, T) lower-triangular rows of 1/(i+1)."""
        zeros = torch.zeros(num_tokens, num_tokens, device=self.causal_mask.device)
        future = self.causal_mask[:num_tokens, :num_tokens] == 0
        return torch.softmax(zeros.masked_fill(future, float("-inf")), dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(x, x.shape[-1], self.causal_mask.shape[0])
        return self.attention_weights(x.shape[-2]) @ x  # (T, T) @ (b, T, d) -> (b, T, d)


class SingleSelfAttentionHead(nn.Module):
    """The decoder blog's causal head: `key`, `query`, `value` layers created in that order."""

    causal_mask: torch.Tensor  # a registered buffer

    def __init__(
        self,
        chunk_size: int,
        token_emb_dim: int,
        head_size: int,
        *,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        _check_dims(chunk_size=chunk_size, token_emb_dim=token_emb_dim, head_size=head_size)
        self.head_size = head_size
        self.key = make_linear(token_emb_dim, head_size, False, generator)
        self.query = make_linear(token_emb_dim, head_size, False, generator)
        self.value = make_linear(token_emb_dim, head_size, False, generator)
        self.register_buffer("causal_mask", torch.tril(torch.ones(chunk_size, chunk_size)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.trace(x).output

    def trace(
        self, x: torch.Tensor, *, generator: torch.Generator | None = None, scale: float | None = None
    ) -> AttentionTrace:
        _check_input(x, self.key.in_features, self.causal_mask.shape[0])
        num_tokens = x.shape[-2]
        allowed = self.causal_mask[:num_tokens, :num_tokens].bool()  # 1 = may attend here
        scale = self.head_size**-0.5 if scale is None else scale
        return scaled_dot_product_attention(self.query(x), self.key(x), self.value(x), attn_mask=allowed, scale=scale)


class CrossAttention(nn.Module):
    """The self-attention article's attention between two sequences: queries from x_1, keys/values from x_2.

    Weights use the article's layout, (d_out, d_in), drawn with `torch.rand` in the
    order query, key, value; q = W_query x. d_v may differ from d_k, and x_2 may have
    a different number of tokens from x_1. x_2 may also have its own embedding width
    `d_in_kv` (as `nn.MultiheadAttention`'s kdim/vdim allow): only the projected widths
    of queries and keys (d_k) must agree. Left out, d_in_kv = d_in, as in the article.

    Shapes: x_1 (T1, d_in), x_2 (T2, d_in_kv) -> weights (T1, T2), output (T1, d_v).
    """

    def __init__(
        self,
        d_in: int,
        d_out_kq: int,
        d_out_v: int,
        *,
        d_in_kv: int | None = None,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        d_in_kv = d_in if d_in_kv is None else d_in_kv
        _check_dims(d_in=d_in, d_out_kq=d_out_kq, d_out_v=d_out_v, d_in_kv=d_in_kv)
        self.W_query = nn.Parameter(torch.rand(d_out_kq, d_in, generator=generator))  # (d_k, d_in)
        self.W_key = nn.Parameter(torch.rand(d_out_kq, d_in_kv, generator=generator))  # (d_k, d_in_kv)
        self.W_value = nn.Parameter(torch.rand(d_out_v, d_in_kv, generator=generator))  # (d_v, d_in_kv)

    def forward(self, x_1: torch.Tensor, x_2: torch.Tensor) -> torch.Tensor:
        return self.trace(x_1, x_2).output

    def trace(self, x_1: torch.Tensor, x_2: torch.Tensor, *, scale: float | None = None) -> AttentionTrace:
        _check_input(x_1, self.W_query.shape[1])
        _check_input(x_2, self.W_key.shape[1])
        queries = self.W_query.matmul(x_1.T).T  # (d_k, d_in) @ (d_in, T1) -> (d_k, T1) -> (T1, d_k)
        keys = self.W_key.matmul(x_2.T).T  # (d_k, d_in_kv) @ (d_in_kv, T2) -> (T2, d_k)
        values = self.W_value.matmul(x_2.T).T  # (T2, d_v)
        return scaled_dot_product_attention(queries, keys, values, scale=scale)


def _with_output(trace: AttentionTrace, output: torch.Tensor) -> AttentionTrace:
    from dataclasses import replace

    return replace(trace, output=output)


# ----------------------------------------------------------------------------------------
# Weight copies that make two different-looking modules compute the same thing.
# ----------------------------------------------------------------------------------------


@torch.no_grad()
def v1_from_v2(v2: SelfAttention_v2) -> SelfAttention_v1:
    """A `SelfAttention_v1` with v2's weights: nn.Linear stores W^T, so transpose."""
    d_out, d_in = v2.W_query.weight.shape
    v1 = SelfAttention_v1(d_in, d_out, generator=torch.Generator().manual_seed(0))
    v1.W_query.copy_(v2.W_query.weight.T)  # (d_out, d_in) -> (d_in, d_out)
    v1.W_key.copy_(v2.W_key.weight.T)
    v1.W_value.copy_(v2.W_value.weight.T)
    return v1


@torch.no_grad()
def multihead_from_wrapper(wrapper: MultiHeadAttentionWrapper) -> MultiHeadAttention:
    """A `MultiHeadAttention` that equals `wrapper`: head weights stacked, identity out_proj.

    Head i of the wrapper becomes rows [i*hd, (i+1)*hd) of each projection, so the
    split-heads view slices out exactly that head again.
    """
    first = cast(CausalAttention, wrapper.heads[0])  # nn.ModuleList indexes to a plain Module
    head_dim, d_in = first.W_query.weight.shape
    num_heads = len(wrapper.heads)
    d_out = head_dim * num_heads
    qkv_bias = first.W_query.bias is not None
    mha = MultiHeadAttention(
        d_in,
        d_out,
        first.context_length,
        first.dropout.p,
        num_heads,
        qkv_bias,
        generator=torch.Generator().manual_seed(0),
    )
    for name in ("W_query", "W_key", "W_value"):
        target = getattr(mha, name)
        target.weight.copy_(torch.cat([getattr(h, name).weight for h in wrapper.heads], dim=0))
        if qkv_bias:
            target.bias.copy_(torch.cat([getattr(h, name).bias for h in wrapper.heads], dim=0))
    mha.out_proj.weight.copy_(torch.eye(d_out))
    mha.out_proj.bias.zero_()
    return mha


@torch.no_grad()
def torch_multihead_from(mha: MultiHeadAttention) -> nn.MultiheadAttention:
    """PyTorch's own `nn.MultiheadAttention` (batch_first) with `mha`'s weights.

    Needs d_in == d_out (PyTorch's module projects queries from embed_dim inputs).
    Careful: its boolean attn_mask means True = NOT allowed, the opposite of SDPA.
    """
    d_out, d_in = mha.W_query.weight.shape
    if d_in != d_out:
        raise ValueError("nn.MultiheadAttention needs d_in == d_out for self-attention.")
    reference = nn.MultiheadAttention(
        d_out,
        mha.num_heads,
        dropout=mha.dropout.p,
        bias=True,
        batch_first=True,
        device="meta",
    ).to_empty(device=mha.W_query.weight.device)
    weights = [mha.W_query.weight, mha.W_key.weight, mha.W_value.weight]
    reference.in_proj_weight.copy_(torch.cat(weights, dim=0))  # (3 * d_out, d_out)
    biases: list[torch.Tensor] = [
        lin.bias if lin.bias is not None else torch.zeros(d_out) for lin in (mha.W_query, mha.W_key, mha.W_value)
    ]
    reference.in_proj_bias.copy_(torch.cat(biases))
    reference.out_proj.weight.copy_(mha.out_proj.weight)
    reference.out_proj.bias.copy_(mha.out_proj.bias)
    return reference


def count_parameters(module: nn.Module) -> int:
    """Number of trainable numbers in `module` (buffers such as masks do not count)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def multihead_parameter_count(d_in: int, d_out: int, qkv_bias: bool = False) -> int:
    """Parameters of one MultiHeadAttention layer, by formula (no tensors are built).

    3 projections of d_in x d_out (+ d_out biases each if qkv_bias), plus out_proj
    d_out x d_out + d_out. GPT-2 small (768, 768): 2,360,064.
    """
    projections = 3 * (d_in * d_out + (d_out if qkv_bias else 0))
    return projections + d_out * d_out + d_out


def draw_qkv_weights(
    d_in: int,
    d_out: int,
    *,
    distribution: str = "rand",
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """W_q, W_k, W_v of shape (d_in, d_out), drawn in that order as the notebooks do.

    distribution="rand" (uniform [0, 1), the trainable-weights notebook) or "randn" (standard normal,
    the attention notebook).
    """
    _check_dims(d_in=d_in, d_out=d_out)
    draw = {"rand": torch.rand, "randn": torch.randn}.get(distribution)
    if draw is None:
        raise ValueError(f"distribution must be 'rand' or 'randn', got {distribution!r}.")
    w_q, w_k, w_v = (draw(d_in, d_out, generator=generator) for _ in range(3))  # drawn in this order
    return w_q, w_k, w_v
