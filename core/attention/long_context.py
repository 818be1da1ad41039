"""Attention without the T×T matrix: the online softmax and FlashAttention-style tiling, plus measuring both.

These are readable reference functions (forward only), written to be read beside the plain path
`core.attention.functional.scaled_dot_product_attention`; the property tests tie them to it. They are not
fast: on the CPU a Python loop over tiles loses to one big matrix product. What real systems run is a
fused kernel (PyTorch's `F.scaled_dot_product_attention`; on CUDA its flash and memory-efficient
backends), which does the same arithmetic inside one kernel.

The trick in one line: a softmax-weighted sum can be built block by block if every earlier partial
result is multiplied by e^(m_old - m_new) whenever a new block raises the running maximum m.

Shape legend: ... = any leading batch/head dims, L = queries, S = keys/values, E = d_k, Ev = d_v,
Bq / Bk = the query / key block sizes.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import torch

# torch._dynamo is imported with this module, not by PyTorch at the first profiled measurement: two sessions'
# threads making that first import at once (torch._dynamo and torch._inductor import each other) got
# "ImportError: ... partially initialized module 'torch._inductor.utils'" and the lesson its error box
# (issue 40's load runs). Python's import lock lets one thread import a module while the others wait.
import torch._dynamo  # noqa: F401
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from core.attention.functional import scaled_dot_product_attention

NEG_INF = float("-inf")
# PyTorch's CPU profiler runs one session per process: two sessions' threads profiling at once crashed the
# server ("External init callback must run in same thread as registerClient", then a segfault). They take turns.
PROFILER_TURN = threading.Lock()


# ----------------------------------------------------------------------------------------
# The online softmax, one query row
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OnlineStep:
    """The state after one block of keys: what the page's table shows, one row per block.

    first_key, last_key: the block's key positions (inclusive)
    block_max: the largest score in this block (-inf if all its keys are masked)
    running_max: m after this block; running_sum: ℓ after it (both rescaled to the new m)
    correction: e^(m_old - m_new), the factor every earlier partial result was multiplied by
    partial_output (Ev,): the weighted sum so far divided by ℓ: the answer if no more keys came
    """

    block: int
    first_key: int
    last_key: int
    block_max: float
    running_max: float
    correction: float
    running_sum: float
    partial_output: torch.Tensor


@dataclass(frozen=True)
class OnlineSoftmaxResult:
    """One query row through the online softmax, and the ordinary softmax · V to compare with."""

    steps: tuple[OnlineStep, ...]
    output: torch.Tensor  # (Ev,)
    reference: torch.Tensor  # (Ev,): softmax(q K^T * scale) @ V in one go
    max_difference: float  # max |output - reference|


def online_softmax_row(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    block_size: int,
    allowed: torch.Tensor | None = None,
    scale: float | None = None,
) -> OnlineSoftmaxResult:
    """softmax(q K^T * scale) @ V for one query q (E,), reading K (S, E) and V (S, Ev) block_size keys at a time.

    `allowed` (S,) bool, True = may attend (PyTorch's boolean-mask meaning). A row with no allowed
    key gives zeros, as the reference path does.
    """
    _check_block(block_size)
    num_keys = key.shape[0]
    scale_factor = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    running_max = torch.tensor(NEG_INF, dtype=query.dtype, device=query.device)
    running_sum = torch.zeros((), dtype=query.dtype, device=query.device)
    accumulator = torch.zeros(value.shape[-1], dtype=value.dtype, device=value.device)  # (Ev,)
    steps = []
    for number, start in enumerate(range(0, num_keys, block_size)):
        end = min(start + block_size, num_keys)
        scores = (key[start:end] @ query) * scale_factor  # (Bk, E) @ (E,) -> (Bk,)
        if allowed is not None:
            scores = scores.masked_fill(~allowed[start:end], NEG_INF)
        new_max = torch.maximum(running_max, scores.max())
        correction, weights = _rescale(running_max, new_max, scores)
        running_sum = running_sum * correction + weights.sum()
        accumulator = accumulator * correction + weights @ value[start:end]  # (Bk,) @ (Bk, Ev) -> (Ev,)
        running_max = new_max
        steps.append(
            OnlineStep(
                block=number + 1,
                first_key=start,
                last_key=end - 1,
                block_max=float(scores.max()),
                running_max=float(running_max),
                correction=float(correction),
                running_sum=float(running_sum),
                partial_output=_normalise(accumulator, running_sum),
            )
        )
    output = _normalise(accumulator, running_sum)
    mask = None if allowed is None else allowed[None, :]  # (1, S)
    reference = scaled_dot_product_attention(query[None, :], key, value, attn_mask=mask, scale=scale).context[0]
    return OnlineSoftmaxResult(tuple(steps), output, reference, float((output - reference).abs().max()))


def _rescale(old_max: torch.Tensor, new_max: torch.Tensor, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(e^(m_old - m_new), e^(scores - m_new)); while every key so far is masked, m stays -inf and
    -inf - -inf would be nan, so the factor is 1 and the weights are 0 there."""
    if math.isinf(float(new_max)):
        return torch.ones_like(new_max), torch.zeros_like(scores)
    return torch.exp(old_max - new_max), torch.exp(scores - new_max)


def _normalise(accumulator: torch.Tensor, running_sum: torch.Tensor) -> torch.Tensor:
    """accumulator / ℓ, or zeros while ℓ is 0 (no allowed key yet)."""
    return accumulator / running_sum if float(running_sum) > 0 else torch.zeros_like(accumulator)


# ----------------------------------------------------------------------------------------
# Tiled attention (FlashAttention's loop order, in plain PyTorch)
# ----------------------------------------------------------------------------------------


class TileKind(StrEnum):
    FULL = "computed"  # every query in the tile may see every key in it
    DIAGONAL = "computed, masked inside"  # the causal mask cuts through the tile
    SKIPPED = "skipped (all in the future)"  # causal: no query of the tile may see any key of it


@dataclass(frozen=True)
class Tile:
    query_block: int
    key_block: int
    kind: TileKind


@dataclass(frozen=True)
class TiledResult:
    """The output of tiled attention, which tiles it computed, and what it held at once.

    output (..., L, Ev); tiles: every (query block, key block) pair, row by row.
    largest_tile_bytes: the scores of one tile (Bq × Bk per batch/head), the only T-sized-squared
    thing plain attention holds and tiling never does; state_bytes: m and ℓ for every query.
    """

    output: torch.Tensor
    tiles: tuple[Tile, ...]
    block_q: int
    block_k: int
    largest_tile_bytes: int
    state_bytes: int

    @property
    def computed(self) -> int:
        return sum(tile.kind is not TileKind.SKIPPED for tile in self.tiles)

    @property
    def skipped(self) -> int:
        return sum(tile.kind is TileKind.SKIPPED for tile in self.tiles)


def tile_kind(q_start: int, q_end: int, k_start: int, k_end: int, is_causal: bool) -> TileKind:
    """Where a tile of queries [q_start, q_end) and keys [k_start, k_end) sits against the causal mask."""
    if not is_causal or k_end - 1 <= q_start:  # the last key is at or before the first query
        return TileKind.FULL
    if k_start > q_end - 1:  # the first key is after the last query
        return TileKind.SKIPPED
    return TileKind.DIAGONAL


def tiled_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    block_q: int,
    block_k: int,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
) -> TiledResult:
    """softmax(Q K^T * scale + mask) @ V over tiles: for each block of queries, the online softmax over
    blocks of keys, so no more than one (Bq, Bk) block of scores exists at a time.

    Arguments as PyTorch's `scaled_dot_product_attention` (boolean attn_mask broadcastable to
    (..., L, S), True = may attend; is_causal = query i sees keys 0..i). A fully masked row gives zeros.
    """
    _check_block(block_q)
    _check_block(block_k)
    num_queries, num_keys = query.shape[-2], key.shape[-2]
    scale_factor = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    mask = None
    if attn_mask is not None:
        mask = attn_mask.expand(*batch, num_queries, num_keys)  # (..., L, S)
    output = torch.zeros(*batch, num_queries, value.shape[-1], dtype=value.dtype, device=value.device)
    tiles = []
    for qi, q_start in enumerate(range(0, num_queries, block_q)):
        q_end = min(q_start + block_q, num_queries)
        q_tile = query[..., q_start:q_end, :]  # (..., Bq, E)
        running_max = torch.full((*batch, q_end - q_start, 1), NEG_INF, dtype=query.dtype, device=query.device)
        running_sum = torch.zeros_like(running_max)  # (..., Bq, 1)
        accumulator = torch.zeros(*batch, q_end - q_start, value.shape[-1], dtype=value.dtype, device=value.device)
        for ki, k_start in enumerate(range(0, num_keys, block_k)):
            k_end = min(k_start + block_k, num_keys)
            kind = tile_kind(q_start, q_end, k_start, k_end, is_causal)
            tiles.append(Tile(qi, ki, kind))
            if kind is TileKind.SKIPPED:
                continue
            scores = (q_tile @ key[..., k_start:k_end, :].transpose(-2, -1)) * scale_factor  # (..., Bq, Bk)
            if kind is TileKind.DIAGONAL:
                rows = torch.arange(q_start, q_end, device=query.device)[:, None]  # (Bq, 1)
                cols = torch.arange(k_start, k_end, device=query.device)[None, :]  # (1, Bk)
                scores = scores.masked_fill(cols > rows, NEG_INF)
            if mask is not None:
                scores = scores.masked_fill(~mask[..., q_start:q_end, k_start:k_end], NEG_INF)
            new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))  # (..., Bq, 1)
            # Rows with no allowed key yet keep m = -inf; use 0 there so exp never sees -inf - -inf.
            safe_max = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
            correction = torch.exp(running_max - safe_max)  # (..., Bq, 1); e^-inf = 0 on the first block
            weights = torch.exp(scores - safe_max)  # (..., Bq, Bk); masked entries give e^-inf = 0
            running_sum = running_sum * correction + weights.sum(dim=-1, keepdim=True)
            accumulator = accumulator * correction + weights @ value[..., k_start:k_end, :]  # (..., Bq, Ev)
            running_max = new_max
        # ℓ = 0 only where every key was masked: the reference path gives zeros there.
        output[..., q_start:q_end, :] = torch.where(
            running_sum > 0, accumulator / running_sum.clamp_min(torch.finfo(running_sum.dtype).tiny), 0.0
        )
    element = query.element_size()
    per_head = math.prod(batch)
    return TiledResult(
        output=output,
        tiles=tuple(tiles),
        block_q=block_q,
        block_k=block_k,
        largest_tile_bytes=per_head * min(block_q, num_queries) * min(block_k, num_keys) * element,
        state_bytes=2 * per_head * num_queries * element,
    )


def _check_block(size: int) -> None:
    if not (isinstance(size, int) and size >= 1):
        raise ValueError(f"A block size must be a whole number of at least 1, got {size!r}.")


# ----------------------------------------------------------------------------------------
# Measuring: time and peak memory of one call, on the CPU or with CUDA events
# ----------------------------------------------------------------------------------------


class AttentionPath(StrEnum):
    PLAIN = "plain (the T×T matrix)"
    TILED = "tiled (Python loop)"
    FUSED = "fused (PyTorch's kernel)"


@dataclass(frozen=True)
class Measurement:
    """One timed call: the best of `repeats` times, in milliseconds, and its peak extra memory in bytes."""

    milliseconds: float
    peak_bytes: int


def time_call(fn: Callable[[], object], device: torch.device, repeats: int) -> float:
    """The fastest of `repeats` calls in ms (after one warm-up): CUDA events on a GPU, perf_counter on the CPU.

    The minimum, not the mean: on a shared machine other work only ever adds time.
    """
    fn()
    best = math.inf
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize(device)
            best = min(best, start.elapsed_time(end))
        else:
            started = time.perf_counter()
            fn()
            best = min(best, 1000 * (time.perf_counter() - started))
    return best


def peak_bytes(fn: Callable[[], object], device: torch.device) -> int:
    """The most memory `fn` held at once beyond what existed before it (its output included).

    On CUDA the allocator's own peak counter; on the CPU, PyTorch's profiler records every allocation
    and free with a time stamp, and the peak of their running sum is the same quantity.
    """
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        torch.cuda.synchronize(device)
        return int(torch.cuda.max_memory_allocated(device) - before)
    with PROFILER_TURN, profile(activities=[ProfilerActivity.CPU], profile_memory=True) as recording:
        fn()
    changes = sorted(
        (event.time_range.start, event.self_cpu_memory_usage)
        for event in recording.events()
        if event.self_cpu_memory_usage != 0
    )
    held = peak = 0
    for _, change in changes:
        held += change
        peak = max(peak, held)
    return int(peak)


def plain_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """Causal attention the short way (nanoGPT's manual path): the whole (..., L, S) scores matrix at once.

    The same arithmetic as `core.attention.functional.scaled_dot_product_attention` without keeping its trace, so
    that timing it measures the T×T matrix and not the lesson's bookkeeping.
    """
    scores = (query @ key.transpose(-2, -1)) / math.sqrt(query.shape[-1])  # (..., L, E) @ (..., E, S) -> (..., L, S)
    future = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).triu(diagonal=1)  # (L, S)
    weights = torch.softmax(scores.masked_fill(future, NEG_INF), dim=-1)  # (..., L, S)
    return weights @ value  # (..., L, Ev)


def attention_call(
    path: AttentionPath, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, block: int = 128
) -> Callable[[], torch.Tensor]:
    """A no-argument causal attention call along `path`, for timing and memory."""
    if path is AttentionPath.PLAIN:
        return lambda: plain_attention(query, key, value)
    if path is AttentionPath.TILED:
        return lambda: tiled_attention(query, key, value, block, block, is_causal=True).output
    return lambda: _fused_causal(query, key, value)


def _fused_causal(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """PyTorch's fused causal attention of (B, T, E) inputs, handed over as (B, 1, T, E).

    Why the head axis: on CUDA, PyTorch's flash and memory-efficient kernels take only 4-D inputs, and a 3-D call
    falls back to the plain math (on an H200 it held 209 MiB at 4,096 tokens, as much as the plain path).
    """
    heads = (query[:, None], key[:, None], value[:, None])  # (B, 1, T, E) each
    return F.scaled_dot_product_attention(*heads, is_causal=True)[:, 0]  # (B, T, E)


def random_qkv(
    num_tokens: int, head_dim: int, device: torch.device, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q, K, V (1, T, E) drawn from a private generator on `device`."""
    generator = torch.Generator(device=device).manual_seed(seed)
    query, key, value = (torch.randn(1, num_tokens, head_dim, generator=generator, device=device) for _ in range(3))
    return query, key, value


def measure(
    path: AttentionPath,
    num_tokens: int,
    head_dim: int,
    device: torch.device,
    repeats: int,
    block: int = 128,
    with_memory: bool = True,
) -> Measurement:
    """Time and peak memory (0 when not `with_memory`) of one causal attention call of `num_tokens` tokens."""
    query, key, value = random_qkv(num_tokens, head_dim, device)
    call = attention_call(path, query, key, value, block)
    with torch.no_grad():
        milliseconds = time_call(call, device, repeats)
        memory = peak_bytes(call, device) if with_memory else 0
    return Measurement(milliseconds, memory)
