"""A KV cache: generate one token at a time, keeping each token's keys and values instead of recomputing them."""

import torch

# --- settings (the page fills in its current values) ---
new_tokens = 10
# --- end of settings ---

draws = torch.Generator().manual_seed(0)
vocab, width = 16, 32
embed = torch.randn(vocab, width, generator=draws)
positions = torch.randn(64, width, generator=draws)
W_q, W_k, W_v = (torch.randn(width, width, generator=draws) / width**0.5 for _ in range(3))
unembed = torch.randn(width, vocab, generator=draws)


def logits_without_cache(tokens):
    """The whole prefix again: keys and values of every earlier token are recomputed."""
    x = embed[tokens] + positions[: len(tokens)]  # (T, width)
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = (q @ k.T / width**0.5).masked_fill(torch.ones(len(tokens), len(tokens)).triu(1).bool(), float("-inf"))
    return ((x + torch.softmax(scores, dim=-1) @ v) @ unembed)[-1]  # the last token's logits


def logits_with_cache(token, position, cache):
    """One new row: its key and value are appended, its query attends to everything cached."""
    x = embed[token] + positions[position]  # (width,)
    cache["k"] = torch.cat([cache["k"], (x @ W_k)[None]])  # (T, width)
    cache["v"] = torch.cat([cache["v"], (x @ W_v)[None]])
    weights = torch.softmax(cache["k"] @ (x @ W_q) / width**0.5, dim=0)  # (T,)
    return (x + weights @ cache["v"]) @ unembed


tokens = [3, 1, 4, 1, 5]
cache = {"k": torch.zeros(0, width), "v": torch.zeros(0, width)}
for position, token in enumerate(tokens[:-1]):
    logits_with_cache(token, position, cache)  # read the prompt into the cache
largest = 0.0
for _ in range(new_tokens):
    cached = logits_with_cache(tokens[-1], len(tokens) - 1, cache)
    largest = max(largest, (cached - logits_without_cache(tokens)).abs().max().item())
    tokens.append(int(cached.argmax()))
print("tokens:", tokens, "cache rows:", cache["k"].shape[0], "max |difference| of the logits:", largest)
