"""A tiny causal transformer, built from our own `MultiHeadAttention`, that learns a copying task live.

Two tasks with a known right answer, both drawn from a seeded `torch.Generator`:

- previous token: at position t, predict the token at t - 1 (one attention layer suffices);
- induction: random distinct tokens, a filler of random length, then the same tokens again;
  inside the repeat the next token is the one that followed the current token the first time.
  Finding it takes two layers (one head marks "the token before me", the next looks it up);
  because the gap varies, a single layer cannot solve it by position alone.

The model is attention-only (no MLP: copying needs none, and it learns faster without one):
token + position embeddings, then per layer x + MultiHeadAttention(LayerNorm(x)), then a final
LayerNorm and an unembedding. Training runs the fused path (PyTorch's kernel); the pictures use
the traced reference path, and a test ties the two.

Every random draw comes from one private generator seeded with `config.seed`, in this order:
the weights, the held-out set, then one training batch per step. The same seed gives the same
curves; core/recipes/training_lab.py repeats exactly these draws in plain PyTorch.

Shape legend: B = batch, T = tokens, V = vocabulary, D = d_model = heads * d_k, L = layers,
h = heads.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

import numpy as np
import pandas as pd
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import init

from core.lessons.common import Prediction
from core.modules import MultiHeadAttention, make_linear


class Task(StrEnum):
    PREVIOUS_TOKEN = "previous_token"
    INDUCTION = "induction"


class Init(StrEnum):
    BOOK = "book"  # W_q, W_k, W_v drawn with torch.rand: uniform on [0, 1), as SelfAttention_v1
    LINEAR = "linear"  # nn.Linear's default: uniform on ±1/sqrt(fan_in)


TASK_LABELS = {Task.PREVIOUS_TOKEN: "previous token", Task.INDUCTION: "induction (repeat after a random gap)"}
INIT_LABELS = {Init.BOOK: "the book's torch.rand (SelfAttention_v1)", Init.LINEAR: "nn.Linear's default"}

IGNORE_INDEX = -100  # cross_entropy's default ignore_index: positions with nothing to predict
NUM_SYMBOLS = 16  # content tokens 0..15
FILLER = NUM_SYMBOLS  # token 16: the induction task's gap
PREVIOUS_TOKEN_LENGTH = 16
INDUCTION_PART = 10  # tokens in the part that repeats
INDUCTION_MAX_GAP = 16  # the filler is 1..16 tokens long
INDUCTION_LENGTH = 2 * INDUCTION_PART + INDUCTION_MAX_GAP  # part, gap, part, then filler to the end
HELD_OUT = 128  # held-out sequences, drawn once per run
LOG_POINTS = 25  # curve points per run (plus step 0)

# Caps, with the reason the page shows when one bites. A step (with its share of the held-out
# evaluations) costs about STEP_OVERHEAD_MS + MS_PER_UNIT * layers * tokens * width**2 on one
# core; the constants are fitted, with margin, to runs on a busy 2-core machine (bench/training.py
# times the worst run the caps allow). The step cap keeps every run's estimate within RUN_BUDGET_S.
D_K_CHOICES = (4, 8, 16, 32, 64, 128, 256)
MAX_HEADS = 4
MAX_WIDTH = 256  # heads * d_k
MAX_STEPS = 3000
MAX_LEARNING_RATE = 0.1
LEARNING_RATES = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2)  # the page's choices for Adam (all below the cap)
STEP_OVERHEAD_MS = 6.0
MS_PER_UNIT = 2.5e-5
RUN_BUDGET_S = 30.0


@dataclass(frozen=True)
class TrainingConfig:
    """One training run; frozen and hashable, so it is the cache key for a run."""

    task: Task = Task.PREVIOUS_TOKEN  # which copying task
    layers: int = 1  # attention layers, 1 or 2 (induction needs 2)
    heads: int = 2  # heads per layer; the model width is heads * d_k
    d_k: int = 16  # width of each head's queries and keys (and values)
    scale: bool = True  # multiply q.k by 1/sqrt(d_k) (PyTorch's default) or leave it unscaled
    init: Init = Init.LINEAR  # how W_q, W_k, W_v start
    learning_rate: float = 3e-3  # Adam's step size
    steps: int = 300  # optimiser steps, one fresh batch each
    seed: int = 123  # seeds the one generator every draw comes from
    batch_size: int = 32  # sequences per step

    @property
    def d_model(self) -> int:
        return self.heads * self.d_k


DEFAULT_LAYERS = {Task.PREVIOUS_TOKEN: 1, Task.INDUCTION: 2}  # the depth each task needs
DEFAULT_STEPS = {Task.PREVIOUS_TOKEN: 300, Task.INDUCTION: 1000}  # seeds 1, 2, 3, 123 pass 85% by step 780


def default_config(task: Task) -> TrainingConfig:
    """What the page starts from for `task`: the depth it needs and enough steps to learn it."""
    return TrainingConfig(task=task, layers=DEFAULT_LAYERS[task], steps=DEFAULT_STEPS[task])


@dataclass(frozen=True)
class Limited:
    """A config after the caps, and one sentence per cap that changed it."""

    config: TrainingConfig
    reasons: tuple[str, ...]


def within_caps(config: TrainingConfig) -> Limited:
    """Clamp a requested config so that every run stays within the time budget; say why.

    Raises ValueError for values that are not merely too large (a zero, a wrong type).
    """
    _check(config)
    reasons: list[str] = []
    if config.d_model > MAX_WIDTH:
        heads = max(1, MAX_WIDTH // config.d_k)
        reasons.append(
            f"heads × d_k is at most {MAX_WIDTH} (the cost of every step grows with the square of the width): "
            f"{config.heads} heads of {config.d_k} became {heads}."
        )
        config = replace(config, heads=heads)
    step_cap = min(MAX_STEPS, int(RUN_BUDGET_S * 1000 / step_milliseconds(config)))
    if config.steps > step_cap:
        reasons.append(
            f"At most {step_cap:,} steps at this width and depth, so that a run ends within about "
            f"{RUN_BUDGET_S:.0f} s on one CPU core: {config.steps:,} became {step_cap:,}."
        )
        config = replace(config, steps=step_cap)
    return Limited(config, tuple(reasons))


def step_milliseconds(config: TrainingConfig) -> float:
    """The estimated time of one training step on one core (see the caps above)."""
    return STEP_OVERHEAD_MS + MS_PER_UNIT * config.layers * _length(config.task) * config.d_model**2


def estimated_seconds(config: TrainingConfig) -> float:
    return config.steps * step_milliseconds(config) / 1000


def _check(config: TrainingConfig) -> None:
    if not isinstance(config.task, Task) or not isinstance(config.init, Init):
        raise ValueError("task and init must be one of the listed choices.")
    if config.layers not in (1, 2):
        raise ValueError(f"layers must be 1 or 2, got {config.layers!r}.")
    if config.d_k not in D_K_CHOICES:
        raise ValueError(f"d_k must be one of {D_K_CHOICES}, got {config.d_k!r}.")
    if not (isinstance(config.heads, int) and 1 <= config.heads <= MAX_HEADS):
        raise ValueError(f"heads must be a whole number from 1 to {MAX_HEADS}, got {config.heads!r}.")
    if not (isinstance(config.steps, int) and config.steps >= 1):
        raise ValueError(f"steps must be a whole number of at least 1, got {config.steps!r}.")
    if not (0.0 < float(config.learning_rate) <= MAX_LEARNING_RATE):
        raise ValueError(f"the learning rate must be above 0 and at most {MAX_LEARNING_RATE}.")
    if not (isinstance(config.batch_size, int) and config.batch_size >= 1):
        raise ValueError(f"batch_size must be a whole number of at least 1, got {config.batch_size!r}.")


def _length(task: Task) -> int:
    return PREVIOUS_TOKEN_LENGTH if task is Task.PREVIOUS_TOKEN else INDUCTION_LENGTH


def vocab_size(task: Task) -> int:
    return NUM_SYMBOLS if task is Task.PREVIOUS_TOKEN else NUM_SYMBOLS + 1  # + the filler


# ----------------------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Batch:
    """tokens (B, T); targets (B, T), IGNORE_INDEX where a position is not scored."""

    tokens: torch.Tensor
    targets: torch.Tensor


def draw_batch(task: Task, batch_size: int, generator: torch.Generator) -> Batch:
    """A fresh batch of the task, every draw from `generator`."""
    if task is Task.PREVIOUS_TOKEN:
        return _previous_token_batch(batch_size, generator)
    return _induction_batch(batch_size, generator)


def _previous_token_batch(batch_size: int, generator: torch.Generator) -> Batch:
    tokens = torch.randint(0, NUM_SYMBOLS, (batch_size, PREVIOUS_TOKEN_LENGTH), generator=generator)  # (B, T)
    targets = torch.full_like(tokens, IGNORE_INDEX)
    targets[:, 1:] = tokens[:, :-1]  # position t answers with the token at t - 1; position 0 has none
    return Batch(tokens, targets)


def _induction_batch(batch_size: int, generator: torch.Generator) -> Batch:
    """[part | filler × gap | part | filler to the end]; scored: the repeat after its first token.

    The part's tokens are distinct (a random permutation's first tokens), so "what came after
    this token last time" has exactly one answer.
    """
    part = torch.rand(batch_size, NUM_SYMBOLS, generator=generator).argsort(dim=1)[:, :INDUCTION_PART]  # (B, P)
    gaps = torch.randint(1, INDUCTION_MAX_GAP + 1, (batch_size,), generator=generator)  # (B,)
    positions = torch.arange(INDUCTION_LENGTH)  # (T,)
    repeat_start = INDUCTION_PART + gaps[:, None]  # (B, 1)
    offset = positions[None, :] - repeat_start  # (B, T): index into the part inside the repeat
    in_repeat = (offset >= 0) & (offset < INDUCTION_PART)
    tokens = torch.full((batch_size, INDUCTION_LENGTH), FILLER, dtype=torch.long)
    tokens[:, :INDUCTION_PART] = part
    tokens[in_repeat] = part.gather(1, offset.clamp(0, INDUCTION_PART - 1))[in_repeat]
    # The token at position t predicts position t + 1: score where t + 1 is in the repeat, after its first token.
    next_offset = offset + 1
    scored = (next_offset >= 1) & (next_offset < INDUCTION_PART)
    targets = torch.full_like(tokens, IGNORE_INDEX)
    targets[scored] = part.gather(1, next_offset.clamp(0, INDUCTION_PART - 1))[scored]
    return Batch(tokens, targets)


# ----------------------------------------------------------------------------------------
# Model
# ----------------------------------------------------------------------------------------


def make_embedding(num: int, width: int, generator: torch.Generator) -> nn.Embedding:
    """An `nn.Embedding` initialised like PyTorch's default (standard normal), from `generator`."""
    layer = nn.Embedding(num, width, device="meta").to_empty(device="cpu")
    init.normal_(layer.weight, generator=generator)
    return layer


class AttentionLayer(nn.Module):
    """x + MultiHeadAttention(LayerNorm(x)): a pre-norm residual attention layer."""

    def __init__(self, config: TrainingConfig, context_length: int, generator: torch.Generator):
        super().__init__()
        self.norm = nn.LayerNorm(config.d_model)
        self.attention = MultiHeadAttention(
            config.d_model,
            config.d_model,
            context_length,
            0.0,
            config.heads,
            generator=generator,
            fused=True,
            scale=None if config.scale else 1.0,
        )
        if config.init is Init.BOOK:
            with torch.no_grad():  # SelfAttention_v1's draw, stored as nn.Linear stores it: (d_out, d_in)
                for projection in (self.attention.W_query, self.attention.W_key, self.attention.W_value):
                    projection.weight.copy_(torch.rand(projection.weight.shape, generator=generator))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.attention(self.norm(x))  # (B, T, D)


@dataclass(frozen=True)
class ForwardTrace:
    """The traced forward pass: logits (B, T, V); per layer, scaled scores and weights (B, h, T, T)."""

    logits: torch.Tensor
    scaled_scores: tuple[torch.Tensor, ...]
    weights: tuple[torch.Tensor, ...]


class TinyTransformer(nn.Module):
    """Embeddings, `config.layers` attention layers, a final LayerNorm and the unembedding."""

    def __init__(self, config: TrainingConfig, generator: torch.Generator):
        super().__init__()
        vocab, length = vocab_size(config.task), _length(config.task)
        self.token_embedding = make_embedding(vocab, config.d_model, generator)
        self.position_embedding = make_embedding(length, config.d_model, generator)
        self.layers = nn.ModuleList([AttentionLayer(config, length, generator) for _ in range(config.layers)])
        self.final_norm = nn.LayerNorm(config.d_model)
        self.unembedding = make_linear(config.d_model, vocab, False, generator)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1])
        return self.token_embedding(tokens) + self.position_embedding(positions)  # (B, T, D)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """The fast path (fused attention): tokens (B, T) -> logits (B, T, V)."""
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.unembedding(self.final_norm(x))  # (B, T, V)

    def trace(self, tokens: torch.Tensor, scale: float | None = None) -> ForwardTrace:
        """The readable path, keeping each layer's scores and weights; `scale` overrides the layers'."""
        x = self.embed(tokens)
        scores, weights = [], []
        for layer in self.layers:
            step = layer.attention.trace(layer.norm(x), scale=scale)
            scores.append(step.masked_scores)
            weights.append(step.weights)
            x = x + step.output  # (B, T, D)
        return ForwardTrace(self.unembedding(self.final_norm(x)), tuple(scores), tuple(weights))


def loss_of(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over the scored positions. logits (B, T, V), targets (B, T)."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX)  # (B*T, V)


def accuracy_of(logits: torch.Tensor, targets: torch.Tensor) -> float:
    """Share of scored positions whose most likely token is the right one."""
    scored = targets != IGNORE_INDEX
    return float((logits.argmax(dim=-1)[scored] == targets[scored]).float().mean())


# ----------------------------------------------------------------------------------------
# Statistics at initialisation
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StartStatistics:
    """The untrained model on the held-out set, with scaling on and off (same weights).

    logit_std: std of the first layer's logits q.k * scale over the allowed (causal) entries.
    entropy: mean softmax entropy of a query's row, in nats; uniform_entropy is its maximum.
    grad_norm: norm of the loss's gradient reaching every W_query and W_key.
    """

    d_k: int
    logit_std_scaled: float
    logit_std_unscaled: float
    entropy_scaled: float
    entropy_unscaled: float
    uniform_entropy: float
    grad_norm_scaled: float
    grad_norm_unscaled: float

    @property
    def theory_ratio(self) -> float:
        return math.sqrt(self.d_k)

    @property
    def measured_ratio(self) -> float:
        return self.logit_std_unscaled / self.logit_std_scaled


def _one_side(model: TinyTransformer, held_out: Batch, scale: float) -> tuple[float, float, float]:
    model = copy.deepcopy(model)  # a private copy: its gradients never touch the run's model
    traced = model.trace(held_out.tokens, scale=scale)
    scores, weights = traced.scaled_scores[0].detach(), traced.weights[0].detach()  # (B, h, T, T)
    allowed = torch.isfinite(scores)
    logit_std = float(scores[allowed].std())
    entropy = float(-(weights * weights.clamp_min(1e-30).log()).sum(dim=-1).mean())
    loss_of(traced.logits, held_out.targets).backward()
    squares = sum(
        float(p.grad.pow(2).sum())
        for layer in model.layers
        for p in (layer.attention.W_query.weight, layer.attention.W_key.weight)
    )
    return logit_std, entropy, math.sqrt(squares)


def start_statistics(model: TinyTransformer, held_out: Batch, d_k: int) -> StartStatistics:
    std_s, entropy_s, grad_s = _one_side(model, held_out, 1.0 / math.sqrt(d_k))
    std_u, entropy_u, grad_u = _one_side(model, held_out, 1.0)
    length = held_out.tokens.shape[1]
    uniform = float(np.mean(np.log(np.arange(1, length + 1))))  # row t has t + 1 allowed keys
    return StartStatistics(d_k, std_s, std_u, entropy_s, entropy_u, uniform, grad_s, grad_u)


# ----------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainingRun:
    """What one run shows (small: it is cached and shared across sessions).

    steps, losses, accuracies: one entry per logged step (step 0 = before training); the loss is
    the mean training loss since the previous log, the accuracy is on the held-out set.
    example_tokens (T,): one held-out sequence; example_targets (T,): its scored answers.
    attention_before / attention_after (L, h, T, T): each head's weights on that sequence.
    """

    config: TrainingConfig
    steps: tuple[int, ...]
    losses: tuple[float, ...]
    accuracies: tuple[float, ...]
    example_tokens: tuple[int, ...]
    example_targets: tuple[int, ...]
    attention_before: np.ndarray
    attention_after: np.ndarray
    start: StartStatistics
    seconds: float

    @property
    def final_accuracy(self) -> float:
        return self.accuracies[-1]


ProgressCallback = Callable[[int, int], None]  # (steps done, steps in all)


def log_steps(steps: int) -> list[int]:
    """The steps at which a run logs: 0, then about LOG_POINTS evenly spaced, always the last."""
    every = max(1, steps // LOG_POINTS)
    return sorted({0, *range(every, steps + 1, every), steps})


def _attention_on(model: TinyTransformer, tokens: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        weights = model.trace(tokens[None, :]).weights  # per layer (1, h, T, T)
    return torch.stack([w[0] for w in weights]).numpy().astype(np.float32)  # (L, h, T, T)


def train(config: TrainingConfig, on_progress: ProgressCallback | None = None) -> TrainingRun:
    """Train a fresh model on `config` (call `within_caps` first; this trusts its input)."""
    _check(config)
    started = time.perf_counter()
    generator = torch.Generator().manual_seed(int(config.seed))
    model = TinyTransformer(config, generator)
    held_out = draw_batch(config.task, HELD_OUT, generator)
    example = held_out.tokens[0]
    start = start_statistics(model, held_out, config.d_k)
    before = _attention_on(model, example)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate, fused=True)  # one kernel per step
    logged = set(log_steps(config.steps))
    steps, losses, accuracies = [0], [_held_out_loss(model, held_out)], [_held_out_accuracy(model, held_out)]
    since_log: list[float] = []
    for step in range(1, config.steps + 1):
        batch = draw_batch(config.task, config.batch_size, generator)
        loss = loss_of(model(batch.tokens), batch.targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        since_log.append(loss.item())
        if step in logged:
            steps.append(step)
            losses.append(sum(since_log) / len(since_log))
            accuracies.append(_held_out_accuracy(model, held_out))
            since_log = []
            if on_progress is not None:
                on_progress(step, config.steps)
    return TrainingRun(
        config=config,
        steps=tuple(steps),
        losses=tuple(losses),
        accuracies=tuple(accuracies),
        example_tokens=tuple(example.tolist()),
        example_targets=tuple(held_out.targets[0].tolist()),
        attention_before=before,
        attention_after=_attention_on(model, example),
        start=start,
        seconds=time.perf_counter() - started,
    )


def _held_out_accuracy(model: TinyTransformer, held_out: Batch) -> float:
    with torch.no_grad():
        return accuracy_of(model(held_out.tokens), held_out.targets)


def _held_out_loss(model: TinyTransformer, held_out: Batch) -> float:
    with torch.no_grad():
        return float(loss_of(model(held_out.tokens), held_out.targets))


# ----------------------------------------------------------------------------------------
# Reading the runs
# ----------------------------------------------------------------------------------------


def previous_token_share(attention: np.ndarray) -> np.ndarray:
    """(L, h, T, T) -> (L, h): mean weight a query puts on the token just before it (t >= 1)."""
    length = attention.shape[-1]
    rows = np.arange(1, length)
    return attention[..., rows, rows - 1].mean(axis=-1)


def chance_accuracy(task: Task) -> float:
    return 1.0 / NUM_SYMBOLS


def steps_to_reach(run: TrainingRun, level: float) -> int | None:
    """The first logged step whose held-out accuracy is at least `level`; None if never."""
    return next((s for s, a in zip(run.steps, run.accuracies, strict=True) if a >= level), None)


def run_label(config: TrainingConfig) -> str:
    """A short name for a run in a legend: what differs between runs is what a student changes."""
    scaled = "scaled" if config.scale else "UNscaled"
    task = "prev" if config.task is Task.PREVIOUS_TOKEN else "induction"
    return (
        f"{task} · {config.layers}L×{config.heads}h · d_k={config.d_k} · {scaled} · {config.init.value} init"
        f" · lr={config.learning_rate:g} · seed {config.seed}"
    )


def verdict(runs: Sequence[TrainingRun]) -> list[str]:
    """Sentences about what these runs show, computed from their numbers.

    Pairs of runs that differ only in scaling are compared; a run without a partner is described alone.
    """
    comparisons = _pairs(runs)
    sentences = [_compare(scaled, unscaled) for scaled, unscaled in comparisons]
    paired = {id(run) for pair in comparisons for run in pair}
    if len(comparisons) >= 2:
        sentences.append(_where_it_matters(comparisons))
    sentences += [_describe(run) for run in runs if id(run) not in paired]
    return sentences


def _pairs(runs: Sequence[TrainingRun]) -> list[tuple[TrainingRun, TrainingRun]]:
    """(scaled, unscaled) runs whose configs differ only in scaling, each run used once."""
    pairs, used = [], set()
    for i, run in enumerate(runs):
        if i in used or not run.config.scale:
            continue
        for j, other in enumerate(runs):
            if j not in used and other.config == replace(run.config, scale=False):
                pairs.append((run, other))
                used.update({i, j})
                break
    return pairs


def _where_it_matters(comparisons: list[tuple[TrainingRun, TrainingRun]]) -> str:
    """One line over several comparisons: the accuracy scaling added at each setting, widest d_k last."""
    ordered = sorted(comparisons, key=lambda pair: (pair[0].config.d_k, pair[0].config.init.value))
    parts = [
        f"d_k={s.config.d_k} ({s.config.init.value} init, {TASK_LABELS[s.config.task]}): "
        f"{100 * (s.final_accuracy - u.final_accuracy):+.0f} points"
        for s, u in ordered
    ]
    return "Across your comparisons, scaled minus unscaled accuracy: " + "; ".join(parts) + "."


def _percent(x: float) -> str:
    return f"{100 * x:.0f}%"


def _describe(run: TrainingRun) -> str:
    c = run.config
    reached = steps_to_reach(run, 0.9)
    speed = f"reached 90% at step {reached}" if reached is not None else "never reached 90%"
    return (
        f"{run_label(c)}: {_percent(run.final_accuracy)} held-out accuracy after {c.steps} steps "
        f"(chance {_percent(chance_accuracy(c.task))}); it {speed}."
    )


def _compare(scaled: TrainingRun, unscaled: TrainingRun) -> str:
    c = scaled.config
    head = (
        f"At d_k={c.d_k} ({TASK_LABELS[c.task]}, {c.layers} layer{'s' if c.layers > 1 else ''}, "
        f"{c.heads} head{'s' if c.heads > 1 else ''}, {c.init.value} init, {c.steps} steps): "
        f"unscaled reached {_percent(unscaled.final_accuracy)}, scaled {_percent(scaled.final_accuracy)}."
    )
    fast_s, fast_u = steps_to_reach(scaled, 0.9), steps_to_reach(unscaled, 0.9)
    gap = scaled.final_accuracy - unscaled.final_accuracy
    start = scaled.start
    why = (
        f" At the start the unscaled logits were {start.measured_ratio:.1f}× wider (theory √d_k = "
        f"{start.theory_ratio:.1f}), the softmax entropy {start.entropy_unscaled:.2f} instead of "
        f"{start.entropy_scaled:.2f} nats, and the gradient reaching W_q and W_k "
        f"{start.grad_norm_unscaled:.3g} instead of {start.grad_norm_scaled:.3g}."
    )
    if gap >= 0.05:
        unfinished = " Neither run has learned the task yet." if scaled.final_accuracy < 0.5 else ""
        return head + " Without scaling, learning fell behind." + unfinished + why
    if fast_s is not None and fast_u is not None and fast_u > fast_s:
        return (
            head
            + f" Both got there, but unscaled needed {fast_u} steps to reach 90% where scaled needed {fast_s}."
            + why
        )
    if gap <= -0.05:
        return head + " Here the unscaled run did better: scaling is not what limits this setting." + why
    return (
        head + " Here the unscaled run learns as well: at this width the saturation does not stop Adam. "
        "Raise d_k or use the book's init to see where it breaks down." + why
    )


# ----------------------------------------------------------------------------------------
# What the page draws
# ----------------------------------------------------------------------------------------


def curves_frame(runs: Sequence[TrainingRun]) -> pd.DataFrame:
    """Long frame for `charts_training.curves_chart`: run, scaling, step, metric, value."""
    rows = []
    for number, run in enumerate(runs, start=1):
        label = f"{number}. {run_label(run.config)}"
        scaling = "scaled" if run.config.scale else "unscaled"
        for step, loss, accuracy in zip(run.steps, run.losses, run.accuracies, strict=True):
            rows.append((label, scaling, step, "loss", loss))
            rows.append((label, scaling, step, "accuracy", accuracy))
    return pd.DataFrame(rows, columns=["run", "scaling", "step", "metric", "value"])


START_QUANTITIES = ("std of the logits", "softmax entropy (nats)", "gradient norm on W_q, W_k")


def start_frame(start: StartStatistics) -> pd.DataFrame:
    """Long frame for `charts_training.start_chart`: quantity, scores, value."""
    pairs = {
        START_QUANTITIES[0]: (start.logit_std_scaled, start.logit_std_unscaled),
        START_QUANTITIES[1]: (start.entropy_scaled, start.entropy_unscaled),
        START_QUANTITIES[2]: (start.grad_norm_scaled, start.grad_norm_unscaled),
    }
    rows = [(q, kind, v) for q, values in pairs.items() for kind, v in zip(("scaled", "unscaled"), values, strict=True)]
    return pd.DataFrame(rows, columns=["quantity", "scores", "value"])


def start_table(start: StartStatistics) -> pd.DataFrame:
    """The same numbers as a table, with the ratio and what theory says beside them."""
    return pd.DataFrame(
        {
            "quantity": list(START_QUANTITIES),
            "scaled": [start.logit_std_scaled, start.entropy_scaled, start.grad_norm_scaled],
            "unscaled": [start.logit_std_unscaled, start.entropy_unscaled, start.grad_norm_unscaled],
            "unscaled / scaled": [
                start.measured_ratio,
                start.entropy_unscaled / start.entropy_scaled,
                start.grad_norm_unscaled / start.grad_norm_scaled,
            ],
            "theory": [
                f"ratio √d_k = {start.theory_ratio:.2f}",
                f"uniform attention: {start.uniform_entropy:.2f}; one-hot: 0",
                f"about √d_k = {start.theory_ratio:.2f} from the missing factor alone; less as the softmax saturates",
            ],
        }
    )


def token_labels(tokens: Sequence[int]) -> list[str]:
    """Unique axis labels for a sequence: position and symbol ('·' is the filler)."""
    return [f"{i}:{'·' if t == FILLER else t}" for i, t in enumerate(tokens)]


def recipe_values(config: TrainingConfig) -> dict[str, object]:
    """The settings block of core/recipes/training_lab.py for this run."""
    return {
        "task": config.task.value,
        "layers": config.layers,
        "heads": config.heads,
        "d_k": config.d_k,
        "scale": config.scale,
        "init": config.init.value,
        "learning_rate": float(config.learning_rate),
        "steps": config.steps,
        "seed": config.seed,
        "batch_size": config.batch_size,
    }


def spread_question(d_k: int) -> Prediction:
    """Predict-then-reveal: how much wider the attention logits start without 1/sqrt(d_k).

    The answer is the theory the start statistics below measure: q.k sums d_k products of
    similar size, so its spread grows like sqrt(d_k), and scaling divides exactly that out.
    """
    root = math.sqrt(d_k)
    return Prediction(
        question=f"At the start of training with d_k = {d_k}, how much wider is the spread of the attention "
        "logits q·k without the 1/√d_k than with it?",
        options=("About the same", f"About √d_k = {root:.0f} times", f"About d_k = {d_k} times"),
        answer=1,
        explanation=(
            f"Exactly √{d_k} = {root:.1f}: dividing by √d_k is the only difference, and q·k's spread grows "
            "like √d_k because it adds d_k products of the same size. Train a run and compare with the start "
            "statistics at the bottom of the page, measured on the model itself."
        ),
    )
