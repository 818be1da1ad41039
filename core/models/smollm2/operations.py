"""The decoder's arithmetic, shared by the whole forward pass and the one-layer analyses: matrix products on
however the weights are kept, RMSNorm, RoPE, the SwiGLU feed-forward and the tied unembedding.

Shape legend as in the package's docstring (T tokens, D hidden width, d head width, V vocabulary).
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from core.models.gguf_file import BLOCK
from core.models.smollm2.loading import LayerWeights, Matrix, PackedQ4, SmolLM2


def _int4_mm(x: torch.Tensor, weight: PackedQ4) -> torch.Tensor:
    """torch's int4 kernel: x (T, in) -> (T, out) float32, products of bfloat16 inputs and the dequantized blocks."""
    inputs = x.to(torch.bfloat16).contiguous()
    return torch.ops.aten._weight_int4pack_mm_for_cpu(inputs, weight.packed, BLOCK, weight.scales_and_zeros).float()


def dequantized(weight: Matrix, *, through_kernel: bool = False) -> torch.Tensor:
    """The matrix (out, in) as float32 numbers, a transient copy (the shared model is never changed).

    A PackedQ4's numbers are the ones the int4 kernel multiplies by: (q - 8) * scale + zero per block of
    32, rounded to bfloat16 (the kernel's output). through_kernel: the readable reference, which reads
    them back through the kernel itself (the identity (in, in) times the matrix gives its transpose); it
    costs in x in x out products, 45 ms for a feed-forward matrix on one thread, and a backward pass through
    all 30 layers needs 210 of them (2.9 s of lesson 11's 3.8 s attribution patching). The default unpacks
    the codes instead (`_codes`), 4-8x faster; a test holds the two equal, bit for bit, on every matrix.
    One layer's output matrix (576 x 576) is 1.3 MB in float32.
    """
    if not isinstance(weight, PackedQ4):
        return weight.float()
    if through_kernel:
        identity = torch.eye(weight.shape[1], device=weight.packed.device)  # (in, in)
        return _int4_mm(identity, weight).T.contiguous()  # (in, out) -> (out, in)
    out, inputs = weight.shape
    codes = _codes(weight).view(out, inputs // BLOCK, BLOCK).float() - 8  # (out, blocks, 32)
    scale_zero = weight.scales_and_zeros.float().transpose(0, 1)  # (blocks, out, 2) -> (out, blocks, 2)
    numbers = torch.addcmul(scale_zero[..., 1:], codes, scale_zero[..., :1])  # zero + q * scale: (out, blocks, 32)
    return numbers.to(torch.bfloat16).float().reshape(out, inputs)


def _codes(weight: PackedQ4) -> torch.Tensor:
    """The 4-bit codes (out * in,) uint8 in row-major order, from the kernel's packed layout."""
    packed = weight.packed  # (out, in / 2): two codes a byte, in an order of the kernel's own
    nibbles = torch.stack((packed & 15, packed >> 4), dim=-1).flatten()  # (out * in,) in the packed order
    return nibbles[_packed_position(*weight.shape)]


@functools.lru_cache(maxsize=8)  # SmolLM2 has four shapes (q and o, k and v, gate and up, down): 8.4 MiB in all
def _packed_position(out: int, inputs: int) -> torch.Tensor:
    """For each code in row-major order, where the packed layout keeps it: (out * in,) int32.

    torch documents no layout for `_convert_weight_to_int4pack_for_cpu` (it blocks rows and interleaves
    them), so it is read back from the function itself: each code's own row-major number, four bits at
    a time, is packed as if it were the codes, and each nibble position then says whose bits it holds.
    Read-only once made (shared by every session's thread through the cache).
    """
    number = torch.arange(out * inputs, dtype=torch.int64).view(out, inputs)  # (out, in)
    owner = torch.zeros(out * inputs, dtype=torch.int64)  # per nibble position: the code it holds
    for shift in range(0, max(1, (out * inputs - 1).bit_length()), 4):
        digit = ((number >> shift) & 15).to(torch.int32)  # (out, in): four bits of each code's number
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(digit, 1)  # (out, in / 2) uint8
        owner |= torch.stack((packed & 15, packed >> 4), dim=-1).flatten().long() << shift
    position = torch.empty(out * inputs, dtype=torch.int32)
    position[owner] = torch.arange(out * inputs, dtype=torch.int32)  # invert: code -> nibble position
    return position


class _Int4Linear(torch.autograd.Function):
    """The int4 kernel with a gradient for its input (torch implements none): grad_x = grad_y @ W, with W
    dequantized for the backward pass only (`dequantized`). Attribution patching differentiates through it."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: PackedQ4) -> torch.Tensor:  # type: ignore[override]
        ctx.weight = weight
        return _int4_mm(x, weight)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        return grad @ dequantized(ctx.weight), None  # (T, out) @ (out, in) -> (T, in)


def linear(x: torch.Tensor, weight: Matrix) -> torch.Tensor:
    """x @ weight.T in the weight's dtype (bfloat16 products accumulate in float32), result in float32.

    x (T, in) -> (T, out). A PackedQ4 goes through torch's int4 kernel, which reads the 4-bit codes
    and their block scales directly (no float copy of the matrix is made in the forward pass; a gradient,
    when asked for, dequantizes the matrix for its backward pass).
    """
    if isinstance(weight, PackedQ4):
        if torch.is_grad_enabled() and x.requires_grad:
            return _Int4Linear.apply(x, weight)  # type: ignore[no-any-return]
        return _int4_mm(x, weight)
    return F.linear(x.to(weight.dtype), weight).float()


def rms_norm(x: torch.Tensor, gain: torch.Tensor, eps: float) -> torch.Tensor:
    """Each token's vector divided by its root mean square, times a learned gain (no mean, no bias)."""
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * gain


def rope_angles(positions: torch.Tensor, head_dim: int, base: float) -> torch.Tensor:
    """The rotation angle of every adjacent pair at every position: (T,) -> (T, d / 2).

    Pair i turns by position * base^(-2i / d): the first pairs turn fast, the last ones slowly.
    """
    pair = torch.arange(0, head_dim, 2, dtype=torch.float32, device=positions.device)  # (d / 2,)
    frequencies = base ** (-pair / head_dim)  # (d / 2,)
    return positions.to(torch.float32)[:, None] * frequencies[None, :]  # (T, d / 2)


def rotate_pairs(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """RoPE: turn each adjacent pair (x[2i], x[2i + 1]) by its angle. x (..., T, d), angles (T, d / 2)."""
    pairs = x.unflatten(-1, (-1, 2))  # (..., T, d / 2, 2): one row per pair
    first, second = pairs[..., 0], pairs[..., 1]  # (..., T, d / 2) each
    cos, sin = angles.cos(), angles.sin()
    turned = torch.stack((first * cos - second * sin, first * sin + second * cos), dim=-1)  # (..., T, d / 2, 2)
    return turned.flatten(-2)  # (..., T, d)


def linear_rows(x: torch.Tensor, weight: Matrix) -> torch.Tensor:
    """`linear` on x (..., in) of any leading shape (the int4 kernel takes 2-D input only) -> (..., out)."""
    return linear(x.reshape(-1, x.shape[-1]), weight).unflatten(0, x.shape[:-1])


REFINED_LOGITS = 64  # per row, the largest logits recomputed in float32 (see `unembed`)


def unembed(model: SmolLM2, x: torch.Tensor) -> torch.Tensor:
    """Logits (T, V) float32 from the final normalised states x (T, D): x times the embedding matrix.

    The bfloat16 product rounds its output to bfloat16, 0.125 apart near 25: on the capital prompt
    'The' and 'L' came out tied, and greedy decoding took 'L' where float32 takes 'The'. So each
    row's REFINED_LOGITS largest are recomputed in float32 from the same weights (a few thousand
    products, not the 28 million of the whole vocabulary); the rest keep the bfloat16 value, far
    below the top, where no choice is made.
    """
    embeddings = model.weights.embeddings
    logits = linear(x, embeddings)  # (T, V)
    if embeddings.dtype == torch.float32:  # the float32 reference: exact already
        return logits
    top = logits.topk(min(REFINED_LOGITS, logits.shape[-1]), dim=-1).indices  # (T, R)
    rows = embeddings[top].double()  # (T, R, D)
    # float64, as in attention: a float32 batched product rounds with the number of rows (~1e-5), and
    # one new token after the cache must get the very logits of the whole sequence's last row.
    exact = (rows @ x.double().unsqueeze(-1)).squeeze(-1).float()  # (T, R, D) @ (T, D, 1) -> (T, R)
    return logits.scatter(-1, top, exact)


def feed_forward(layer: LayerWeights, x: torch.Tensor) -> torch.Tensor:
    """SwiGLU: down( silu(gate x) * up x ). (T, D) -> (T, F) -> (T, D)."""
    return linear(F.silu(linear(x, layer.gate)) * linear(x, layer.up), layer.down)
