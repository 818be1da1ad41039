"""One decoder layer at a time, for the analyses that read or replace its parts (attribution.py, patching.py).

`forward` keeps only what the lessons show. Decomposing the residual stream, the logit lens and
patching need more: every head's output, every feed-forward's output, the residual after each, for a
batch of sequences, with a head's output replaced on the way, and gradients. `layer_pass` runs one
layer that way, from the same pieces (`rms_norm`, `linear`, RoPE, `feed_forward`) and the same
arithmetic as the fast path (attention in float64, back to float32), so a stack of them gives
`forward`'s logits (a test ties the two).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from core.models.smollm2.loading import LayerWeights, Matrix, SmolLM2
from core.models.smollm2.operations import dequantized, feed_forward, linear_rows, rms_norm, rope_angles, rotate_pairs

HeadsEdit = Callable[[torch.Tensor], torch.Tensor]  # heads_out (B, H, T, d) -> the outputs to use instead
OutputEdit = Callable[[torch.Tensor], torch.Tensor]  # a sublayer's output (B, T, D) -> the one to add instead


@dataclass(frozen=True)
class LayerPass:
    """What one decoder layer read and added, for a batch of B sequences.

    heads_out (B, H, T, d): each head's weighted sum of values (after any edit)
    attended  (B, T, D): the attention's output (heads mixed by the output matrix), added to the residual
    mlp_out   (B, T, D): the feed-forward's output (after any edit), added after it
    residual  (B, T, D): the residual stream after the layer
    keys, values (B, G, T, d): this pass's keys (after RoPE) and values, for a later pass over later tokens
    """

    heads_out: torch.Tensor
    attended: torch.Tensor
    mlp_out: torch.Tensor
    residual: torch.Tensor
    keys: torch.Tensor
    values: torch.Tensor


def batched_heads(
    model: SmolLM2, layer: LayerWeights, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every head's weighted sum of values for a batch: x (B, T, D) normalised, at positions S .. S + T - 1
    after `past`'s S tokens (keys, values (G, S, d), shared by the whole batch; None: S = 0).

    Returns (heads_out (B, H, T, d), keys (B, G, T, d), values (B, G, T, d)) of these T tokens.
    """
    config = model.config
    batch, tokens, _ = x.shape
    offset = 0 if past is None else past[0].shape[1]
    positions = torch.arange(offset, offset + tokens, device=x.device)  # (T,)
    angles = rope_angles(positions, config.head_dim, config.rope_base)  # (T, d / 2)

    def split(weight: Matrix, heads: int) -> torch.Tensor:
        return linear_rows(x, weight).view(batch, tokens, heads, config.head_dim).transpose(1, 2)  # (B, heads, T, d)

    queries = rotate_pairs(split(layer.query, config.num_heads), angles)  # (B, H, T, d)
    keys = rotate_pairs(split(layer.key, config.num_kv_heads), angles)  # (B, G, T, d)
    values = split(layer.value, config.num_kv_heads)  # (B, G, T, d)
    all_keys, all_values = keys, values
    if past is not None:  # the shared earlier tokens come first, as in `attention`
        earlier = (batch, *past[0].shape)  # (B, G, S, d)
        all_keys = torch.cat((past[0].expand(earlier), keys), dim=2)  # (B, G, S + T, d)
        all_values = torch.cat((past[1].expand(earlier), values), dim=2)  # (B, G, S + T, d)
    # Float64, as `attention` computes it (its comment says why); h reads key/value head h // group_size.
    shared_keys = all_keys.double().repeat_interleave(config.group_size, dim=1)  # (B, H, S + T, d)
    shared_values = all_values.double().repeat_interleave(config.group_size, dim=1)  # (B, H, S + T, d)
    if offset == 0:
        heads_out = F.scaled_dot_product_attention(queries.double(), shared_keys, shared_values, is_causal=tokens > 1)
    else:  # query t sees keys 0 .. S + t: True = takes part
        visible = torch.ones(tokens, offset + tokens, dtype=torch.bool, device=x.device).tril(offset)  # (T, S + T)
        heads_out = F.scaled_dot_product_attention(queries.double(), shared_keys, shared_values, attn_mask=visible)
    return heads_out.float(), keys, values  # (B, H, T, d) float32


def mix_heads(layer: LayerWeights, heads_out: torch.Tensor, *, by_heads: bool = False) -> torch.Tensor:
    """The attention's output: the heads' outputs concatenated, times the output matrix. (B, H, T, d) -> (B, T, D).

    by_heads: with the output matrix as float32 numbers (`dequantized`), the same matrix `head_results`
    slices by head, so that the heads' shares add up to this output exactly (to float32 rounding). The
    default multiplies as the model's weights are kept (the 4-bit kernel rounds its result to bfloat16).
    """
    batch, heads, tokens, head_dim = heads_out.shape
    merged = heads_out.transpose(1, 2).reshape(batch, tokens, heads * head_dim)  # (B, T, H * d)
    if by_heads:
        return F.linear(merged.float(), dequantized(layer.output))  # (B, T, D)
    return linear_rows(merged, layer.output)  # (B, T, D)


def head_results(layer: LayerWeights, heads_out: torch.Tensor) -> torch.Tensor:
    """Each head's own share of the attention's output: its d numbers times its d columns of the output
    matrix. (..., H, d) -> (..., H, D); summed over H they give `mix_heads(..., by_heads=True)`'s output.

    The 4-bit blocks cannot be sliced by column: they are dequantized for this layer only (`dequantized`).
    """
    heads, head_dim = heads_out.shape[-2], heads_out.shape[-1]
    columns = dequantized(layer.output).view(-1, heads, head_dim)  # (D, H, d): head h's columns are [:, h]
    return torch.einsum("...hk,dhk->...hd", heads_out.float(), columns)  # (..., H, D)


def layer_pass(
    model: SmolLM2,
    index: int,
    x: torch.Tensor,
    *,
    past: tuple[torch.Tensor, torch.Tensor] | None = None,
    heads_edit: HeadsEdit | None = None,
    mlp_edit: OutputEdit | None = None,
    by_heads: bool = False,
) -> LayerPass:
    """Layer `index` on the residual stream x (B, T, D) of B sequences (after `past`'s tokens, if any).

    heads_edit may change the heads' outputs before they are mixed, mlp_edit the feed-forward's output
    before it is added; either may return a larger batch (an x of batch 1 then broadcasts). No
    inference_mode here: a caller that wants gradients gets them. by_heads: the attention's output matrix
    as float32 numbers (`mix_heads`), so that a decomposition into heads adds up exactly on 4-bit weights.
    """
    config = model.config
    layer = model.weights.layers[index]
    heads_out, keys, values = batched_heads(model, layer, rms_norm(x, layer.attention_norm, config.rms_norm_eps), past)
    if heads_edit is not None:
        heads_out = heads_edit(heads_out)
    attended = mix_heads(layer, heads_out, by_heads=by_heads)  # (B, T, D)
    middle = x + attended
    normed = rms_norm(middle, layer.mlp_norm, config.rms_norm_eps).flatten(0, 1)  # (B * T, D)
    mlp_out = feed_forward(layer, normed).view_as(middle)  # (B, T, D)
    if mlp_edit is not None:
        mlp_out = mlp_edit(mlp_out)
    return LayerPass(heads_out, attended, mlp_out, middle + mlp_out, keys, values)
