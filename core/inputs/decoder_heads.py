"""One head of SmolLM2-135M taken apart into a `HeadInput` (core/inputs/weights.py): the decoder as a
weight source, the way core/inputs/pretrained_heads.py takes the encoder apart.

What a decoder head reads differs from an encoder head in three ways, all kept here:
- x is the residual stream entering the layer *after* the layer's RMSNorm (the attention reads the
  normalised stream; a Llama layer has no biases, so b_q = b_k = b_v = 0);
- query head h shares its key and value head with two others (grouped-query attention: KV head h // 3),
  so W_k and W_v are the columns of KV head h // 3;
- positions enter by rotating q and k pair by pair (RoPE), not by adding to x: `rope_base` tells
  `head_trace` to rotate, with the model's base (100,000).
The model was trained with the causal mask, so its own weights are `head_trace(..., causal=True)`;
tests/unit/test_decoder_heads.py checks them against our forward pass.

The sidebar's Weights control offers it as `?weights=decoder` on lessons 2, 4 and 5.

Shape legend: T = tokens, D = 576 (hidden width), d = 64 (head width), H = 9 query heads, G = 3 KV heads.
"""

from __future__ import annotations

import math

import torch

from core.inputs.examples import unique_labels
from core.inputs.weights import MODELS, HeadInput, Provenance, WeightSource, head_trace
from core.models import smollm2

DECODER_SHAPE = MODELS[WeightSource.DECODER]


def check_head(model: smollm2.SmolLM2, layer: int, head: int) -> None:
    config = model.config
    if not (0 <= layer < config.num_layers and 0 <= head < config.num_heads):
        raise ValueError(
            f"SmolLM2-135M has layers 0-{config.num_layers - 1} and heads 0-{config.num_heads - 1}; "
            f"got layer {layer}, head {head}."
        )


def x_at_w(matrix: smollm2.Matrix) -> torch.Tensor:
    """A stored (out, in) matrix as the (in, out) float32 matrix W of x @ W (lesson 2's layout).

    A 4-bit matrix is read back through the model's own product: identity @ Wᵀ = Wᵀ, exactly the
    numbers the model multiplies by (dequantized by the same kernel).
    """
    if isinstance(matrix, smollm2.PackedQ4):
        identity = torch.eye(matrix.shape[1])  # (in, in)
        return smollm2.linear(identity, matrix)  # (in, out)
    return matrix.float().T.contiguous()  # (out, in) -> (in, out)


def hidden_entering(model: smollm2.SmolLM2, token_ids: torch.Tensor, layer: int) -> torch.Tensor:
    """The normalised residual stream that `layer`'s attention reads: (T,) ids -> (T, D)."""
    config = model.config
    positions = torch.arange(token_ids.numel())  # (T,)
    with torch.inference_mode():
        x = model.weights.embeddings[token_ids].float()  # (T, D)
        for weights in model.weights.layers[:layer]:  # the layers before it, in full
            normed = smollm2.rms_norm(x, weights.attention_norm, config.rms_norm_eps)
            attended, *_ = smollm2.attention(config, weights, normed, positions, path=smollm2.AttentionPath.FAST)
            x = x + attended
            x = x + smollm2.feed_forward(weights, smollm2.rms_norm(x, weights.mlp_norm, config.rms_norm_eps))
        normed = smollm2.rms_norm(x, model.weights.layers[layer].attention_norm, config.rms_norm_eps)
    return normed.clone()  # (T, D), outside inference mode


def decoder_head(model: smollm2.SmolLM2, text: str, layer: int, head: int) -> HeadInput:
    """Query head `head` of `layer` reading `text` (plain text, no chat template), as a HeadInput."""
    check_head(model, layer, head)
    ids = lesson_ids(model, text)
    return head_input(model, token_labels(model, ids), hidden_entering(model, ids, layer), layer, head)


def layer_matrices(model: smollm2.SmolLM2, layer: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The layer's W_q (D, H * d), W_k and W_v (D, G * d) in the x @ W layout, each read back once."""
    weights = model.weights.layers[layer]
    return x_at_w(weights.query), x_at_w(weights.key), x_at_w(weights.value)


def head_inputs(model: smollm2.SmolLM2, tokens: tuple[str, ...], x: torch.Tensor, layer: int) -> list[HeadInput]:
    """Every query head of `layer` reading `x` (T, D), the normalised stream whose tokens are `tokens`: the
    layer's matrices are read back once and sliced per head."""
    config = model.config
    d = config.head_dim
    w_query, w_key, w_value = layer_matrices(model, layer)
    zeros = torch.zeros(d)
    heads = []
    for head in range(config.num_heads):
        kv = config.kv_head_of(head)
        queries_of, kv_of = slice(head * d, (head + 1) * d), slice(kv * d, (kv + 1) * d)
        heads.append(
            HeadInput(
                tokens=tokens,
                x=x,
                w_query=w_query[:, queries_of].contiguous(),  # (D, d): this query head's columns
                w_key=w_key[:, kv_of].contiguous(),  # (D, d): its group's key head
                w_value=w_value[:, kv_of].contiguous(),  # (D, d): ... and value head
                b_query=zeros,
                b_key=zeros,
                b_value=zeros,
                scale=1 / math.sqrt(d),
                provenance=Provenance(DECODER_SHAPE.name, layer, head),
                rope_base=config.rope_base,
                causal=True,
            )
        )
    return heads


def head_input(model: smollm2.SmolLM2, tokens: tuple[str, ...], x: torch.Tensor, layer: int, head: int) -> HeadInput:
    """Query head `head` of `layer` reading `x` (T, D), the normalised stream whose tokens are `tokens`."""
    return head_inputs(model, tokens, x, layer)[head]


def token_labels(model: smollm2.SmolLM2, ids: torch.Tensor) -> tuple[str, ...]:
    """The tokens of `ids` as unique chart labels."""
    return unique_labels(smollm2.token_texts(model, ids))


LESSON_MAX_TOKENS = 64  # lessons 2, 4 and 5 draw (T, T) heatmaps: the encoder's cap of 64 word pieces


def lesson_ids(model: smollm2.SmolLM2, text: str) -> torch.Tensor:
    """The ids (T,) of `text` for a lesson; core.models.smollm2.TextError in words when empty or too long."""
    return smollm2.encode(model, text, max_tokens=LESSON_MAX_TOKENS)


def decoder_layer_forms(
    model: smollm2.SmolLM2, text: str, layer: int
) -> tuple[tuple[str, ...], torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One layer's attention three ways: (tokens, wrapper, split, the model's own: each (T, D), weights (H, T, T)).

    wrapper: nine separate heads (each its own HeadInput, RoPE and the causal mask), contexts concatenated,
    then the output projection. split: one projection each for q, k and v, split into 9 query heads and
    3 key/value heads, each key/value head repeated for its 3 query heads. The model's own: smollm2.attention.
    """
    check_head(model, layer, 0)
    config = model.config
    ids = lesson_ids(model, text)
    x = hidden_entering(model, ids, layer)  # (T, D), normalised
    weights = model.weights.layers[layer]
    w_query, w_key, w_value = layer_matrices(model, layer)
    tokens, heads, kv_heads, d = len(ids), config.num_heads, config.num_kv_heads, config.head_dim
    with torch.no_grad():
        contexts = [head_trace(one, causal=True).context for one in head_inputs(model, (), x, layer)]  # H x (T, d)
        wrapper = smollm2.linear(torch.cat(contexts, dim=-1), weights.output)  # (T, H * d) -> (T, D)
        angles = smollm2.rope_angles(torch.arange(tokens), d, config.rope_base)  # (T, d / 2)
        q = (x @ w_query).view(tokens, heads, d).transpose(0, 1)  # (T, H * d) -> (H, T, d)
        k = (x @ w_key).view(tokens, kv_heads, d).transpose(0, 1)  # (T, G * d) -> (G, T, d)
        v = (x @ w_value).view(tokens, kv_heads, d).transpose(0, 1)  # (G, T, d)
        q, k = smollm2.rotate_pairs(q, angles), smollm2.rotate_pairs(k, angles)
        k, v = k.repeat_interleave(config.group_size, dim=0), v.repeat_interleave(config.group_size, dim=0)  # (H, T, d)
        future = torch.ones(tokens, tokens, dtype=torch.bool).triu(1)  # (T, T): True above the diagonal
        scores = (q @ k.transpose(1, 2) / math.sqrt(d)).masked_fill(future, float("-inf"))  # (H, T, T)
        split_weights = torch.softmax(scores, dim=-1)  # (H, T, T)
        merged = (split_weights @ v).transpose(0, 1).reshape(tokens, heads * d)  # (H, T, d) -> (T, H * d)
        split = smollm2.linear(merged, weights.output)  # (T, D)
        own, own_weights, *_ = smollm2.attention(model.config, weights, x, torch.arange(tokens))
    assert own_weights is not None  # the reference path returns its weights
    return token_labels(model, ids), wrapper, split, own, own_weights
