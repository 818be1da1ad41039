"""Lesson 9: attention at scale: the cost of T×T, the online softmax, tiling and the KV cache.

Every number the page shows is computed here: the timings by `core.long_context.measure` on the
chosen device, the online softmax and tiles by the reference functions, generation by
`core.kv_cache` with the training lab's tiny transformer. Sentences that depend on a measurement
are chosen from the measurement, since on a shared CPU the order of two timings can change.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from core import charts_scale, kv_cache, recipes
from core.device import resolve_device
from core.functional import scaled_dot_product_attention
from core.lessons.common import CPU, Prediction, generator
from core.long_context import (
    AttentionPath,
    Measurement,
    TiledResult,
    measure,
    online_softmax_row,
    tiled_attention,
)
from core.models import tiny_transformer as tt
from core.registry import LessonSpec

# ----------------------------------------------------------------------------------------
# (a) The cost of T×T
# ----------------------------------------------------------------------------------------

HEAD_DIM = 64  # one head of GPT-2 small's width
LONG_CONTEXT = 131_072  # a 128k-token context
BYTES_FLOAT32 = 4
# The longest sequence each device measures, so that a rerun stays interactive: on the CPU the plain
# path at 4,096 tokens holds ~200 MB and takes a fraction of a second; a GPU goes much further.
MAX_TOKENS = {"cpu": 4096, "cuda": 16_384}
TOKEN_CHOICES = (1024, 2048, 4096, 8192, 16_384)
SHORTEST = 64
TILE_BLOCK = 128  # the block size of the timed tiled path (FlashAttention's kernels use 64 to 128)
SMALL_BLOCK = 32  # a smaller block, timed too: the Python loop's cost grows with the number of tiles


def token_choices(device_type: str) -> tuple[int, ...]:
    """The longest-sequence choices this device allows."""
    return tuple(t for t in TOKEN_CHOICES if t <= MAX_TOKENS.get(device_type, MAX_TOKENS["cpu"]))


def lengths_up_to(longest: int) -> tuple[int, ...]:
    """64, 128, ... doubling up to `longest`."""
    return tuple(SHORTEST * 2**i for i in range(int(math.log2(longest // SHORTEST)) + 1))


@dataclass(frozen=True)
class CostResult:
    """Plain attention against the sequence length, measured on one device.

    table: tokens, scores_bytes (T × T float32), peak_bytes, milliseconds (measured), t2_milliseconds
    (a T² line through the longest measurement), per path: fused_milliseconds, fused_peak_bytes.
    time_slope, memory_slope: the slopes of log(time) and log(peak memory) against log(T), fitted over the
    points from 512 tokens on (below that fixed costs hide the growth). 2 means T².
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

    @property
    def last_doubling_memory(self) -> float:
        """Peak memory at the longest length over the peak at half of it."""
        peaks = self.table.peak_bytes.to_numpy()
        return float(peaks[-1] / peaks[-2])


def slope(tokens: np.ndarray, values: np.ndarray) -> float:
    """The least-squares slope of log(values) against log(tokens)."""
    return float(np.polyfit(np.log(tokens), np.log(values), 1)[0])


def cost_of_attention(device: torch.device, longest: int, repeats: int = 3) -> CostResult:
    """Time and peak memory of plain and fused causal attention at 64 ... `longest` tokens, one head of width 64."""
    rows = []
    for tokens in lengths_up_to(longest):
        plain = measure(AttentionPath.PLAIN, tokens, HEAD_DIM, device, repeats)
        fused = measure(AttentionPath.FUSED, tokens, HEAD_DIM, device, repeats)
        rows.append((tokens, tokens * tokens * BYTES_FLOAT32, plain.peak_bytes, plain.milliseconds, fused))
    table = pd.DataFrame(
        {
            "tokens": [r[0] for r in rows],
            "scores_bytes": [r[1] for r in rows],
            "peak_bytes": [r[2] for r in rows],
            "milliseconds": [r[3] for r in rows],
            "fused_milliseconds": [r[4].milliseconds for r in rows],
            "fused_peak_bytes": [r[4].peak_bytes for r in rows],
        }
    )
    longest_ms = float(table.milliseconds.iloc[-1])
    table["t2_milliseconds"] = longest_ms * (table.tokens / longest) ** 2
    fitted = table[table.tokens >= min(512, longest // 2)]
    return CostResult(
        device=device.type,
        table=table,
        time_slope=slope(fitted.tokens.to_numpy(), fitted.milliseconds.to_numpy()),
        memory_slope=slope(fitted.tokens.to_numpy(), fitted.peak_bytes.to_numpy()),
        long_scores_bytes=LONG_CONTEXT * LONG_CONTEXT * BYTES_FLOAT32,
        long_milliseconds=longest_ms * (LONG_CONTEXT / longest) ** 2,
        tiled=measure(AttentionPath.TILED, longest, HEAD_DIM, device, 1, TILE_BLOCK),
        tiled_small_ms=measure(AttentionPath.TILED, longest, HEAD_DIM, device, 1, SMALL_BLOCK, False).milliseconds,
        longest=longest,
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
    """Section (a) as the page draws it: the measurement, its two chart specs (built once per setting), its
    table, the doubling question and the tiled-vs-plain sentence of section (c)."""

    cost: CostResult
    time_spec: dict
    memory_spec: dict
    table: pd.DataFrame
    prediction: Prediction
    verdict: str


def cost_view(device_name: str, longest: int) -> CostView:
    """`cost_lesson` with everything the page derives from it, so that a rerun only draws."""
    cost = cost_lesson(device_name, longest)
    return CostView(
        cost=cost,
        time_spec=charts_scale.cost_chart(cost.table).to_dict(validate=False),
        memory_spec=charts_scale.memory_chart(cost.table).to_dict(validate=False),
        table=cost_table(cost),
        prediction=doubling_question(cost),
        verdict=tiled_verdict(cost),
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
            f"Measured on this {cost.device.upper()}: {measured:.2f} times "
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
        f"At {cost.longest:,} tokens on this {cost.device.upper()} the tiled Python loop took {duration_text(large)} "
        f"with blocks of {TILE_BLOCK} ({_compared(large, plain_ms)} the plain path's {duration_text(plain_ms)}) and "
        f"{duration_text(small)} with blocks of {SMALL_BLOCK} ({_compared(small, plain_ms)} it). {why} It held "
        f"{bytes_text(cost.tiled.peak_bytes)} at its peak against the plain path's "
        f"{bytes_text(float(plain.peak_bytes))}. "
        f"PyTorch's fused kernel, which does the tiling in compiled code, took {duration_text(fused_ms)} "
        f"({_compared(fused_ms, plain_ms)} the plain path) and held {bytes_text(float(plain.fused_peak_bytes))}."
    )


def cost_code(longest: int) -> str:
    return recipes.fill("attention_at_scale_cost", {"longest": int(longest)})


# ----------------------------------------------------------------------------------------
# (b) The online softmax, one query row
# ----------------------------------------------------------------------------------------

ROW_WIDTH = 4  # q and k width in the online-softmax example
VALUE_WIDTH = 3  # value width: three columns of output fit the table
KEY_CHOICES = range(2, 17)  # keys in the online-softmax example: few enough to read every row


@dataclass(frozen=True)
class OnlineLesson:
    table: pd.DataFrame  # one row per block: keys, block max, m, e^(m_old - m_new), ℓ, output so far
    output: tuple[float, ...]
    reference: tuple[float, ...]
    max_difference: float
    largest_rescale: float  # the smallest e^(m_old - m_new) after the first block: how much a new max shrank the past
    code: str
    prediction: Prediction


def online_lesson(seed: int, num_keys: int, block_size: int) -> OnlineLesson:
    """One random query against `num_keys` keys, read `block_size` keys at a time."""
    if num_keys not in KEY_CHOICES or not (1 <= block_size <= num_keys):
        raise ValueError(f"Choose {min(KEY_CHOICES)} to {max(KEY_CHOICES)} keys and a block of 1 to that many keys.")
    draws = generator(seed, CPU)  # drawn on the CPU, then moved
    query = torch.randn(ROW_WIDTH, generator=draws)  # (E,)
    keys = torch.randn(num_keys, ROW_WIDTH, generator=draws) * 2  # (S, E): spread so the max moves
    values = torch.randn(num_keys, VALUE_WIDTH, generator=draws)  # (S, Ev)
    result = online_softmax_row(query, keys, values, block_size)
    table = pd.DataFrame(
        {
            "block": [s.block for s in result.steps],
            "keys": [f"{s.first_key}–{s.last_key}" for s in result.steps],
            "block max": [s.block_max for s in result.steps],
            "m (running max)": [s.running_max for s in result.steps],
            "e^(m_old − m_new)": [s.correction for s in result.steps],
            "ℓ (running sum)": [s.running_sum for s in result.steps],
            "output so far": [
                "[" + ", ".join(f"{v:.4f}" for v in s.partial_output.tolist()) + "]" for s in result.steps
            ],
        }
    )
    later = [s.correction for s in result.steps[1:]]
    smallest = min(later) if later else 1.0
    return OnlineLesson(
        table=table,
        output=tuple(result.output.tolist()),
        reference=tuple(result.reference.tolist()),
        max_difference=result.max_difference,
        largest_rescale=smallest,
        code=recipes.fill(
            "attention_at_scale_online", {"seed": int(seed), "num_keys": num_keys, "block_size": block_size}
        ),
        prediction=_online_question(result.max_difference, len(result.steps)),
    )


def vector_text(values: tuple[float, ...]) -> str:
    return "[" + ", ".join(f"{v:.4f}" for v in values) + "]"


def online_caption(online: OnlineLesson) -> str:
    """What the table shows about the rescaling, chosen from its numbers."""
    head = f"Largest |online − ordinary| in float32: {online.max_difference:.1e}. "
    if len(online.table) == 1:
        return head + "One block holds every key: the online softmax is then the stable softmax itself."
    if online.largest_rescale >= 1.0:
        return head + (
            "The first block held the largest score, so every later factor e^(m_old − m_new) is 1: "
            "try smaller blocks or another seed to see a rescaling."
        )
    return head + (
        f"The smallest factor after the first block, {online.largest_rescale:.4f}, is where a block raised the "
        "maximum: everything summed before it was multiplied by that factor."
    )


def _online_question(max_difference: float, blocks: int) -> Prediction:
    options = (
        "Exactly the ordinary softmax · V, up to float rounding",
        "An approximation that improves with more blocks",
    )
    return Prediction(
        question=f"The online softmax reads the keys in {blocks} block{'s' if blocks != 1 else ''} and never sees all "
        "scores at once. Its result is…",
        options=options,
        answer=0 if max_difference <= 1e-6 else 1,
        explanation=(
            f"The largest difference from softmax · V computed in one go is {max_difference:.1e}. Each time a block "
            "raises the maximum, every earlier term is multiplied by e^(m_old − m_new), which turns e^(s − m_old) "
            "into e^(s − m_new) exactly: nothing is approximated."
        ),
    )


# ----------------------------------------------------------------------------------------
# (c) Tiling
# ----------------------------------------------------------------------------------------

PICTURE_TOKENS = 32  # the tile picture's sequence: small enough to see every tile
BLOCK_CHOICES = (2, 4, 8, 16)


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
    chart: dict  # the tile picture's Vega-Lite spec


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
        chart=charts_scale.tiles_chart(tiles).to_dict(validate=False),
    )


def tiling_caption(tiling: TilingLesson) -> str:
    total = len(tiling.tiles)
    return (
        f"{tiling.computed} of {total} tiles computed, {tiling.skipped} skipped; largest |tiled − reference path| "
        f"= {tiling.max_difference:.1e}. Plain attention holds all {PICTURE_TOKENS}×{PICTURE_TOKENS} scores at once; "
        f"the loop holds one {tiling.block_q}×{tiling.block_k} tile of scores, plus m and ℓ for each of the "
        f"{PICTURE_TOKENS} queries."
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


# ----------------------------------------------------------------------------------------
# (d) The KV cache
# ----------------------------------------------------------------------------------------

LAB_CONFIG = tt.TrainingConfig()  # the training lab's default run: previous token, 1 layer, 300 steps
PROMPT = (3, 1, 4, 1, 5)  # any tokens of the task's 16 symbols
GENERATED = 10  # new tokens for the logits comparison: prompt + generated fit the lab's 16 positions
TIMING_CHOICES = (64, 128, 256, 512)  # generated tokens for the timing chart
TIMING_REPEATS = 3  # generations per way; each step's fastest is kept


def trained_model(config: tt.TrainingConfig = LAB_CONFIG) -> tt.TinyTransformer:
    """The training lab's model trained on `config`, with the lab's draws in the lab's order (weights, held-out
    set, one batch per step), so that it is the lab's run. Shared through a cache: never changed after this."""
    draws = torch.Generator().manual_seed(int(config.seed))
    model = tt.TinyTransformer(config, draws)
    tt.draw_batch(config.task, tt.HELD_OUT, draws)  # the lab's held-out set: drawn so the batches match
    optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate, fused=True)  # as the lab
    for _ in range(config.steps):
        batch = tt.draw_batch(config.task, config.batch_size, draws)
        loss = tt.loss_of(model(batch.tokens), batch.targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval().requires_grad_(False)


_TRAINING = threading.Lock()
_TRAINED: dict[tt.TrainingConfig, tt.TinyTransformer] = {}


def lab_model() -> tt.TinyTransformer:
    """The training lab's default model, trained once per process (a lock: sessions run in threads).

    Shared by every session and never changed: generation only reads it, and the timing copies it.
    """
    with _TRAINING:
        if LAB_CONFIG not in _TRAINED:
            _TRAINED[LAB_CONFIG] = trained_model(LAB_CONFIG)
        return _TRAINED[LAB_CONFIG]


def kv_lesson(device_name: str, timed_tokens: int) -> CacheLesson:
    """Section (d) on the named device; `timed_tokens` must be one of TIMING_CHOICES (ValueError otherwise)."""
    if timed_tokens not in TIMING_CHOICES:
        raise ValueError(
            f"Generated tokens must be one of {', '.join(map(str, TIMING_CHOICES))}, got {timed_tokens!r}."
        )
    return cache_lesson(lab_model(), timed_tokens, resolve_device(device_name))


@dataclass(frozen=True)
class CacheLesson:
    """Generation with and without the cache: identical choices, the cache's growth, the time per token."""

    tokens: tuple[int, ...]
    max_logit_difference: float
    same_tokens: bool
    growth: pd.DataFrame  # step, position, cache rows, cache bytes
    timing: pd.DataFrame  # tokens so far, way (with / without the cache), milliseconds, median of 9 steps
    speedup: float  # total time without / with, over `timed_tokens`
    timed_tokens: int
    code: str
    prediction: Prediction
    chart: dict  # the time-per-token chart's Vega-Lite spec


def cache_lesson(model: tt.TinyTransformer, timed_tokens: int, device: torch.device) -> CacheLesson:
    """Generate from PROMPT both ways; time `timed_tokens` tokens both ways on `device`."""
    with_cache = kv_cache.generate(model, list(PROMPT), GENERATED, use_cache=True)
    without = kv_cache.generate(model, list(PROMPT), GENERATED, use_cache=False)
    growth = pd.DataFrame(
        {
            "step": range(1, GENERATED + 1),
            "new token": with_cache.tokens[len(PROMPT) :],
            "cache rows (tokens)": with_cache.cache_lengths,
            "cache size": [bytes_text(b) for b in with_cache.cache_bytes],
        }
    )
    timing, speedup = generation_timing(model, timed_tokens, device)
    return CacheLesson(
        tokens=with_cache.tokens,
        max_logit_difference=float((with_cache.logits - without.logits).abs().max()),
        same_tokens=with_cache.tokens == without.tokens,
        growth=growth,
        timing=timing,
        speedup=speedup,
        timed_tokens=timed_tokens,
        code=recipes.fill("attention_at_scale_kv_cache", {"new_tokens": GENERATED}),
        prediction=_cache_question(model),
        chart=charts_scale.generation_chart(timing).to_dict(validate=False),
    )


def generation_caption(kv: CacheLesson) -> str:
    prompt = ", ".join(map(str, PROMPT))
    new = ", ".join(map(str, kv.tokens[len(PROMPT) :]))
    same = (
        "Both ways chose the same tokens"
        if kv.same_tokens
        else "The two ways chose different tokens (a tie broken differently by rounding)"
    )
    return (
        f"Prompt {prompt}; then {GENERATED} tokens, each the most likely next one: {new}. The previous-token model "
        f"copies the token before the current one, so it repeats. {same}; their logits differ by at most "
        f"{kv.max_logit_difference:.1e}, float rounding from adding in a different order."
    )


def generation_timing(model: tt.TinyTransformer, timed_tokens: int, device: torch.device) -> tuple[pd.DataFrame, float]:
    longer = kv_cache.with_longer_context(model, len(PROMPT) + timed_tokens, generator(0, CPU)).to(device)
    # Each step's fastest of TIMING_REPEATS generations: on a shared machine other work only ever adds time.
    # What is left of the spikes (the garbage collector) the chart's line smooths: the median of 9 steps.
    steps = {
        way: np.min(
            [
                kv_cache.generate(longer, list(PROMPT), timed_tokens, use_cache).milliseconds
                for _ in range(TIMING_REPEATS)
            ],
            axis=0,
        )
        for way, use_cache in (("with the cache", True), ("without (whole prefix again)", False))
    }
    frame = pd.concat(
        [
            pd.DataFrame(
                {"tokens so far": range(len(PROMPT), len(PROMPT) + timed_tokens), "way": way, "milliseconds": times}
            )
            for way, times in steps.items()
        ],
        ignore_index=True,
    )
    frame["median of 9 steps"] = frame.groupby("way").milliseconds.transform(
        lambda times: times.rolling(9, center=True, min_periods=1).median()
    )
    totals = [float(times.sum()) for times in steps.values()]
    return frame, totals[1] / totals[0]


def _cache_question(model: tt.TinyTransformer) -> Prediction:
    width = model.unembedding.in_features
    layers = len(model.layers)
    per_token = 2 * layers * width * BYTES_FLOAT32
    return Prediction(
        question=f"The tiny model has {layers} layer{'s' if layers > 1 else ''} of width {width}. How much does its "
        "KV cache grow per generated token (float32)?",
        options=(bytes_text(width * BYTES_FLOAT32), bytes_text(per_token), bytes_text(per_token * width)),
        answer=1,
        explanation=(
            f"2 (a key and a value) × {layers} layer{'s' if layers > 1 else ''} × {width} numbers × 4 bytes = "
            f"{bytes_text(per_token)}: the table of the cache's growth above shows exactly this step."
        ),
    )


REAL_MODEL_SOURCES = (
    "Shapes from the models' published configurations: GPT-2 small (12 layers, 12 heads, width 768) and "
    "Meta's Llama 3 8B config.json (32 layers, 32 query heads, 8 key/value heads, width 4,096); 2 bytes a value."
)


def real_cache_table(tokens: int) -> pd.DataFrame:
    """KV cache per token and for `tokens` tokens, for GPT-2 small and Llama 3 8B with and without sharing."""
    shapes = (kv_cache.GPT2_SMALL, kv_cache.LLAMA3_8B, kv_cache.without_grouping(kv_cache.LLAMA3_8B))
    size = kv_cache.BYTES_PER_VALUE
    return pd.DataFrame(
        {
            "model": [s.name for s in shapes],
            "layers": [s.layers for s in shapes],
            "query heads": [s.query_heads for s in shapes],
            "K/V heads": [s.kv_heads for s in shapes],
            "head width": [s.head_dim for s in shapes],
            "per token": [bytes_text(s.bytes_per_token(size)) for s in shapes],
            f"at {tokens:,} tokens": [bytes_text(s.cache_bytes(tokens, size)) for s in shapes],
            "at its released context": [
                f"{bytes_text(s.cache_bytes(s.context, size))} ({s.context:,})" for s in shapes
            ],
        }
    )


def grouping_question() -> Prediction:
    """'Llama 3 8B shares each K/V head among 4 query heads: its cache is ...', answered by the configs."""
    grouped, plain = kv_cache.LLAMA3_8B, kv_cache.without_grouping(kv_cache.LLAMA3_8B)
    ratio = plain.bytes_per_token() / grouped.bytes_per_token()
    share = grouped.query_heads // grouped.kv_heads
    options = (
        "The same size: every query head still needs keys",
        f"{ratio:g} times smaller",
        f"{ratio**2:g} times smaller",
    )
    return Prediction(
        question=f"Llama 3 8B has {grouped.query_heads} query heads but only {grouped.kv_heads} key/value heads per "
        f"layer: {share} query heads read the same keys and values. Against one K/V head per query head, its cache is…",
        options=options,
        answer=1,
        explanation=(
            f"{bytes_text(grouped.bytes_per_token())} per token instead of {bytes_text(plain.bytes_per_token())}: "
            f"{ratio:g} times smaller. The cache stores keys and values only, so it shrinks with the number of "
            "K/V heads; the queries are computed fresh for each new token and never cached."
        ),
    )


# The cached computations the page calls (ui/cache.py `computed`): none reads the sidebar's Settings.
# The measurements are keyed by device and setting, so a class opening the page costs one measurement.
COST = LessonSpec(cost_view, uses=None, max_entries=2 * len(TOKEN_CHOICES))
ONLINE = LessonSpec(online_lesson, uses=None, max_entries=256)
TILING = LessonSpec(tiling_lesson, uses=None, max_entries=256)
KV = LessonSpec(kv_lesson, uses=None, max_entries=2 * len(TIMING_CHOICES))
