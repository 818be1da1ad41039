"""Longer contexts: plain causal attention's time and the size of its scores matrix, doubling T."""

import time

import torch

# --- settings (the page fills in its current values) ---
longest = 2048
# --- end of settings ---

draws = torch.Generator().manual_seed(0)
tokens = 64
times = {}
while tokens <= longest:
    q, k, v = (torch.randn(1, tokens, 64, generator=draws) for _ in range(3))  # (1, T, 64): one head
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        scores = q @ k.transpose(-2, -1) / 64**0.5  # (1, T, T): the matrix that grows like T^2
        future = torch.ones(tokens, tokens, dtype=torch.bool).triu(diagonal=1)
        context = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v
        best = min(best, time.perf_counter() - started)
    times[tokens] = best
    print(f"T = {tokens:6,}: scores {scores.numel() * 4 / 2**20:9.2f} MiB, {1000 * best:8.2f} ms")
    tokens *= 2

long = 131_072
print(f"At {long:,} tokens one head's scores would take {long * long * 4 / 2**30:,.0f} GiB")
