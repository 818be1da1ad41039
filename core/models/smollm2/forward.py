"""One forward pass of the decoder over a sequence, with the causal grouped-query attention of each layer,
an optional KV cache of the tokens already seen, and heads switched off on the way (`Ablation`).

Shape legend as in the package's docstring: T tokens, S tokens already in the cache, D hidden width,
H query heads, G key/value heads, d head width, V vocabulary, L layers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import torch
import torch.nn.functional as F

from core.attention.functional import scaled_dot_product_attention
from core.models.smollm2.loading import DecoderConfig, LayerWeights, SmolLM2, TextError, token_texts
from core.models.smollm2.operations import feed_forward, linear, rms_norm, rope_angles, rotate_pairs, unembed


class AttentionPath(Enum):
    REFERENCE = "reference"  # scores, mask and softmax written out: the weights can be returned
    FAST = "fast"  # torch's fused scaled_dot_product_attention: no weights


class AblationMode(Enum):
    ZERO = "zero"  # the head's output set to 0
    MEAN = "mean"  # the head's output replaced by its mean over the sequence's positions
    UNIFORM = "uniform"  # the head's pattern replaced by equal weights on every visible token


@dataclass(frozen=True)
class Ablation:
    """Heads switched off in a forward pass: (layer, head) pairs, and how."""

    heads: frozenset[tuple[int, int]]
    mode: AblationMode = AblationMode.ZERO

    def in_layer(self, layer: int) -> list[int]:
        return sorted(head for (lay, head) in self.heads if lay == layer)


@dataclass(frozen=True)
class KVCache:
    """Every layer's keys (after RoPE) and values of the tokens seen so far.

    keys[l], values[l]: (G, S, d) each: 3 key/value heads, not 9, which is what grouped-query
    attention saves. Immutable: a forward pass returns a longer cache.
    """

    keys: tuple[torch.Tensor, ...]
    values: tuple[torch.Tensor, ...]

    @property
    def length(self) -> int:
        return 0 if not self.keys else int(self.keys[0].shape[1])

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))


@dataclass(frozen=True)
class ForwardOutput:
    """What one forward pass produced.

    token_ids    (T,): the tokens fed in this pass (after any cached ones)
    logits       (T, V) float32, or (1, V) for the last position only
    attentions   (L, H, T, S + T) or None: every head's weights (queries x keys), reference path only
    head_outputs (L, H, T, d) or None: each head's weighted sum of values, before the output matrix
    cache        the keys and values of the cached tokens and these ones, or None when not asked
    """

    token_ids: torch.Tensor
    tokens: tuple[str, ...]
    logits: torch.Tensor
    attentions: torch.Tensor | None
    head_outputs: torch.Tensor | None
    cache: KVCache | None


def _ablate(
    heads_out: torch.Tensor, values: torch.Tensor, heads: Sequence[int], mode: AblationMode, offset: int
) -> torch.Tensor:
    """heads_out (H, T, d) with the listed heads' outputs replaced; values (H, S + T, d) for UNIFORM."""
    heads_out = heads_out.clone()
    for head in heads:
        if mode is AblationMode.ZERO:
            heads_out[head] = 0.0
        elif mode is AblationMode.MEAN:
            heads_out[head] = heads_out[head].mean(dim=0, keepdim=True)  # (1, d), broadcast over T
        else:  # UNIFORM: query at position p averages the values of tokens 0..p
            counts = torch.arange(1, values.shape[1] + 1, device=values.device, dtype=values.dtype)[:, None]
            running_mean = values[head].cumsum(dim=0) / counts  # (S + T, d)
            heads_out[head] = running_mean[offset:]  # (T, d): this pass's queries
    return heads_out


def attention(
    config: DecoderConfig,
    layer: LayerWeights,
    x: torch.Tensor,
    positions: torch.Tensor,
    *,
    past: tuple[torch.Tensor, torch.Tensor] | None = None,
    path: AttentionPath = AttentionPath.REFERENCE,
    ablated: Sequence[int] = (),
    mode: AblationMode = AblationMode.ZERO,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Causal grouped-query attention of one layer.

    x (T, D) normalised, positions (T,), after `past`'s S keys and values (G, S, d) each. `ablated`: the
    heads of this layer switched off, in `mode`. Returns (output (T, D), weights (H, T, S + T) or None,
    head outputs (H, T, d), this layer's keys and values (G, S + T, d) for the cache).
    """
    tokens = x.shape[0]
    angles = rope_angles(positions, config.head_dim, config.rope_base)  # (T, d / 2)
    queries = linear(x, layer.query).view(tokens, config.num_heads, config.head_dim).transpose(0, 1)  # (H, T, d)
    keys = linear(x, layer.key).view(tokens, config.num_kv_heads, config.head_dim).transpose(0, 1)  # (G, T, d)
    values = linear(x, layer.value).view(tokens, config.num_kv_heads, config.head_dim).transpose(0, 1)  # (G, T, d)
    queries, keys = rotate_pairs(queries, angles), rotate_pairs(keys, angles)  # position enters here only
    if past is not None:  # the cached tokens' keys and values come first
        keys, values = torch.cat((past[0], keys), dim=1), torch.cat((past[1], values), dim=1)  # (G, S + T, d)
    offset = keys.shape[1] - tokens  # S: cached tokens before this pass's first query
    # Scores, softmax and the weighted sum run in float64 and come back as float32. Why: a float32
    # sum rounds differently with the row's length (T keys with the future masked, or S + 1 after a
    # cache), and the next layer's bfloat16 input turns that last-bit difference into a visible one
    # (logits 0.2-0.5 apart with and without the cache). In float64 the difference is far below
    # float32's last bit, so both ways give the same float32 numbers: the cache changes no logit.
    queries = queries.double()
    # Grouped-query attention: each key/value head serves group_size query heads (h reads h // 3).
    shared_keys = keys.double().repeat_interleave(config.group_size, dim=0)  # (H, S + T, d)
    shared_values = values.double().repeat_interleave(config.group_size, dim=0)  # (H, S + T, d)
    # Query at position offset + t sees keys 0 .. offset + t: True marks a future key, hidden.
    future = torch.ones(tokens, offset + tokens, dtype=torch.bool, device=x.device).triu(offset + 1)  # (T, S + T)
    weights = None
    if path is AttentionPath.REFERENCE:
        # Lesson 4's causal attention, step by step, by the same function the lessons show (grouped:
        # enable_gqa shares each key/value head among its query heads, as the lines above do by hand).
        trace = scaled_dot_product_attention(
            queries, keys.double(), values.double(), attn_mask=~future, enable_gqa=True
        )
        weights, heads_out = trace.weights, trace.context  # (H, T, S + T), (H, T, d)
    else:
        # Without a cache the mask is the plain causal one; one new query sees every key. Only a
        # block of queries after a cache needs the explicit mask (torch's CPU kernel is slow with one).
        if offset == 0:
            heads_out = F.scaled_dot_product_attention(queries, shared_keys, shared_values, is_causal=tokens > 1)
        elif tokens == 1:
            heads_out = F.scaled_dot_product_attention(queries, shared_keys, shared_values)  # (H, 1, d)
        else:
            heads_out = F.scaled_dot_product_attention(
                queries, shared_keys, shared_values, attn_mask=~future
            )  # (H, T, d)
    heads_out = heads_out.float()  # (H, T, d), back to float32
    weights = None if weights is None else weights.float()
    if ablated:
        heads_out = _ablate(heads_out, shared_values.float(), ablated, mode, offset)
    merged = heads_out.transpose(0, 1).reshape(tokens, config.num_heads * config.head_dim)  # (T, H * d)
    return linear(merged, layer.output), weights, heads_out, (keys, values)


def forward(
    model: SmolLM2,
    token_ids: torch.Tensor,
    *,
    path: AttentionPath = AttentionPath.REFERENCE,
    return_attentions: bool = False,
    return_head_outputs: bool = False,
    last_logits_only: bool = False,
    ablation: Ablation | None = None,
    cache: KVCache | None = None,
    use_cache: bool = False,
) -> ForwardOutput:
    """Run the decoder on token_ids (T,), after the tokens already in `cache` (if any).

    return_attentions needs the reference path. use_cache returns the keys and values of every
    token seen (the cache's and these) for the next call.
    """
    config = model.config
    if return_attentions and path is not AttentionPath.REFERENCE:
        raise ValueError("Attention weights come from the reference path only (the fused kernel keeps none).")
    past_length = 0 if cache is None else cache.length
    if token_ids.ndim != 1 or token_ids.numel() == 0:
        raise TextError("Give a 1-D sequence of at least one token id.")
    if past_length + token_ids.numel() > config.context_length:
        raise TextError(f"At most {config.context_length} tokens fit the model's context.")
    ids = token_ids.to(model.device)
    positions = torch.arange(past_length, past_length + ids.numel(), device=model.device)  # (T,)
    attentions: list[torch.Tensor] = []  # (H, T, S + T) per layer
    head_outputs: list[torch.Tensor] = []  # (H, T, d) per layer
    new_keys: list[torch.Tensor] = []
    new_values: list[torch.Tensor] = []
    with torch.inference_mode():
        x = model.weights.embeddings[ids].float()  # (T, D): the residual stream, float32
        for index, layer in enumerate(model.weights.layers):
            past = None if cache is None else (cache.keys[index], cache.values[index])
            normed = rms_norm(x, layer.attention_norm, config.rms_norm_eps)
            attended, weights, heads_out, (keys, values) = attention(
                config,
                layer,
                normed,
                positions,
                past=past,
                path=path,
                ablated=() if ablation is None else ablation.in_layer(index),
                mode=AblationMode.ZERO if ablation is None else ablation.mode,
            )
            x = x + attended
            x = x + feed_forward(layer, rms_norm(x, layer.mlp_norm, config.rms_norm_eps))
            if return_attentions and weights is not None:  # the reference path (checked above) keeps them
                attentions.append(weights)
            if return_head_outputs and heads_out is not None:
                head_outputs.append(heads_out)
            if use_cache:
                new_keys.append(keys)
                new_values.append(values)
        x = rms_norm(x[-1:] if last_logits_only else x, model.weights.final_norm, config.rms_norm_eps)
        logits = unembed(model, x)  # (T, V) or (1, V): tied unembedding
    return ForwardOutput(
        token_ids=token_ids,
        tokens=token_texts(model, token_ids),
        logits=logits,
        attentions=torch.stack(attentions) if return_attentions else None,  # (L, H, T, S + T)
        head_outputs=torch.stack(head_outputs) if return_head_outputs else None,  # (L, H, T, d)
        cache=KVCache(tuple(new_keys), tuple(new_values)) if use_cache else None,
    )


def kv_cache_bytes_per_token(config: DecoderConfig, kv_heads: int | None = None, bytes_per_number: int = 4) -> int:
    """Bytes the cache grows by per token: keys and values, every layer, `kv_heads` heads of d numbers.

    With this model's 3 key/value heads in float32: 2 x 30 x 3 x 64 x 4 = 46,080 bytes; with one
    key/value head per query head (9) it would be three times that.
    """
    heads = config.num_kv_heads if kv_heads is None else kv_heads
    return 2 * config.num_layers * heads * config.head_dim * bytes_per_number
