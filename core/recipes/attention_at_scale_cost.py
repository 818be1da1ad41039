"""Longer contexts: plain causal attention's time and the size of its scores matrix, doubling T."""

import time

import torch

# --- settings (the page fills in its current values) ---
longest = 2048
# --- end of settings ---

torch.set_num_threads(1)  # one thread, as the page measures: other programs on the other cores then barely show
draws = torch.Generator().manual_seed(0)


def causal_attention(q, k, v):
    tokens = q.shape[-2]
    scores = q @ k.transpose(-2, -1) / 64**0.5  # (1, T, T): the matrix that grows like T^2
    future = torch.ones(tokens, tokens, dtype=torch.bool).triu(diagonal=1)  # (T, T): True above the diagonal
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v  # (1, T, 64)


tokens, before, times = 64, None, {}
while tokens <= longest:
    q, k, v = (torch.randn(1, tokens, 64, generator=draws) for _ in range(3))  # (1, T, 64): one head
    causal_attention(q, k, v)  # a warm-up: the first call pays for allocating memory
    best = float("inf")
    for _ in range(5):  # the fastest of five: on a shared machine other work only ever adds time
        started = time.perf_counter()
        causal_attention(q, k, v)
        best = min(best, time.perf_counter() - started)
    times[tokens] = best
    growth = "" if before is None else f"  ({best / before:4.1f}x the time at half the length)"
    print(f"T = {tokens:6,}: scores {tokens * tokens * 4 / 2**20:9.2f} MiB, {1000 * best:8.2f} ms{growth}")
    tokens, before = tokens * 2, best

long = 131_072
print(f"At {long:,} tokens one head's scores would take {long * long * 4 / 2**30:,.0f} GiB")
