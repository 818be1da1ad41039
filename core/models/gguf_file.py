"""Reading a GGUF file by our own code: its settings, its tensors, its tokenizer and its chat template.

A GGUF (llama.cpp's format) is one file holding a model's settings as key/value metadata, its
tensors (often quantized in blocks of 32 numbers) and its tokenizer (vocabulary, merges, special
tokens, chat template). The `gguf` package's `GGUFReader` maps the file into memory and tells us
where each part lies; everything after that is a few lines of torch here:

- `dequantize`: blocks of Q4_1 (a float16 scale d, a float16 minimum m, 32 four-bit codes q:
  x = d * q + m), Q8_0 (a float16 scale d, 32 signed bytes q: x = d * q), F16 and F32, turned into
  float32 numbers bit for bit equal to `gguf.quants.dequantize` (a test checks it).
- `build_tokenizer`: a byte-level BPE built with `tokenizers` from the file's vocabulary and merges.
- `render_chat`: the ChatML conversation the file's template describes, written out without a
  template engine (the template is read for its default system prompt and checked for its shape).

Nothing here imports `transformers` or `llama_cpp`; the tests compare against the former.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gguf import GGMLQuantizationType, GGUFReader
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

BLOCK = 32  # numbers per quantization block in Q4_1 and Q8_0
# Bytes per block: Q4_1 = d (2) + m (2) + 16 bytes of two nibbles; Q8_0 = d (2) + 32 signed bytes.
BLOCK_BYTES = {GGMLQuantizationType.Q4_1: 20, GGMLQuantizationType.Q8_0: 34}
CONTROL_TOKEN = 3  # llama.cpp's token type for special tokens such as <|im_start|>


class GGUFError(RuntimeError):
    """A GGUF file this code cannot read (missing, damaged, or a layout it does not implement)."""


def dequantize(raw: torch.Tensor, kind: GGMLQuantizationType) -> torch.Tensor:
    """float32 numbers from a tensor's bytes as stored: (rows, row bytes) uint8 -> (rows, columns).

    F32 and F16 tensors come as their own dtype already and are only widened. The arithmetic is
    done in float32, in the same order as `gguf.quants` (d * q, then + m), so the result is equal
    bit for bit.
    """
    if kind in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
        # A copy, never a view: a view would keep the whole mapped file alive (and resident).
        return raw.to(torch.float32, copy=True)
    if kind not in BLOCK_BYTES:
        raise GGUFError(f"Tensors quantized as {kind.name} are not supported (only Q4_1, Q8_0, F16, F32).")
    rows = raw.shape[0]
    blocks = raw.reshape(-1, BLOCK_BYTES[kind])  # (rows * blocks per row, bytes per block)
    scale = blocks[:, 0:2].contiguous().view(torch.float16).to(torch.float32)  # (n, 1)
    if kind == GGMLQuantizationType.Q8_0:
        codes = blocks[:, 2:].contiguous().view(torch.int8).to(torch.float32)  # (n, 32)
        return (codes * scale).reshape(rows, -1)  # (rows, columns)
    minimum = blocks[:, 2:4].contiguous().view(torch.float16).to(torch.float32)  # (n, 1)
    packed = blocks[:, 4:]  # (n, 16): byte j holds number j (low nibble) and number j + 16 (high)
    codes = torch.cat((packed & 0x0F, packed >> 4), dim=1).to(torch.float32)  # (n, 32)
    return (scale * codes + minimum).reshape(rows, -1)  # (rows, columns)


@dataclass(frozen=True)
class RawTensor:
    """One tensor as the file stores it: its bytes (a view of the memory-mapped file), kind, shape.

    shape is torch's order (rows, columns) = (out features, in features) for a weight matrix:
    GGUF lists dimensions the other way round.
    """

    name: str
    kind: GGMLQuantizationType
    shape: tuple[int, ...]
    data: np.ndarray  # (rows, row bytes) for quantized kinds, (rows, columns) otherwise

    def raw(self) -> torch.Tensor:
        """The bytes as a torch tensor sharing the file's memory (read-only: never write to it)."""
        with warnings.catch_warnings():  # torch warns that the mapping is read-only: we only read it
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            return torch.from_numpy(np.asarray(self.data))

    def to_float32(self) -> torch.Tensor:
        """The tensor's numbers in float32, shaped `shape`."""
        return dequantize(self.raw(), self.kind).reshape(self.shape)


@dataclass(frozen=True)
class GGUFContents:
    """What the model code needs from a GGUF: its metadata (plain Python values) and its tensors."""

    path: Path
    metadata: dict[str, Any]
    tensors: dict[str, RawTensor]


_TOKENIZER_ARRAYS = {"tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.token_type"}


def read_gguf(path: Path) -> GGUFContents:
    """Map the file and collect its metadata and tensors (no tensor is copied or dequantized here)."""
    if not Path(path).is_file():
        raise GGUFError(f"The model file {path} is missing.")
    try:
        reader = GGUFReader(str(path), "r")
    except (ValueError, OSError) as error:
        raise GGUFError(f"The model file {path} cannot be read as a GGUF: {error}") from error
    metadata: dict[str, Any] = {}
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        if key in _TOKENIZER_ARRAYS or not (field.types and field.types[0].name == "ARRAY"):
            metadata[key] = field.contents()
    tensors = {}
    for tensor in reader.tensors:
        kind = GGMLQuantizationType(tensor.tensor_type)
        shape = tuple(int(n) for n in reversed(tensor.shape.tolist()))  # GGUF: (columns, rows)
        tensors[tensor.name] = RawTensor(tensor.name, kind, shape, tensor.data)
    return GGUFContents(Path(path), metadata, tensors)


def build_tokenizer(tokens: Sequence[str], merges: Sequence[str], token_types: Sequence[int]) -> Tokenizer:
    """The byte-level BPE the file describes (GPT-2's byte alphabet, SmolLM2's pre-tokenization).

    Pre-tokenization as SmolLM2's own tokenizer does it: every digit on its own, then GPT-2's
    byte-level split (words with their leading space, punctuation runs, spaces). The vocabulary has
    no token of two digits, so numbers always come out one digit per token. No BOS is added: the
    file says `add_bos_token = False`, and the chat template writes its own markers.
    """
    vocab = {token: index for index, token in enumerate(tokens)}
    pairs = [tuple(merge.split(" ", 1)) for merge in merges]  # "Ġ t" -> ("Ġ", "t")
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=pairs, ignore_merges=False))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    specials = [token for token, kind in zip(tokens, token_types, strict=True) if kind == CONTROL_TOKEN]
    # Special tokens are matched whole in the text (so "<|im_start|>" is one token, not six pieces).
    tokenizer.add_special_tokens([AddedToken(token, normalized=False, special=True) for token in specials])
    return tokenizer


class Role(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: str


@dataclass(frozen=True)
class ChatTemplate:
    """ChatML as the file's template writes it: each message as <|im_start|>role\\ncontent<|im_end|>\\n.

    default_system: the system message the template adds when the conversation starts without one.
    """

    default_system: str
    start: str = "<|im_start|>"
    end: str = "<|im_end|>"

    def render(self, messages: Sequence[ChatMessage], *, add_generation_prompt: bool = True) -> str:
        """The conversation as the model reads it; ending with the opened assistant turn when asked."""
        if messages and messages[0].role != Role.SYSTEM:  # as the template: only a non-empty chat
            messages = [ChatMessage(Role.SYSTEM, self.default_system), *messages]
        text = "".join(f"{self.start}{m.role.value}\n{m.content}{self.end}\n" for m in messages)
        return text + (f"{self.start}{Role.ASSISTANT.value}\n" if add_generation_prompt else "")


# The template's pieces we rely on: if the file's template lacks any of them, it is not the ChatML
# shape `ChatTemplate.render` writes, and we refuse it rather than render something else.
_CHATML_PIECES = (
    "{% for message in messages %}",
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}",
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
)
_DEFAULT_SYSTEM = re.compile(
    r"messages\[0\]\['role'\] != 'system' %\}\{\{ '<\|im_start\|>system\n(.*?)<\|im_end\|>\n' \}\}"
)


def chat_template(template: str) -> ChatTemplate:
    """Read the file's Jinja chat template (without running it) into a `ChatTemplate`."""
    missing = [piece for piece in _CHATML_PIECES if piece not in template]
    found = _DEFAULT_SYSTEM.search(template)
    if missing or found is None:
        raise GGUFError("The model file's chat template is not the ChatML shape this lesson knows how to write.")
    return ChatTemplate(default_system=found.group(1))
