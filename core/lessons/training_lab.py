"""Lesson 8, "Train it yourself": what the page shows about training runs of the tiny transformer.

The model, its data and its training loop live in core/models/tiny_transformer.py; here are
the lesson's parts: the caps that bound a run's cost (with the sentence the page shows when
one bites), the labels of the choices, the verdict sentences computed from the runs, the
frames the charts draw, the recipe's values and the predict-then-reveal question.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import pandas as pd
import torch

from core import recipes
from core.app.choices import MAX_STEPS
from core.app.registry import LessonSpec
from core.attention.head_measures import previous_token_share
from core.lessons.common import Prediction, matrix_frame
from core.models.tiny_transformer import (
    D_K_CHOICES,
    IGNORE_INDEX,
    MAX_HEADS,
    NO_INDUCTION_ACCURACY,
    NUM_SYMBOLS,
    Init,
    StartStatistics,
    Task,
    TrainingConfig,
    TrainingRun,
    check,
    sequence_length,
    start_of,
    train,
)

__all__ = ["D_K_CHOICES", "MAX_HEADS", "Init", "Task", "TrainingConfig", "TrainingRun"]  # what the page uses

TASK_LABELS = {Task.PREVIOUS_TOKEN: "previous token", Task.INDUCTION: "induction (repeat after a random gap)"}
INIT_LABELS = {Init.BOOK: "the book's torch.rand (SelfAttention_v1)", Init.LINEAR: "nn.Linear's default"}
RUNS_KEPT = 6  # runs overlaid per session: enough for a comparison, few enough to read the legend

# Caps, with the reason the page shows when one bites. A step (with its share of the held-out
# evaluations) costs about STEP_OVERHEAD_MS + MS_PER_UNIT * layers * tokens * width**2 on one
# core; the constants are fitted, with margin, to runs on a busy 2-core machine (bench/training.py
# times the worst run the caps allow). The step cap keeps every run's estimate within RUN_BUDGET_S.
MAX_WIDTH = 256  # heads * d_k
# MAX_STEPS, the step box's top, comes from core.app.choices: a link's train_steps is bounded by it too.
STEP_OVERHEAD_MS = 6.0
MS_PER_UNIT = 2.5e-5
RUN_BUDGET_S = 30.0


DEFAULT_LAYERS = {Task.PREVIOUS_TOKEN: 1, Task.INDUCTION: 2}  # the depth each task needs
DEFAULT_STEPS = {Task.PREVIOUS_TOKEN: 300, Task.INDUCTION: 1500}  # seeds 1, 2, 3 pass 85% by step 660, seed 123 by 900


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
    check(config)
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
    return STEP_OVERHEAD_MS + MS_PER_UNIT * config.layers * sequence_length(config.task) * config.d_model**2


def estimated_seconds(config: TrainingConfig) -> float:
    return config.steps * step_milliseconds(config) / 1000


PACE_SAID = (0.8, 1.25)  # a server pace inside this band is the quiet core's estimate, said as it is


def estimate_sentence(config: TrainingConfig, pace: float) -> str:
    """What the page says a run of `config` takes. `pace` is the server's seconds per estimated second over its
    recent finished runs (services/training_queue.py; 1.0 before any): the estimate is for one quiet core, and a
    teacher's review on a busy server saw "about 2 s" and waited 15-19 s."""
    quiet = estimated_seconds(config)
    if PACE_SAID[0] <= pace <= PACE_SAID[1]:
        return f"Estimated time on one core: about {quiet:.0f} s (at once if someone ran it already)."
    return (
        f"Estimated time on this server now: about {quiet * pace:.0f} s. Its recent runs took {pace:.1f}× "
        f"their estimates (about {quiet:.0f} s on one quiet core); at once if someone ran it already."
    )


def chance_accuracy(task: Task) -> float:
    """What a model that knows the task's format, but does not look the answer up, scores.

    Previous token: every token is uniform and independent of the earlier ones, so 1 in 16.
    Induction: the best one attention layer reached (NO_INDUCTION_ACCURACY, measured).
    """
    return 1.0 / NUM_SYMBOLS if task is Task.PREVIOUS_TOKEN else NO_INDUCTION_ACCURACY


def chance_label(task: Task) -> str:
    """How the page names `chance_accuracy` on the curves and in the verdicts."""
    if task is Task.PREVIOUS_TOKEN:
        return "guessing (1 in 16)"
    return "one layer without induction, best of 9 seeds"


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


def verdict(runs: Sequence[TrainingRun], start_shown: bool = True) -> list[str]:
    """Sentences about what these runs show, computed from their numbers.

    Pairs of runs that differ only in scaling are compared; a run without a partner is described alone.
    `start_shown` False (the page's question is not answered yet): a pair's start statistics are left out,
    since the gradient at the start, both ways, is the question's answer (a review pressed "Scaled vs
    unscaled" first and read 0.0355 against 0.0105 above "Choose an answer").
    """
    comparisons = _pairs(runs)
    sentences = [_compare(scaled, unscaled, start_shown) for scaled, unscaled in comparisons]
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


LEARNED = 0.5  # a run below this held-out accuracy has not learned the task yet: no comparison drawn from it
REACHED = 0.9  # the level whose first step measures speed
CLOSE = 0.05  # final accuracies closer than this count as the same


def _describe(run: TrainingRun) -> str:
    c = run.config
    reached = steps_to_reach(run, REACHED)
    speed = (
        f"reached {_percent(REACHED)} at step {reached}"
        if reached is not None
        else f"never reached {_percent(REACHED)}"
    )
    return (
        f"{run_label(c)}: {_percent(run.final_accuracy)} held-out accuracy after {c.steps} steps "
        f"({chance_label(c.task)}: {_percent(chance_accuracy(c.task))}); it {speed}."
    )


# What the compare buttons show, measured on the previous-token task, 300 steps, seeds 123 and 7 (tested in
# tests/unit/test_training_scale_claims.py): the default pair does not show the scale helping.
COMPARE_NOTE = (
    "What a scaled/unscaled pair shows depends on the setting. At the lab's default (previous token, d_k 16, "
    "nn.Linear's init) the unscaled run reached 90% first (step 48 against 60, seeds 123 and 7); with the book's "
    "torch.rand init the scaled one did (steps 72 and 84 against 96 and 108). The verdict below reads your pair."
)


def _still_to_try(config: TrainingConfig) -> str:
    """Where scaling may start to matter, offering only settings the page still allows."""
    wider = [d for d in D_K_CHOICES if d > config.d_k and config.heads * d <= MAX_WIDTH]
    offers = []
    if wider:
        offers.append(f"a wider d_k (up to {wider[-1]} with {config.heads} head{'s' if config.heads > 1 else ''})")
    if config.init is not Init.BOOK:
        offers.append("the book's init")
    if not offers:
        return " This is already the widest d_k and the book's init at this head count."
    return " To look for a setting where it does matter, try " + " or ".join(offers) + "."


START_HIDDEN = (
    " How the two runs differed at the start (the logits' width, the entropy, the gradient) follows your answer."
)


def _compare(scaled: TrainingRun, unscaled: TrainingRun, start_shown: bool = True) -> str:
    """One verdict on a scaled/unscaled pair; every clause follows from the two runs' numbers."""
    c = scaled.config
    s, u = scaled.final_accuracy, unscaled.final_accuracy
    head = (
        f"At d_k={c.d_k} ({TASK_LABELS[c.task]}, {c.layers} layer{'s' if c.layers > 1 else ''}, "
        f"{c.heads} head{'s' if c.heads > 1 else ''}, {c.init.value} init, {c.steps} steps): "
        f"unscaled reached {_percent(u)}, scaled {_percent(s)}."
    )
    fast_s, fast_u = steps_to_reach(scaled, REACHED), steps_to_reach(unscaled, REACHED)
    start = scaled.start
    why = (
        f" At the start the unscaled logits were {start.measured_ratio:.1f}× wider (theory √d_k = "
        f"{start.theory_ratio:.1f}), the softmax entropy {start.entropy_unscaled:.2f} instead of "
        f"{start.entropy_scaled:.2f} nats, and the gradient reaching W_q and W_k "
        f"{start.grad_norm_unscaled:.3g} instead of {start.grad_norm_scaled:.3g}."
        if start_shown
        else START_HIDDEN
    )
    if max(s, u) < LEARNED:
        remedy = (
            "one layer cannot build an induction head, which needs a previous-token head in a layer before it: "
            "choose 2 layers (more steps will not help)"
            if c.task is Task.INDUCTION and c.layers == 1
            else "train for more steps"
        )
        return (
            head + f" Neither run has learned the task yet (both below {_percent(LEARNED)}; "
            f"{chance_label(c.task)}: {_percent(chance_accuracy(c.task))}), so this pair cannot tell what scaling "
            f"does: {remedy}." + why
        )
    unfinished = (
        ""
        if max(s, u) >= REACHED or (c.task is Task.INDUCTION and c.layers == 1)
        else f" Neither reached {_percent(REACHED)}: more steps may change the order."
    )
    if s - u >= CLOSE:
        return head + " Without scaling, learning fell behind." + unfinished + why
    if u - s >= CLOSE:
        return head + " Here the unscaled run did better: scaling is not what limits this setting." + unfinished + why
    if fast_s is not None and fast_u is not None and fast_u != fast_s:
        first, later = ("scaled", "unscaled") if fast_s < fast_u else ("unscaled", "scaled")
        return (
            head + f" Both got there, and {first} was faster: {_percent(REACHED)} at step {min(fast_s, fast_u)}, "
            f"where {later} needed {max(fast_s, fast_u)}." + why
        )
    return (
        head
        + " Here the unscaled run learns as well: at this setting the wider logits do not hold Adam back."
        + unfinished
        + _still_to_try(c)
        + why
    )


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


def chance_frame(runs: Sequence[TrainingRun]) -> pd.DataFrame:
    """One row per task among `runs`: label, accuracy (`chance_accuracy`), for the curves' rule."""
    tasks = list(dict.fromkeys(run.config.task for run in runs))
    return pd.DataFrame(
        {
            "label": [f"{chance_label(t)}: {_percent(chance_accuracy(t))}" for t in tasks],
            "accuracy": [chance_accuracy(t) for t in tasks],
        }
    )


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


START_DECIMALS = 5  # the table's and the gradient answer's


def start_table(start: StartStatistics) -> pd.DataFrame:
    """The same numbers as a table, with the ratio and what theory says beside them.

    The values are rounded to START_DECIMALS and the ratio is that of the rounded values, so that a reader's
    own division of two cells gives the third (3.38902 from unrounded values stood beside 0.03554 / 0.01049).
    """
    scaled = [round(v, START_DECIMALS) for v in (start.logit_std_scaled, start.entropy_scaled, start.grad_norm_scaled)]
    unscaled = [
        round(v, START_DECIMALS) for v in (start.logit_std_unscaled, start.entropy_unscaled, start.grad_norm_unscaled)
    ]
    return pd.DataFrame(
        {
            "quantity": list(START_QUANTITIES),
            "scaled": scaled,
            "unscaled": unscaled,
            "unscaled / scaled": [u / s if s else math.nan for s, u in zip(scaled, unscaled, strict=True)],
            "theory": [
                f"ratio √d_k = {start.theory_ratio:.2f}",
                f"uniform attention: {start.uniform_entropy:.2f}; one-hot: 0",
                f"about √d_k = {start.theory_ratio:.2f} from the missing factor alone; less as the softmax saturates",
            ],
        }
    )


def token_labels(tokens: Sequence[int]) -> list[str]:
    """Unique axis labels for a sequence: position and symbol."""
    return [f"{i}:{t}" for i, t in enumerate(tokens)]


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


def code(config: TrainingConfig) -> str:
    """The filled recipe core/recipes/training_lab.py: this run in plain PyTorch."""
    return recipes.fill("training_lab", recipe_values(config))


# The start statistics of the page's setting, before any training (a few ms to a second; tiny to keep).
START = LessonSpec(start_of, uses=None, max_entries=64)
ABOUT = 0.1  # a gradient ratio within 10% of √d_k is "about √d_k": the missing factor and little else


def gradient_question(start: StartStatistics) -> Prediction:
    """Predict-then-reveal: how the gradient reaching W_q and W_k changes at the start without 1/√d_k.

    Two effects pull apart: the missing factor makes it √d_k times larger, and the peakier softmax passes
    less back. Which wins depends on d_k, the initialisation and the task; the answer is measured on the
    setting's untrained model (`start`), the numbers the table under the question shows once answered.
    (The logits' spread, asked here before, grows by exactly √d_k by definition: no prediction at all.)
    """
    root = start.theory_ratio
    shown = f"{root:.0f}" if root == round(root) else f"{root:.2f}"  # √16 = 4, √8 = 2.83
    ratio = start.grad_norm_unscaled / start.grad_norm_scaled
    options = (
        "Smaller than with the factor",
        f"Larger, but by less than √d_k = {shown} times",
        f"About √d_k = {shown} times larger",
        f"More than √d_k = {shown} times larger",
    )
    if ratio < 1:
        answer = 0
    elif ratio < (1 - ABOUT) * root:
        answer = 1
    elif ratio <= (1 + ABOUT) * root:
        answer = 2
    else:
        answer = 3
    entropy = (
        f"the softmax entropy falls from {start.entropy_scaled:.2f} to {start.entropy_unscaled:.2f} nats "
        f"(uniform attention: {start.uniform_entropy:.2f})"
    )
    why = (
        f"The missing factor alone would make it √d_k times larger; without it {entropy}, and a peakier "
        "softmax passes less gradient back, so less than √d_k of it arrives."
        if answer in (0, 1)
        else f"Within 10% of what the missing factor alone gives; meanwhile {entropy}."
        if answer == 2
        else f"More than the missing factor alone gives: {entropy}, and a less even softmax changes the rest "
        "of the backward pass too, here upwards."
    )
    # The ratio of the numbers as printed (START_DECIMALS, as the table): a reader's division gives it.
    scaled, unscaled = (round(v, START_DECIMALS) for v in (start.grad_norm_scaled, start.grad_norm_unscaled))
    printed_ratio = unscaled / scaled if scaled else ratio
    return Prediction(
        question=f"Before any training (d_k = {start.d_k}), take the 1/√d_k away. The gradient that reaches "
        "W_q and W_k will be…",
        options=options,
        answer=answer,
        explanation=(
            # Five decimals, as the table under it: at four, 0.0355 / 0.0105 gave 3.38 beside "3.39 times".
            f"Measured on this setting's untrained model, the same weights both ways: {scaled:.{START_DECIMALS}f} "
            f"with the factor, {unscaled:.{START_DECIMALS}f} without, {printed_ratio:.2f} times. {why}"
        ),
        shuffle=False,  # from smaller to larger
    )


def keep(runs: Sequence[TrainingRun], run: TrainingRun) -> list[TrainingRun]:
    """The session's runs with `run` last; an identical earlier run is not kept twice."""
    return [r for r in runs if r.config != run.config][-(RUNS_KEPT - 1) :] + [run]


@dataclass(frozen=True)
class HeadView:
    """One head of a run, for the page: its previous-token share and its weights before and after."""

    layer: int  # counted from 1, as the page names it
    head: int  # counted from 1
    previous_share: float  # mean weight a query puts on the token just before it, after training, on the rows
    # where that matters (Batch.lookback: every row for previous-token, the first copy for induction)
    before: pd.DataFrame  # matrix_frame of the weights (T, T) before training
    after: pd.DataFrame  # the same after training


FIRST_COPY_MARK, REPEAT_MARK = "¹", "²"  # on the induction example's labels: the first copy, the repeat


def example_labels(run: TrainingRun) -> list[str]:
    """The example's axis labels; for induction, the first copy's tokens marked ¹ and the repeat's ².

    The heatmaps did not show where the copies are, so an induction head's stripe (from each token of the
    repeat to the token after its first copy) had nothing to be read against.
    """
    labels = token_labels(run.example_tokens)
    if run.config.task is not Task.INDUCTION:
        return labels
    looks_back = [i for i, flag in enumerate(run.example_lookback) if flag]  # the first copy, after its first token
    scored = [i for i, target in enumerate(run.example_targets) if target != IGNORE_INDEX]  # the repeat, but its last
    first = {*looks_back, *(i - 1 for i in looks_back)}
    repeat = {*scored, *(i + 1 for i in scored)}
    marks = {**dict.fromkeys(first, FIRST_COPY_MARK), **dict.fromkeys(repeat, REPEAT_MARK)}
    return [label + marks.get(i, "") for i, label in enumerate(labels)]


def head_views(run: TrainingRun, layer: int) -> tuple[HeadView, ...]:
    """Every head of layer `layer` (counted from 0) of `run`, before and after training."""
    labels = example_labels(run)
    shares = previous_token_share(run.attention_after, run.example_lookback)[layer]  # (h,)
    return tuple(
        HeadView(
            layer=layer + 1,
            head=head + 1,
            previous_share=float(shares[head]),
            before=matrix_frame(torch.from_numpy(run.attention_before[layer, head]), labels, labels),
            after=matrix_frame(torch.from_numpy(run.attention_after[layer, head]), labels, labels),
        )
        for head in range(run.config.heads)
    )


# One training per setting for the whole class, a few at a time per process: the UI's training queue
# (services/training_queue.py) computes each run once and keeps max_entries finished runs (~50 kB each).
RUN = LessonSpec(train, uses=None, max_entries=64)
