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

Not yet a choice of the sidebar's Weights control: ui/weights.py and the links' layer/head ranges
(30 layers × 9 heads) come next (see the WeightSource docstring's extension point).

Shape legend: T = tokens, D = 576 (hidden width), d = 64 (head width), H = 9 query heads, G = 3 KV heads.
"""

from __future__ import annotations

import math

import torch

from core.inputs.examples import unique_labels
from core.inputs.weights import HeadInput, ModelShape, Provenance
from core.models import smollm2

DECODER_SHAPE = ModelShape("SmolLM2-135M", num_layers=30, num_heads=9, head_dim=64, hidden_size=576)


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
        return smollm2._linear(identity, matrix)  # (in, out)
    return matrix.float().T.contiguous()  # (out, in) -> (in, out)


def hidden_entering(model: smollm2.SmolLM2, token_ids: torch.Tensor, layer: int) -> torch.Tensor:
    """The normalised residual stream that `layer`'s attention reads: (T,) ids -> (T, D)."""
    config = model.config
    positions = torch.arange(token_ids.numel())  # (T,)
    no_ablation: list[int] = []
    with torch.inference_mode():
        x = model.weights.embeddings[token_ids].float()  # (T, D)
        for weights in model.weights.layers[:layer]:  # the layers before it, in full
            normed = smollm2.rms_norm(x, weights.attention_norm, config.rms_norm_eps)
            attended, *_ = smollm2.attention(
                model,
                weights,
                normed,
                positions,
                None,
                smollm2.AttentionPath.FAST,
                no_ablation,
                smollm2.AblationMode.ZERO,
            )
            x = x + attended
            x = x + smollm2.feed_forward(weights, smollm2.rms_norm(x, weights.mlp_norm, config.rms_norm_eps))
        normed = smollm2.rms_norm(x, model.weights.layers[layer].attention_norm, config.rms_norm_eps)
    return normed.clone()  # (T, D), outside inference mode


def decoder_head(model: smollm2.SmolLM2, text: str, layer: int, head: int) -> HeadInput:
    """Query head `head` of `layer` reading `text` (plain text, no chat template), as a HeadInput."""
    check_head(model, layer, head)
    ids = smollm2.encode(model, text)
    config = model.config
    weights = model.weights.layers[layer]
    d, kv = config.head_dim, config.kv_head_of(head)
    queries_of, kv_of = slice(head * d, (head + 1) * d), slice(kv * d, (kv + 1) * d)
    zeros = torch.zeros(d)
    return HeadInput(
        tokens=unique_labels(smollm2.token_texts(model, ids)),
        x=hidden_entering(model, ids, layer),
        w_query=x_at_w(weights.query)[:, queries_of].contiguous(),  # (D, d): this query head's columns
        w_key=x_at_w(weights.key)[:, kv_of].contiguous(),  # (D, d): its group's key head
        w_value=x_at_w(weights.value)[:, kv_of].contiguous(),  # (D, d): ... and value head
        b_query=zeros,
        b_key=zeros,
        b_value=zeros,
        scale=1 / math.sqrt(d),
        provenance=Provenance(DECODER_SHAPE.name, layer, head),
        rope_base=config.rope_base,
    )
