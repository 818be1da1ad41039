"""Generating one token at a time with the training lab's tiny causal transformer, with and without a KV cache.

Without a cache every step runs the whole prefix through the model again, recomputing every
earlier token's keys and values although they cannot change (a causal model's token t never sees a
later token). With a cache each step computes q, k, v for the one new token, appends k and v to the
layer's cache and lets the new query attend to all of it. Both give the same logits; the tests check.

The code uses the model's public pieces (embeddings, each layer's norm and projections, the final
norm and the unembedding), so it runs any `TinyTransformer` without changing the model module.

Shape legend: T = tokens so far, D = d_model = heads * hd, h = heads, hd = head width, V = vocabulary.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from core.models.tiny_transformer import TinyTransformer, make_embedding


@dataclass
class KVCache:
    """Per layer, the keys and values of every token so far: (1, h, T, hd) each. Private to one generation."""

    keys: list[torch.Tensor] = field(default_factory=list)
    values: list[torch.Tensor] = field(default_factory=list)

    @property
    def length(self) -> int:
        return 0 if not self.keys else int(self.keys[0].shape[2])

    @property
    def bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))


def logits_without_cache(model: TinyTransformer, tokens: torch.Tensor) -> torch.Tensor:
    """tokens (1, T) -> logits (1, T, V): the whole prefix again, keys and values of every token recomputed."""
    positions = torch.arange(tokens.shape[1], device=tokens.device)
    x = model.token_embedding(tokens) + model.position_embedding(positions)  # (1, T, D)
    for layer in model.attention_layers:
        attention = layer.attention
        normed = layer.norm(x)
        queries = attention.split_heads(attention.W_query(normed))  # (1, h, T, hd)
        keys = attention.split_heads(attention.W_key(normed))
        values = attention.split_heads(attention.W_value(normed))
        context = F.scaled_dot_product_attention(queries, keys, values, is_causal=True, scale=attention.scale)
        x = x + attention.out_proj(attention.merge_heads(context))  # (1, T, D)
    return model.unembedding(model.final_norm(x))  # (1, T, V)


def logits_with_cache(model: TinyTransformer, token: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """One new token (1, 1) at position cache.length -> its logits (1, 1, V); appends its k and v to `cache`."""
    position = torch.tensor([cache.length], device=token.device)
    x = model.token_embedding(token) + model.position_embedding(position)  # (1, 1, D)
    first = not cache.keys
    for index, layer in enumerate(model.attention_layers):
        attention = layer.attention
        normed = layer.norm(x)
        query = attention.split_heads(attention.W_query(normed))  # (1, h, 1, hd)
        key = attention.split_heads(attention.W_key(normed))  # (1, h, 1, hd): the one new row
        value = attention.split_heads(attention.W_value(normed))
        if first:
            cache.keys.append(key)
            cache.values.append(value)
        else:
            cache.keys[index] = torch.cat([cache.keys[index], key], dim=2)  # (1, h, T + 1, hd)
            cache.values[index] = torch.cat([cache.values[index], value], dim=2)
        # No mask: the newest token may attend to every token so far, itself included.
        context = F.scaled_dot_product_attention(query, cache.keys[index], cache.values[index], scale=attention.scale)
        x = x + attention.out_proj(attention.merge_heads(context))  # (1, 1, D)
    return model.unembedding(model.final_norm(x))  # (1, 1, V)


@dataclass(frozen=True)
class Generation:
    """Greedy generation from a prompt: the tokens, each step's logits and time, and the cache's growth.

    tokens: prompt then generated; logits (N, V): the logits each generated token was chosen from;
    milliseconds (N,): the time of each step; cache_lengths / cache_bytes (N,): the cache after each step
    (zeros without a cache).
    """

    tokens: tuple[int, ...]
    logits: torch.Tensor
    milliseconds: tuple[float, ...]
    cache_lengths: tuple[int, ...]
    cache_bytes: tuple[int, ...]


def generate(model: TinyTransformer, prompt: list[int], new_tokens: int, use_cache: bool) -> Generation:
    """Greedy (most likely next token) generation of `new_tokens` tokens after `prompt`.

    With the cache the prompt is read one token at a time too, so the cache grows by one row per
    step from the start; the logits of the prompt's last token choose the first new token.
    """
    device = model.unembedding.weight.device
    tokens = list(prompt)
    chosen_logits, times, lengths, sizes = [], [], [], []
    cache = KVCache()
    with torch.no_grad():
        if use_cache:
            for token in prompt[:-1]:
                logits_with_cache(model, torch.tensor([[token]], device=device), cache)
        for _ in range(new_tokens):
            started = time.perf_counter()
            if use_cache:
                logits = logits_with_cache(model, torch.tensor([[tokens[-1]]], device=device), cache)[0, -1]
            else:
                logits = logits_without_cache(model, torch.tensor([tokens], device=device))[0, -1]  # (V,)
            next_token = int(logits.argmax())  # .item() waits for the device, so the time is the step's
            times.append(1000 * (time.perf_counter() - started))
            tokens.append(next_token)
            chosen_logits.append(logits.cpu())
            lengths.append(cache.length)
            sizes.append(cache.bytes)
    return Generation(tuple(tokens), torch.stack(chosen_logits), tuple(times), tuple(lengths), tuple(sizes))


def with_longer_context(model: TinyTransformer, length: int, generator: torch.Generator) -> TinyTransformer:
    """A copy of `model` whose position table has `length` rows: the trained rows first, fresh ones after.

    The training lab's sequences are 16 tokens long; timing generation to hundreds of tokens needs
    more positions. The time does not depend on the weights' values, only on their shapes.
    """
    longer = copy.deepcopy(model)  # never change the cached trained model
    trained = model.position_embedding.weight
    if length > trained.shape[0]:
        table: nn.Embedding = make_embedding(length, trained.shape[1], generator)
        with torch.no_grad():
            table.weight[: trained.shape[0]] = trained
        longer.position_embedding = table.to(trained.device)
    return longer


# ----------------------------------------------------------------------------------------
# The cache's size for real models
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelShape:
    """What sets a decoder's KV cache: layers, key/value heads per layer and each head's width."""

    name: str
    layers: int
    query_heads: int
    kv_heads: int  # = query_heads without grouped-query attention
    head_dim: int
    context: int  # the longest context it was released with

    def bytes_per_token(self, bytes_per_value: int = 2) -> int:
        """K and V, for every layer and every key/value head: 2 × layers × kv_heads × head_dim values."""
        return 2 * self.layers * self.kv_heads * self.head_dim * bytes_per_value

    def cache_bytes(self, tokens: int, bytes_per_value: int = 2) -> int:
        return tokens * self.bytes_per_token(bytes_per_value)


# GPT-2 small, from OpenAI's released hparams (n_layer 12, n_head 12, n_embd 768, n_ctx 1024); the
# tests check these against transformers' GPT2Config defaults.
GPT2_SMALL = ModelShape("GPT-2 small", layers=12, query_heads=12, kv_heads=12, head_dim=768 // 12, context=1024)
# Llama 3 8B, from the config.json Meta published with meta-llama/Meta-Llama-3-8B: num_hidden_layers 32,
# num_attention_heads 32, num_key_value_heads 8, hidden_size 4096 (head_dim 128), max_position_embeddings 8192.
LLAMA3_8B = ModelShape(
    "Llama 3 8B (grouped-query)", layers=32, query_heads=32, kv_heads=8, head_dim=4096 // 32, context=8192
)


# SmolLM2-135M, the lab's own GPT (lesson 10), from its GGUF file's metadata: block_count 30, head_count 9,
# head_count_kv 3, embedding_length 576 (head_dim 64), context_length 8192; tests check these against the file.
SMOLLM2_135M = ModelShape(
    "SmolLM2-135M (lesson 10)", layers=30, query_heads=9, kv_heads=3, head_dim=576 // 9, context=8192
)


def without_grouping(shape: ModelShape) -> ModelShape:
    """The same model with one key/value head per query head (plain multi-head attention)."""
    return ModelShape(
        f"{shape.name}, one K/V head per query head",
        shape.layers,
        shape.query_heads,
        shape.query_heads,
        shape.head_dim,
        shape.context,
    )


# Two bytes per value: 16-bit floats, as these models are served.
BYTES_PER_VALUE = 2
