"""Lesson 9: attention at scale: the cost of T×T, the online softmax, tiling and the KV cache.

Every number the page shows is computed here: the timings by `core.attention.long_context.measure` on the
chosen device, the online softmax and tiles by the reference functions, generation by
`core.models.kv_cache` with the training lab's tiny transformer. Sentences that depend on a measurement
are chosen from the measurement, since on a shared CPU the order of two timings can change.

This module holds sections (a) and (c); (b) is in `attention_at_scale_online.py`, (d) in
`attention_at_scale_kv.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from core import recipes
from core.app.choices import BLOCK_CHOICES, TOKEN_CHOICES, token_choices
from core.app.registry import LessonSpec
from core.attention.functional import scaled_dot_product_attention
from core.attention.long_context import (
    AttentionPath,
    Measurement,
    TiledResult,
    measure,
    tiled_attention,
)
from core.charts import at_scale as charts_scale
from core.charts.spec import VegaChart
from core.inputs.device import machine_word, resolve_device
from core.lessons.common import CPU, Prediction, generator

# ----------------------------------------------------------------------------------------
# (a) The cost of T×T
# ----------------------------------------------------------------------------------------

HEAD_DIM = 64  # one head of GPT-2 small's width
LONG_CONTEXT = 131_072  # a 128k-token context
BYTES_FLOAT32 = 4
# TOKEN_CHOICES, token_choices (each device's longest sequence) and BLOCK_CHOICES come from
# core.app.choices: a link's scale_longest and scale_block_q/k are read by them too.
SHORTEST = 64
TILE_BLOCK = 128  # the block size of the timed tiled path (FlashAttention's kernels use 64 to 128)
SMALL_BLOCK = 32  # a smaller block, timed too: the Python loop's cost grows with the number of tiles


def lengths_up_to(longest: int) -> tuple[int, ...]:
    """64, 128, ... doubling up to `longest`."""
    return tuple(SHORTEST * 2**i for i in range(int(math.log2(longest // SHORTEST)) + 1))


@dataclass(frozen=True)
class CostResult:
    """Plain attention against the sequence length, measured on one device.

    table: tokens, scores_bytes (T × T float32), peak_bytes, milliseconds (measured), t2_milliseconds
    (a T² line through the longest measurement), per path: fused_milliseconds, fused_peak_bytes.
    time_slope: the slope of log(time) against log(T) where T² dominates: over the lengths whose time is at
    least DOMINANT_FACTOR times the shortest call's (below that, what every call costs whatever T hides the
    growth), from `fit_from` tokens on. memory_slope: the same for the peak memory, from 512 tokens on.
    2 means T².
    """

    device: str
    table: pd.DataFrame
    time_slope: float
    memory_slope: float
    long_scores_bytes: int  # the scores matrix of a 128k context, one head of one layer, float32
    long_milliseconds: float  # the T² line's time at 128k tokens on this device
    tiled: Measurement  # the tiled path at the longest length, block TILE_BLOCK
    tiled_small_ms: float  # the tiled path at the longest length, block SMALL_BLOCK (time only)
    longest: int
    fit_from: int = SHORTEST  # the shortest length in the time slope's fit

    @property
    def last_doubling_memory(self) -> float:
        """Peak memory at the longest length over the peak at half of it."""
        peaks = self.table.peak_bytes.to_numpy()
        return float(peaks[-1] / peaks[-2])


def slope(tokens: np.ndarray, values: np.ndarray) -> float:
    """The least-squares slope of log(values) against log(tokens)."""
    return float(np.polyfit(np.log(tokens), np.log(values), 1)[0])


DOMINANT_FACTOR = 8  # a length's time counts as T²-dominated once it is 8 × the quickest call's


def time_fit_start(tokens: np.ndarray, milliseconds: np.ndarray) -> int:
    """The first length whose time is DOMINANT_FACTOR × the quickest call's: from there the T×T work, not the
    cost every call pays (Python, dispatch, allocation, the parts that grow like T), sets the time. The quickest,
    not the shortest: on a busy machine one short call can be slow. At least the last two lengths are fitted."""
    below = np.flatnonzero(milliseconds < DOMINANT_FACTOR * milliseconds.min())  # never empty: the quickest
    first = int(below[-1]) + 1  # every length after the last quick one
    return int(tokens[min(first, len(tokens) - 2)])


# The table is timed in this many passes over every length, each keeping its fastest: a burst of other work on a
# class's server outlasts one length's few calls, and passes apart in time let every length find a quiet moment.
# One pass of three calls showed 1,024 tokens at three times its T² line to a whole class (the s24 review).
TIMING_PASSES = 3
TIMING_REPEATS = 3  # calls per length in each pass


def cost_of_attention(
    device: torch.device, longest: int, repeats: int = TIMING_REPEATS, passes: int = TIMING_PASSES
) -> CostResult:
    """Time and peak memory of plain and fused causal attention at 64 ... `longest` tokens, one head of width 64:
    each time the fastest of `repeats` calls in each of `passes` passes, the memory from the first pass."""
    lengths = lengths_up_to(longest)
    plain = {t: measure(AttentionPath.PLAIN, t, HEAD_DIM, device, repeats) for t in lengths}
    fused = {t: measure(AttentionPath.FUSED, t, HEAD_DIM, device, repeats) for t in lengths}
    plain_ms = {t: m.milliseconds for t, m in plain.items()}
    fused_ms = {t: m.milliseconds for t, m in fused.items()}
    for _ in range(passes - 1):
        for tokens in lengths:
            again = measure(AttentionPath.PLAIN, tokens, HEAD_DIM, device, repeats, with_memory=False)
            plain_ms[tokens] = min(plain_ms[tokens], again.milliseconds)
            again = measure(AttentionPath.FUSED, tokens, HEAD_DIM, device, repeats, with_memory=False)
            fused_ms[tokens] = min(fused_ms[tokens], again.milliseconds)
    table = pd.DataFrame(
        {
            "tokens": list(lengths),
            "scores_bytes": [t * t * BYTES_FLOAT32 for t in lengths],
            "peak_bytes": [plain[t].peak_bytes for t in lengths],
            "milliseconds": [plain_ms[t] for t in lengths],
            "fused_milliseconds": [fused_ms[t] for t in lengths],
            "fused_peak_bytes": [fused[t].peak_bytes for t in lengths],
        }
    )
    longest_ms = float(table.milliseconds.iloc[-1])
    table["t2_milliseconds"] = longest_ms * (table.tokens / longest) ** 2
    fitted = table[table.tokens >= min(512, longest // 2)]
    fit_from = time_fit_start(table.tokens.to_numpy(), table.milliseconds.to_numpy())
    timed = table[table.tokens >= fit_from]
    return CostResult(
        device=device.type,
        table=table,
        time_slope=slope(timed.tokens.to_numpy(), timed.milliseconds.to_numpy()),
        memory_slope=slope(fitted.tokens.to_numpy(), fitted.peak_bytes.to_numpy()),
        long_scores_bytes=LONG_CONTEXT * LONG_CONTEXT * BYTES_FLOAT32,
        long_milliseconds=longest_ms * (LONG_CONTEXT / longest) ** 2,
        tiled=measure(AttentionPath.TILED, longest, HEAD_DIM, device, 1, TILE_BLOCK),
        tiled_small_ms=measure(AttentionPath.TILED, longest, HEAD_DIM, device, 1, SMALL_BLOCK, False).milliseconds,
        longest=longest,
        fit_from=fit_from,
    )


def cost_lesson(device_name: str, longest: int) -> CostResult:
    """Section (a) on the named device; `longest` must be one of that device's choices (ValueError otherwise)."""
    device = resolve_device(device_name)
    if longest not in token_choices(device.type):
        raise ValueError(
            f"The longest sequence must be one of {', '.join(f'{t:,}' for t in token_choices(device.type))} "
            f"tokens on this device, got {longest!r}."
        )
    return cost_of_attention(device, longest)


def cost_table(cost: CostResult) -> pd.DataFrame:
    """The charts' numbers as the page's table, in MiB and milliseconds."""
    table = cost.table
    return pd.DataFrame(
        {
            "tokens": table.tokens,
            "one T×T matrix (MiB)": table.scores_bytes / 2**20,
            "plain: peak (MiB)": table.peak_bytes / 2**20,
            "plain (ms)": table.milliseconds,
            "T² line (ms)": table.t2_milliseconds,
            "fused: peak (MiB)": table.fused_peak_bytes / 2**20,
            "fused (ms)": table.fused_milliseconds,
        }
    )


@dataclass(frozen=True)
class CostView:
    """Section (a) as the page draws it: the measurement, its two charts (built once per setting), its
    table, the doubling question and the tiled-vs-plain sentence of section (c)."""

    cost: CostResult
    time_chart: VegaChart
    memory_chart: VegaChart
    table: pd.DataFrame
    prediction: Prediction
    verdict: str
    code_note: str  # the Code box's caption: what its memory column is, against the page's measured peak


def cost_view(device_name: str, longest: int) -> CostView:
    """`cost_lesson` with everything the page derives from it, so that a rerun only draws."""
    cost = cost_lesson(device_name, longest)
    return CostView(
        cost=cost,
        time_chart=charts_scale.cost_chart(cost.table),
        memory_chart=charts_scale.memory_chart(cost.table),
        table=cost_table(cost),
        prediction=doubling_question(cost),
        verdict=tiled_verdict(cost),
        code_note=cost_code_note(cost),
    )


# What plain_attention holds at its peak, in T×T float32 matrices: the scores, the masked scores and the weights,
# plus the boolean mask (one byte a cell, a quarter of a float32 matrix).
PLAIN_PEAK_MATRICES = 3.25


def cost_code_note(cost: CostResult) -> str:
    """The Code box's caption. Review s24: it said "the same measurement", but the box prints one T×T matrix by
    formula (16 MiB at 2,048 tokens) where the page measured a peak of 52 MiB."""
    last = cost.table.iloc[-1]
    held = float(last.peak_bytes) / float(last.scores_bytes)
    why = (
        " (the scores, the masked scores and the weights, plus the boolean mask at a byte a cell)"
        if abs(held - PLAIN_PEAK_MATRICES) < 0.05
        else ""
    )
    return (
        "Plain PyTorch: the same causal attention on one thread, as the page runs it, each time the fastest of "
        f"five calls (the page keeps the fastest of {TIMING_REPEATS * TIMING_PASSES}, in {TIMING_PASSES} passes "
        f"over the lengths). Its memory column is one T×T matrix by formula "
        f"({bytes_text(float(last.scores_bytes))} at {cost.longest:,} tokens); the page measured the peak, "
        f"{bytes_text(float(last.peak_bytes))}, which is {held:.2f} such matrices{why}."
    )


def doubling_question(cost: CostResult) -> Prediction:
    """'Double the context: the memory of the scores grows by?', answered by the measured peaks."""
    options = ("2 times", "4 times", "8 times")
    measured = cost.last_doubling_memory
    answer = int(np.argmin([abs(math.log(measured / f)) for f in (2, 4, 8)]))
    return Prediction(
        question=f"Double the context from {cost.longest // 2:,} to {cost.longest:,} tokens. The memory plain "
        "attention needs grows by about…",
        options=options,
        answer=answer,
        explanation=(
            f"Measured on this {machine_word(cost.device)}: {measured:.2f} times "
            f"({bytes_text(cost.table.peak_bytes.iloc[-2])} → {bytes_text(cost.table.peak_bytes.iloc[-1])}"
            "). The scores matrix has T × T entries: twice the rows and twice the columns."
        ),
    )


def bytes_text(count: float) -> str:
    """1,536 -> '1.5 KiB'; binary units, as memory is sold."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def duration_text(milliseconds: float) -> str:
    if milliseconds < 1:  # two significant digits: 0.048 ms, not 0.0 (or 0.1, which misstates a ratio)
        return f"{milliseconds:.2g} ms"
    if milliseconds < 1000:
        return f"{milliseconds:,.1f} ms"
    if milliseconds < 120_000:
        return f"{milliseconds / 1000:,.1f} s"
    return f"{milliseconds / 60_000:,.1f} min"


def _compared(milliseconds: float, plain_ms: float) -> str:
    ratio = milliseconds / plain_ms
    if ratio >= 1.1:
        return f"{ratio:.1f}× slower than"
    if ratio <= 0.9:
        return f"{1 / ratio:.1f}× faster than"
    return "about as fast as"


def tiled_verdict(cost: CostResult) -> str:
    """The tiled loop against the plain path at the longest length, in words chosen by the measurement."""
    plain = cost.table.iloc[-1]
    plain_ms, fused_ms = float(plain.milliseconds), float(plain.fused_milliseconds)
    small, large = cost.tiled_small_ms, cost.tiled.milliseconds
    if min(small, large) >= 0.9 * plain_ms:
        why = "Every tile is a separate round of small PyTorch calls from Python, so the loop is not faster here."
    elif small > 1.1 * plain_ms:
        why = (
            f"With blocks of {TILE_BLOCK} the loop makes few Python calls, skips the tiles in the future (about "
            "half of them) and never writes a T×T matrix, where the plain path writes and reads its matrix several "
            f"times; with blocks of {SMALL_BLOCK} the calls from Python cost more than that saves. On a GPU the "
            "kernel, not Python, walks the tiles."
        )
    else:
        why = (
            "Here the Python loop kept up with or beat the plain path, which writes and reads its whole T×T matrix "
            "several times (the masked scores, the softmax): memory traffic, the thing tiling removes."
        )
    return (
        f"At {cost.longest:,} tokens on this {machine_word(cost.device)} the tiled Python loop took "
        f"{duration_text(large)} with blocks of {TILE_BLOCK} ({_compared(large, plain_ms)} the plain path's "
        f"{duration_text(plain_ms)}) and "
        f"{duration_text(small)} with blocks of {SMALL_BLOCK} ({_compared(small, plain_ms)} it). {why} It held "
        f"{bytes_text(cost.tiled.peak_bytes)} at its peak against the plain path's "
        f"{bytes_text(float(plain.peak_bytes))}. "
        f"PyTorch's fused kernel, which does the tiling in compiled code, took {duration_text(fused_ms)} "
        f"({_compared(fused_ms, plain_ms)} the plain path) and held {bytes_text(float(plain.fused_peak_bytes))}."
    )


SLOPE_NEAR_2 = (1.8, 2.2)  # a fitted time slope the page calls "close to the 2 of a T² law"


def time_sentences(cost: CostResult) -> tuple[str, ...]:
    """What the measured times say, each sentence chosen by the numbers (never a promise of slope 2)."""
    table = cost.table
    shortest = table.iloc[0]
    line_at_shortest = float(shortest.t2_milliseconds)
    fixed = float(shortest.milliseconds) / line_at_shortest if line_at_shortest > 0 else math.inf
    times = f"{fixed:,.0f}" if fixed >= 10 else f"{fixed:.1f}"  # one decimal under 10: "2×" was said of 2.33 (s29c)
    said = [
        f"At {int(shortest.tokens):,} tokens a call took {duration_text(float(shortest.milliseconds))}, "
        f"{times}× the {duration_text(line_at_shortest)} the T² line predicts there: at small T what every "
        "call pays whatever T (Python, "
        "dispatching each operation, allocating its output) and the parts that grow only like T (the T × 64 inputs "
        "and output) take most of the time."
        if fixed >= 2
        # "Close to the line" was said of 1.7× (the fourth review): between 1.2× and 2× the page gives the factor.
        else f"At {int(shortest.tokens):,} tokens a call took {duration_text(float(shortest.milliseconds))}, "
        f"{fixed:.1f}× the {duration_text(line_at_shortest)} the T² line predicts there: what every call pays "
        "whatever T adds a part even at this length."
        if fixed >= 1.2
        else f"Even at {int(shortest.tokens):,} tokens the time is within 20% of the T² line."
        if fixed > 1 / 1.2
        # The s22 review: "within 20%" was said of 0.55× the line. A T² line drawn through the longest call lies
        # above the short calls when the time grew faster than T² on the way (the slope below says by how much).
        else f"At {int(shortest.tokens):,} tokens a call took {duration_text(float(shortest.milliseconds))}, "
        f"{fixed:.2f}× the {duration_text(line_at_shortest)} the T² line predicts there: below the line, because "
        f"the line is drawn through the {cost.longest:,}-token call and the time grew faster than T² on the way there."
    ]
    fit = f"fitted from {cost.fit_from:,} tokens on (where calls take {DOMINANT_FACTOR}× the quickest or more)"
    if cost.time_slope > SLOPE_NEAR_2[1]:
        said.append(
            f"The slope, {fit}, is {cost.time_slope:.2f}: steeper than 2, so something besides the T×T work grew "
            f"too. On a CPU that is typically the matrix ({bytes_text(float(table.scores_bytes.iloc[-1]))} at "
            f"{cost.longest:,} tokens) outgrowing the processor's faster caches, so that each pass over it waits "
            "on slower memory, or other work sharing the machine while it was measured."
        )
    elif cost.time_slope < SLOPE_NEAR_2[0]:
        said.append(
            f"The slope, {fit}, is {cost.time_slope:.2f}: below 2, so the costs that do not grow like T² still "
            "weigh at these lengths; longer sequences bring it closer to 2."
        )
    else:
        said.append(f"The slope, {fit}, is {cost.time_slope:.2f}: close to the 2 of a T² law.")
    fitted = table[table.tokens >= cost.fit_from]
    tokens, times = fitted.tokens.to_numpy(), fitted.milliseconds.to_numpy()
    dips = [(int(tokens[i]), int(tokens[i + 1])) for i in range(len(times) - 1) if times[i + 1] < times[i]]
    if dips:  # a longer sequence measured faster: the machine was busy during the shorter one
        shorter, longer = dips[0]
        said.append(
            f"The times are not smooth: a call at {shorter:,} tokens took longer than one at {longer:,}, so other "
            "work on the machine slowed that measurement, and the slope is a rough figure."
        )
    said.append(fused_sentence(cost))
    return tuple(said)


def fused_sentence(cost: CostResult) -> str:
    """Where PyTorch's fused kernel was slower than the plain path on this device, and why that can happen."""
    table = cost.table
    rows = zip(table.tokens, table.fused_milliseconds, table.milliseconds, strict=True)
    slower = [int(tokens) for tokens, fused, plain in rows if fused > 1.1 * plain]
    if not slower:
        return (
            f"PyTorch's fused kernel was never slower than the plain path here (within 10%), from "
            f"{int(table.tokens.iloc[0]):,} to {cost.longest:,} tokens."
        )
    where = (
        "at every length measured"
        if len(slower) == len(table)
        else "at " + ", ".join(f"{t:,}" for t in slower) + " tokens"
    )
    if cost.device != "cpu":
        return f"PyTorch's fused kernel was slower than the plain path {where} on this {machine_word(cost.device)}."
    return (
        f"PyTorch's fused kernel was slower than the plain path {where} on this CPU. What it saves is "
        "the T×T matrix's trips to memory, which cost far less on a CPU, whose caches are large, than on a GPU; "
        "what it pays is its tile-by-tile loop of small products and a running softmax, where the plain path "
        "hands the processor one large matrix product, the work CPU libraries are most tuned for. With one head "
        "and one sequence it also has little work to spread over the cores."
    )


def cost_code(longest: int) -> str:
    return recipes.fill("attention_at_scale_cost", {"longest": int(longest)})


# ----------------------------------------------------------------------------------------
# (c) Tiling
# ----------------------------------------------------------------------------------------

PICTURE_TOKENS = 32  # the tile picture's sequence: small enough to see every tile


@dataclass(frozen=True)
class TilingLesson:
    tiles: pd.DataFrame  # query_block, key_block, kind, queries, keys: one row per tile, for the picture
    computed: int
    skipped: int
    max_difference: float  # tiled vs core's reference path
    block_q: int
    block_k: int
    causal: bool
    code: str
    prediction: Prediction
    chart: VegaChart  # the tile picture


def tiling_lesson(seed: int, block_q: int, block_k: int, causal: bool) -> TilingLesson:
    """Tiled attention over PICTURE_TOKENS tokens (one head of width 8) against the reference path."""
    if block_q not in BLOCK_CHOICES or block_k not in BLOCK_CHOICES:
        raise ValueError(f"Block sizes must be one of {', '.join(map(str, BLOCK_CHOICES))}.")
    draws = generator(seed, CPU)  # drawn on the CPU, then moved
    query, key, value = (torch.randn(1, PICTURE_TOKENS, 8, generator=draws) for _ in range(3))  # (1, T, E)
    result: TiledResult = tiled_attention(query, key, value, block_q, block_k, is_causal=causal)
    reference = scaled_dot_product_attention(query, key, value, is_causal=causal).context
    tiles = pd.DataFrame(
        {
            "query_block": [t.query_block for t in result.tiles],
            "key_block": [t.key_block for t in result.tiles],
            "kind": [t.kind.value for t in result.tiles],
            "queries": [_span(t.query_block, block_q) for t in result.tiles],
            "keys": [_span(t.key_block, block_k) for t in result.tiles],
        }
    )
    return TilingLesson(
        tiles=tiles,
        computed=result.computed,
        skipped=result.skipped,
        max_difference=float((result.output - reference).abs().max()),
        block_q=block_q,
        block_k=block_k,
        causal=causal,
        code=recipes.fill(
            "attention_at_scale_tiled",
            {"seed": int(seed), "block_q": block_q, "block_k": block_k, "causal": bool(causal)},
        ),
        prediction=_tiles_question(result, causal),
        chart=charts_scale.tiles_chart(tiles),
    )


def tiling_caption(tiling: TilingLesson) -> str:
    total = len(tiling.tiles)
    return (
        f"{tiling.computed} of {total} tiles computed, {tiling.skipped} skipped; largest |tiled − reference path| "
        f"= {tiling.max_difference:.1e}. Plain attention holds all {PICTURE_TOKENS}×{PICTURE_TOKENS} scores at once; "
        f"the loop holds one {tiling.block_q}×{tiling.block_k} tile of scores, plus m, ℓ and the running output of "
        f"the {tiling.block_q} queries of the block it is working on. The Code box runs the same loop against the "
        "same reference and prints the same difference."
    )


def _span(block: int, size: int) -> str:
    first = block * size
    return f"{first}–{min(first + size, PICTURE_TOKENS) - 1}"


def _tiles_question(result: TiledResult, causal: bool) -> Prediction:
    total = len(result.tiles)
    candidates = [result.skipped, 0, total // 2, total - result.skipped]
    options: list[str] = []
    for count in candidates:
        if str(count) not in options:
            options.append(str(count))
    masking = "with the causal mask" if causal else "without a mask"
    return Prediction(
        question=f"{PICTURE_TOKENS} tokens in query blocks of {result.block_q} and key blocks of {result.block_k}: "
        f"{total} tiles. {masking.capitalize()}, how many can the loop skip?",
        options=tuple(options),
        answer=0,
        explanation=(
            f"{result.skipped} of {total} are skipped: a tile is skipped when its first key comes after its "
            "last query, so every score in it would be masked. "
            + ("Without a mask every key matters to every query." if not causal else "")
        ).strip(),
    )


# The cached computations the page calls (ui/cache.py `computed`): none reads the sidebar's Settings.
# The measurements are keyed by device and setting, so a class opening the page costs one measurement.
COST = LessonSpec(cost_view, uses=None, max_entries=2 * len(TOKEN_CHOICES))
TILING = LessonSpec(tiling_lesson, uses=None, max_entries=256)
