"""Lesson 10, sections 3-4: induction heads measured on a repeated random sequence, and one head switched off.

Each computation (a `LessonSpec` below: INDUCTION, ABLATION) is a pure function of the shared model and the
page's values, returning a frozen dataclass of plain arrays; the sentences and Code boxes read them. The
model is passed as `_model` so that Streamlit's cache does not hash it (core/lessons/inside_gpt.py).

Shape legend: L layers (30), H query heads (9).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from core import recipes
from core.app import markup
from core.app.choices import MAX_REPEAT, MIN_REPEAT, AblationChoice
from core.app.registry import LessonSpec
from core.lessons.common import Prediction
from core.models import decoder_measures as measures
from core.models import smollm2
from core.models.sampling import ranked

# ----------------------------------------------------------------------------------------------
# 3-4: induction heads, ablation


@dataclass(frozen=True)
class InductionLesson:
    length: int
    seed: int
    tokens: tuple[str, ...]  # the 2 x length tokens
    scores: np.ndarray  # (L, H) induction scores (raw weights on the target, as Olsson et al. define them)
    sink: np.ndarray  # (L, H)
    copying: np.ndarray  # (L, H) copying scores: the logit each head's output adds to the token it attends to
    previous: np.ndarray  # (L, H) previous-token scores on the repeated sequence
    first_loss: float
    second_loss: float
    first_accuracy: float
    second_accuracy: float
    top: tuple[tuple[int, int, float], ...]  # (layer, head, score), highest first
    num_heads: int
    num_kv_heads: int
    vocab_size: int  # a uniform guess over it costs ln(vocab_size) nats a token

    @property
    def uniform_loss(self) -> float:
        return math.log(self.vocab_size)

    @property
    def top_previous(self) -> tuple[int, int, float]:
        """(layer, head, score) of the clearest previous-token head on this sequence."""
        layer, head = np.unravel_index(int(np.argmax(self.previous)), self.previous.shape)
        return int(layer), int(head), float(self.previous[layer, head])

    @property
    def chance(self) -> float:
        """The score of a head spreading its weight evenly over the tokens it sees: query length + i sees
        length + i + 1 of them, averaged over the queries the score reads (about 1 / (1.5 x length))."""
        return float(np.mean([1.0 / (self.length + i + 1) for i in range(self.length - 1)]))

    def groups_of_top(self) -> dict[tuple[int, int], list[int]]:
        """(layer, key/value head) -> the top heads that read it."""
        group = self.num_heads // self.num_kv_heads
        found: dict[tuple[int, int], list[int]] = {}
        for layer, head, _ in self.top:
            found.setdefault((layer, head // group), []).append(head)
        return found


def induction_lesson(_model: smollm2.SmolLM2, length: int, seed: int) -> InductionLesson:
    """Random tokens repeated twice (seeded), every head's induction score, and the loss on each copy."""
    length = max(MIN_REPEAT, min(MAX_REPEAT, length))
    report = measures.induction_report(_model, length, torch.Generator().manual_seed(seed))
    config = _model.config
    return InductionLesson(
        length=length,
        seed=seed,
        tokens=smollm2.token_texts(_model, report.token_ids),
        scores=report.scores.numpy(),
        sink=report.sink.numpy(),
        copying=report.copying.numpy(),
        previous=report.previous.numpy(),
        first_loss=report.loss.first_loss,
        second_loss=report.loss.second_loss,
        first_accuracy=report.loss.first_accuracy,
        second_accuracy=report.loss.second_accuracy,
        top=tuple(report.top_heads(6)),
        num_heads=config.num_heads,
        num_kv_heads=config.num_kv_heads,
        vocab_size=config.vocab_size,
    )


COPYING_MIN = 0.1  # logits: a head whose output raises the token it attends to by less is not called a copier


def copying_sentence(lesson: InductionLesson) -> str:
    """Which of the top induction heads also write the token they find (copying score at least COPYING_MIN),
    which write against it (at most -COPYING_MIN), which hardly write it, and the head that writes it most.
    On the default sequence the layer-17 heads find it and hardly write it (about 0.0), and layer 23 head 7
    writes it (+0.7)."""

    def heads(pairs: list[tuple[int, int]]) -> str:
        return "; ".join(f"layer {layer} head {head}" for layer, head in pairs)

    top = [(layer, head) for layer, head, _ in lesson.top]
    copiers = [pair for pair in top if lesson.copying[pair] >= COPYING_MIN]
    against = [pair for pair in top if lesson.copying[pair] <= -COPYING_MIN]
    neither = [pair for pair in top if pair not in copiers and pair not in against]
    one = len(copiers) == 1
    parts = [
        f"Of the top {len(top)} induction heads, "
        + (
            f"{len(copiers)} also {'writes the token it finds' if one else 'write the token they find'} "
            f"(copying score {COPYING_MIN} or more): {heads(copiers)}."
            if copiers
            else f"none raises the token it finds by {COPYING_MIN} or more itself."
        )
    ]
    if against:
        parts.append(f"Writing against it ({-COPYING_MIN} or less): {heads(against)}.")
    if neither:
        parts.append(f"Finding it and hardly writing it (between {-COPYING_MIN} and {COPYING_MIN}): {heads(neither)}.")
    layer, head = np.unravel_index(int(np.argmax(lesson.copying)), lesson.copying.shape)
    parts.append(
        f"Of all {lesson.copying.size} heads, layer {layer} head {head} writes the token it attends to most "
        f"({lesson.copying[layer, head]:+.2f}, induction score {lesson.scores[layer, head]:.2f})."
    )
    return " ".join(parts)


def induction_question(lesson: InductionLesson) -> Prediction:
    return Prediction(
        "The second copy repeats the first exactly. How much lower is the model's loss on it?",
        ("about the same", "a little lower (under 2 nats)", "much lower (2 nats or more)"),
        2 if lesson.first_loss - lesson.second_loss >= 2 else 1 if lesson.second_loss < lesson.first_loss else 0,
        f"{lesson.first_loss:.2f} nats on the first copy, {lesson.second_loss:.2f} on the second; "
        f"accuracy {lesson.first_accuracy:.0%} against {lesson.second_accuracy:.0%}. "
        + (
            f"A uniform guess over the {lesson.vocab_size:,} tokens would cost {lesson.uniform_loss:.2f} nats: on "
            "random tokens the model does worse than that, because it still bets on the words that usually come "
            "next in text and is confidently wrong."
            if lesson.first_loss > lesson.uniform_loss
            else f"(A uniform guess over the {lesson.vocab_size:,} tokens would cost {lesson.uniform_loss:.2f} nats.)"
        ),
        shuffle=False,
    )


def ablation_mode(choice: AblationChoice) -> smollm2.AblationMode:
    """The model's own mode for the page's choice (the choice lives in core.app.choices, which loads no model)."""
    return smollm2.AblationMode(choice.value)


@dataclass(frozen=True)
class AblationLesson:
    layer: int
    head: int
    choice: AblationChoice
    loss_before: float
    loss_after: float
    probability_shift: float  # total variation distance of the last position's next-token distribution
    top_before: tuple[tuple[str, float], ...]
    top_after: tuple[tuple[str, float], ...]
    cue: str  # the next-to-last token of the second copy
    expected: str  # the token that followed `cue` in the first copy: what the repeat predicts after it
    expected_before: float  # its probability at the last position, the head on
    expected_after: float  # ... and switched off
    induction_after: np.ndarray  # (L, H) every head's induction score with this head switched off
    # The later head that falls the most, with only its queries or only its keys reading the stream without this
    # head: which input needs what it writes (None: no later layer)
    composition: measures.CompositionSplit | None = None

    @property
    def loss_change(self) -> float:
        return self.loss_after - self.loss_before


def ablation_lesson(
    _model: smollm2.SmolLM2, length: int, seed: int, layer: int, head: int, choice: AblationChoice
) -> AblationLesson:
    """One head switched off on the repeated sequence: the loss on the second copy, the next token."""
    repeated = measures.random_repeated_tokens(length, torch.Generator().manual_seed(seed), _model.config.vocab_size)
    ablation = smollm2.Ablation(frozenset({(layer, head)}), ablation_mode(choice))
    effect = measures.ablation_effect(_model, repeated, length, ablation)
    # The next-token view stops one token early: the last position then predicts the copy's last
    # token, which only a look back at the first copy can tell.
    ids = repeated[:-1]
    before = smollm2.forward(_model, ids, path=smollm2.AttentionPath.FAST, last_logits_only=True)
    after = smollm2.forward(_model, ids, path=smollm2.AttentionPath.FAST, last_logits_only=True, ablation=ablation)
    expected = int(repeated[-1])  # the copy's last token, which followed the same cue in the first copy
    cue, expected_text = smollm2.token_texts(_model, [int(ids[-1]), expected])
    return AblationLesson(
        layer,
        head,
        choice,
        effect.loss_before,
        effect.loss_after,
        effect.probability_shift,
        _top(_model, before.logits[-1]),
        _top(_model, after.logits[-1]),
        cue,
        expected_text,
        float(before.logits[-1].softmax(-1)[expected]),
        float(after.logits[-1].softmax(-1)[expected]),
        measures.induction_scores_with(_model, repeated, length, ablation).numpy(),
        measures.composition_split(_model, repeated, length, ablation),
    )


COMPOSITION_DROP = 0.5  # a top induction head whose score falls below this share of it needs the switched-off head


def composition_sentence(lesson: InductionLesson, result: AblationLesson) -> str:
    """The top induction heads' scores with the chosen head on and off (3 decimals: at 2, a fall from 0.22 to
    0.11 looked like exactly half, an independent review). With layer 16 head 0, the clearest previous-token
    head, off, layer 17's induction heads fall from about 0.74 to under 0.05: they need what it writes. Which input
    needs it is measured too (`composition_split_sentence`): their keys (K-composition). The switched-off head's
    own score does not move."""
    pairs = [
        f"layer {layer} head {head} {score:.3f} → {result.induction_after[layer, head]:.3f}"
        + (" (the head switched off)" if (layer, head) == (result.layer, result.head) else "")
        for layer, head, score in lesson.top
    ]
    others = [(layer, head, score) for layer, head, score in lesson.top if (layer, head) != (result.layer, result.head)]
    after = result.induction_after
    fallen = [(layer, head) for layer, head, score in others if after[layer, head] < COMPOSITION_DROP * score]
    named = f"layer {result.layer} head {result.head}"
    how = "switched off" if result.choice is AblationChoice.ZERO else "replaced by its mean"
    opening = f"Induction scores of the top heads, with {named} on and then {how}: {'; '.join(pairs)}."
    own = "A head's own pattern does not move when its output is changed: only what it writes is."
    if not fallen:
        return (
            f"{opening} None of the {'others' if len(others) < len(lesson.top) else 'top heads'} loses half its score: "
            f"they find the token without what {named} writes. "
            + own
        )
    # "others" only where the switched-off head is one of the top heads: else "3 of the 6 others" had no "one"
    # for them to be other than (the s29b review).
    kind = "others" if len(others) < len(lesson.top) else "top heads"
    count = f"All {len(fallen)}" if len(fallen) == len(others) else f"{len(fallen)} of the {len(others)} {kind}"
    one = len(fallen) == 1
    verb = "loses more than half its score: it needs" if one else "lose more than half their score: they need"
    split = composition_split_sentence(result)
    return f"{opening} {count} {verb} what {named} writes. {own}" + (f" {split}" if split else "")


SPLIT_VERDICT = {
    measures.Reads.KEYS: "Its keys need what {named} writes, its queries hardly: the literature's K-composition, "
    "measured.",
    measures.Reads.QUERIES: "Its queries need what {named} writes, its keys hardly: Q-composition.",
    measures.Reads.BOTH: "Each input alone takes more than half of the fall: both need what {named} writes.",
    measures.Reads.NEITHER: "Neither input alone takes half of the fall: it takes the two together.",
}


def composition_split_sentence(result: AblationLesson) -> str:
    """Which input of the later head that falls the most needs the switched-off head: its queries or its keys
    (an induction head's keys must say which token came before each key). Only for a fall of more than half:
    the split of a small fall says little. Empty otherwise."""
    split = result.composition
    if split is None:
        return ""
    scores = split.scores
    if scores[measures.Reads.BOTH] >= COMPOSITION_DROP * scores[measures.Reads.NEITHER]:
        return ""
    named, later = f"layer {result.layer} head {result.head}", f"layer {split.layer} head {split.head}"
    before = f"{scores[measures.Reads.NEITHER]:.3f}"
    return (
        f"Which of {later}'s inputs needs it? With only its keys reading the stream without {named}, its score "
        f"goes {before} → {scores[measures.Reads.KEYS]:.3f}; with only its queries, {before} → "
        f"{scores[measures.Reads.QUERIES]:.3f}. " + SPLIT_VERDICT[split.needs].format(named=named)
    )


def _top(model: smollm2.SmolLM2, logits: torch.Tensor, count: int = 5) -> tuple[tuple[str, float], ...]:
    ids = ranked(logits, count)
    probabilities = logits.softmax(-1)
    return tuple(zip(smollm2.token_texts(model, ids), (float(probabilities[i]) for i in ids), strict=True))


# ----------------------------------------------------------------------------------------------
# Code boxes


def code(lesson: InductionLesson) -> str:
    """The filled recipe core/recipes/inside_gpt.py: this induction run's sequence, in float32."""
    return recipes.fill("inside_gpt", {"length": lesson.length, "seed": lesson.seed})


def expected_token_sentence(result: AblationLesson) -> str:
    """The token the repeat predicts at the last position, and its probability with the head on and off (markdown).

    The review found the switch-off section named neither; the top-five lists below it may not even hold it.
    """
    state = "off" if result.choice is AblationChoice.ZERO else "replaced by its mean"
    change = "falls" if result.expected_after < result.expected_before else "does not fall"
    return (
        f"**The token the repeat predicts here: {markup.literal(markup.token_shown(result.expected))}**, which "
        f"followed {markup.literal(markup.token_shown(result.cue))} in the first copy. Its probability at the "
        f"last position is {result.expected_before:.1%} with layer {result.layer} head {result.head} on and "
        f"{result.expected_after:.1%} with it {state}: it {change}."
    )


def ablation_code(lesson: InductionLesson, result: AblationLesson) -> str:
    """The filled recipe core/recipes/inside_gpt_ablation.py: the induction section's sequence, this head, this mode."""
    values = {
        "length": lesson.length,
        "seed": lesson.seed,
        "layer": result.layer,
        "head": result.head,
        "mode": result.choice.value,
    }
    return recipes.fill("inside_gpt_ablation", values)


INDUCTION = LessonSpec(induction_lesson, uses=None, max_entries=32)
ABLATION = LessonSpec(ablation_lesson, uses=None, max_entries=128)
