"""Lesson 9, section (d): the KV cache with the training lab's tiny transformer (the page's KV).

Generation runs through `core.models.kv_cache`; the timings are each step's fastest of a few runs.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch

from core import recipes
from core.app.choices import TIMING_CHOICES  # generated tokens for the timing chart (a link names one too)
from core.app.registry import LessonSpec
from core.charts import at_scale as charts_scale
from core.charts.spec import VegaChart
from core.inputs.device import resolve_device
from core.lessons import training_lab
from core.lessons.attention_at_scale import BYTES_FLOAT32, bytes_text
from core.lessons.common import CPU, Prediction, generator
from core.models import kv_cache
from core.models import tiny_transformer as tt

if TYPE_CHECKING:  # the GPT's modules load only where its timing is shown
    from core.lessons.inside_gpt_cache import CacheTiming

# ----------------------------------------------------------------------------------------
# (d) The KV cache
# ----------------------------------------------------------------------------------------

LAB_CONFIG = tt.TrainingConfig()  # the training lab's default run: previous token, 1 layer, 300 steps
PROMPT = (3, 1, 4, 1, 5)  # any tokens of the task's 16 symbols
GENERATED = 10  # new tokens for the logits comparison: prompt + generated fit the lab's 16 positions
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


def kv_code() -> str:
    """The Code box: the training lab's recipe for the page's model (LAB_CONFIG), then generation both ways.

    It used to build an untrained seed-0 toy and print other tokens (11, 11, 12, ...) and another difference
    than the page; this trains the page's model with the page's draws and prints the page's tokens.
    """
    training = recipes.fill("training_lab", training_lab.recipe_values(LAB_CONFIG))
    generation = recipes.fill("attention_at_scale_kv_cache", {"prompt": list(PROMPT), "new_tokens": GENERATED})
    return training + "\n\n# ---- generation with the model just trained ----\n" + generation


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
    chart: VegaChart  # time per generated token


def cache_lesson(model: tt.TinyTransformer, timed_tokens: int, device: torch.device) -> CacheLesson:
    """Generate from PROMPT both ways; time `timed_tokens` tokens both ways on `device`."""
    with_cache = kv_cache.generate(model, list(PROMPT), GENERATED, use_cache=True)
    without = kv_cache.generate(model, list(PROMPT), GENERATED, use_cache=False)
    growth = pd.DataFrame(
        {
            "step": range(1, GENERATED + 1),
            "new token": with_cache.tokens[len(PROMPT) :],
            "cache rows (tokens)": with_cache.cache_lengths,
            # Exact bytes, not KiB to one decimal: 0.1 KiB rounds a 256-byte step to +0.2 or +0.3 KiB.
            "cache size": [f"{b:,} B" for b in with_cache.cache_bytes],
            "added": _cache_steps(with_cache.cache_bytes),
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
        code=kv_code(),
        prediction=cache_question(model),
        chart=charts_scale.generation_chart(timing),
    )


def speedup_sentence(kv: CacheLesson) -> str:
    """What the speed-up under the timing chart means, read from the chart's own steps.

    The s22 review: at 64 tokens the metric read 0.8× with nothing to say why a cache could lose. On the lab's
    tiny model a step's attention is so little work that what every step pays whatever the length decides; the
    chart's first and last steps (their 9-step medians) say whether the cache has begun to pull ahead.
    """
    medians = kv.timing.pivot(index="tokens so far", columns="way", values="median of 9 steps")
    first, last = medians.iloc[0], medians.iloc[-1]
    steps = (
        f"a step without the cache took {first[WITHOUT]:.2f} ms at the start and {last[WITHOUT]:.2f} ms at the end, "
        f"with it {first[WITH]:.2f} ms and {last[WITH]:.2f} ms (medians of 9 steps; a first step runs the whole "
        "prompt either way, and with the cache also stores its keys and values)"
    )
    if kv.speedup >= 1:
        return f"Over {kv.timed_tokens} generated tokens the cache was {kv.speedup:.1f}× faster: {steps}."
    ahead = (
        "by the last step the cache's step was the quicker one, so a longer generation favours it"
        if last[WITH] < last[WITHOUT]
        else "even at the last step the cache's step was not the quicker one"
    )
    return (
        f"Over {kv.timed_tokens} generated tokens the cache was slower ({kv.speedup:.1f}×): {steps}. The tiny model's "
        "attention over a few dozen keys is so little work that what every step pays whatever the length (Python, "
        f"launching each operation, appending to the cache) decides the time; {ahead}. The line below "
        "makes the same comparison on a real GPT."
    )


def _cache_steps(cache_bytes: tuple[int, ...]) -> list[str]:
    """What each step added to the cache; the first step fills it with the whole prompt at once."""
    first = f"+{cache_bytes[0]:,} B (the prompt)"
    return [first] + [f"+{after - before:,} B" for before, after in zip(cache_bytes, cache_bytes[1:], strict=False)]


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


WITH, WITHOUT = "with the cache", "without (whole prefix again)"  # the timing frame's two ways


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
        for way, use_cache in ((WITH, True), (WITHOUT, False))
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


def cache_question(model: tt.TinyTransformer) -> Prediction:
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
            f"{bytes_text(per_token)}: the table of the cache's growth below shows exactly this step."
        ),
    )


REAL_MODEL_SOURCES = (
    "Shapes from the models' published configurations: SmolLM2-135M's GGUF file (30 layers, 9 query heads, "
    "3 key/value heads, width 576), GPT-2 small (12 layers, 12 heads, width 768) and Meta's Llama 3 8B "
    "config.json (32 layers, 32 query heads, 8 key/value heads, width 4,096); 2 bytes a value."
)


def real_cache_table(tokens: int) -> pd.DataFrame:
    """KV cache per token and for `tokens` tokens, for GPT-2 small and Llama 3 8B with and without sharing.

    One column per model, one row per quantity: eight columns side by side were cut off on the right of
    a laptop's page. A model whose released context is shorter than `tokens` gets no size there (GPT-2
    small reads 1,024 tokens; its cache at 8,192 would describe a model that does not exist).
    """
    shapes = (
        kv_cache.SMOLLM2_135M,
        kv_cache.GPT2_SMALL,
        kv_cache.LLAMA3_8B,
        kv_cache.without_grouping(kv_cache.LLAMA3_8B),
    )
    size = kv_cache.BYTES_PER_VALUE
    rows = {
        "layers": [str(s.layers) for s in shapes],
        "query heads": [str(s.query_heads) for s in shapes],
        "K/V heads": [str(s.kv_heads) for s in shapes],
        "head width": [str(s.head_dim) for s in shapes],
        "per token": [bytes_text(s.bytes_per_token(size)) for s in shapes],
        f"at {tokens:,} tokens": [
            # short: "past its 1,024-token context" was cut off
            bytes_text(s.cache_bytes(tokens, size)) if tokens <= s.context else "past its context"
            for s in shapes
        ],
        "at its released context": [f"{bytes_text(s.cache_bytes(s.context, size))} ({s.context:,})" for s in shapes],
    }
    names = [shapes[0].name, shapes[1].name, shapes[2].name, "the same, one K/V head per query head"]  # short
    return pd.DataFrame(rows, index=names).T.rename_axis("KV cache, 16-bit").reset_index()


REAL_GPT_PROMPT_INDEX = 0  # lesson 10's first checked prompt, timed on the lab's own GPT
REAL_GPT_NEW_TOKENS = 8


def real_gpt_caption(timing: CacheTiming) -> str:
    """What the lab's own GPT measured on this server: the time per token with and without the cache."""
    # lesson 12's, where the GPT times its cache
    from core.lessons.inside_gpt_cache import logits_sentence, time_per_token_sentence

    same = "the same tokens" if timing.same_tokens else "different tokens"
    return (
        f"On the lab's own GPT, SmolLM2-135M (lesson 12 times it too), measured on this server, generating "
        f"{len(timing.lengths)} tokens: {time_per_token_sentence(timing)} Both ways chose {same}, and "
        f"{logits_sentence(timing)}."
    )


def grouping_question() -> Prediction:
    """'Llama 3 8B shares each K/V head among 4 query heads: its cache is ...', answered by the configs."""
    grouped, plain = kv_cache.LLAMA3_8B, kv_cache.without_grouping(kv_cache.LLAMA3_8B)
    ratio = plain.bytes_per_token() / grouped.bytes_per_token()
    options = (
        "The same size: every query head still needs keys",
        f"{ratio:g} times smaller",
        f"{ratio**2:g} times smaller",
    )
    return Prediction(
        # The stem gives the heads, not how many share one K/V head: "4 query heads read the same keys and values"
        # above the option "4 times smaller" answered it (the s22 review).
        question=f"Llama 3 8B has {grouped.query_heads} query heads but only {grouped.kv_heads} key/value heads per "
        "layer: each group of query heads reads one shared set of keys and values. Against one K/V head per query "
        "head, its cache is…",
        options=options,
        answer=1,
        explanation=(
            f"{bytes_text(grouped.bytes_per_token())} per token instead of {bytes_text(plain.bytes_per_token())}: "
            f"{ratio:g} times smaller. The cache stores keys and values only, so it shrinks with the number of "
            "K/V heads; the queries are computed fresh for each new token and never cached."
        ),
    )


KV = LessonSpec(kv_lesson, uses=None, max_entries=2 * len(TIMING_CHOICES))
