"""Lesson 10: inside a GPT (SmolLM2-135M-Instruct), every number from our own forward pass.

Each section has one cached computation (a `LessonSpec` below), a pure function of the shared
model and the page's own values, returning a frozen dataclass of plain arrays: the prompt's
forward pass (tokens, every head's weights, the next-token logits), a generation, the induction
measurement, one head's ablation, RoPE's offset check and the KV cache's timing. Sampling from the
stored logits is cheap and is not cached. The model is passed as `_model` so that Streamlit's
cache does not hash it (it is one object per process, ui/cache.py).

Shape legend: L layers (30), H query heads (9), G key/value heads (3), T tokens, V vocabulary.
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import TypeVar

import numpy as np
import torch

from core import recipes
from core.app import markup
from core.app.choices import (
    MAX_NEW_TOKENS,
    MAX_REPEAT,
    MIN_REPEAT,
    OWN_PROMPT,
    AblationChoice,
    GptPrompt,
)
from core.app.registry import LessonSpec
from core.lessons.common import Prediction
from core.models import decoder_measures as measures
from core.models import smollm2
from core.models.gguf_file import ChatMessage, Role
from core.models.sampling import SamplingSettings, next_token_distribution, ranked, sample

MAX_PROMPT_TOKENS = 64  # bounded work per student: 30 x 9 maps of 64 x 64 per prompt
TOP_CANDIDATES = 10
# MAX_NEW_TOKENS, MIN_REPEAT, MAX_REPEAT and the sampling boxes' choices: core.app.choices (links are read by them).
# The page's defaults: a new student's first view reads the results at these values (`shared_by_everyone`).
DEFAULT_TEMPERATURE = 0.7  # at 1.0 seed 0 drew ' seven' after 'five,' (3%): a class's first text should read well
DEFAULT_SEED = 0
DEFAULT_NEW_TOKENS = 8
DEFAULT_REPEAT = 20
TIMED_TOKENS = 8  # the KV cache's timing generates this many tokens
TIMING_REPEATS = 3  # each of its steps is timed this many times, and the median kept
SINK_BIG = 0.5  # a head "parks" on the first token when over half its weight lands there
R = TypeVar("R")


class PromptKind(StrEnum):
    TEXT = "text"  # the text as typed, continued by the model
    CHAT = "chat"  # a question through the model's own ChatML template


@dataclass(frozen=True)
class ExamplePrompt:
    key: str
    label: str
    text: str
    kind: PromptKind


# Prompts checked with our forward pass (tests/unit/test_inside_gpt.py holds their top tokens); one for each
# GptPrompt key, in its order (the keys live in core.app.choices, for the link rule). The first opens the page:
# its top token leads clearly (' six' at 70%, ' and' next at 14%), where the chat question's 'The' (14.5%)
# against 'L' (14.2%) made the opening question a coin toss (a teacher's review).
EXAMPLES = (
    ExamplePrompt(GptPrompt.COUNT.value, "Counting", "one, two, three, four, five,", PromptKind.TEXT),
    ExamplePrompt(
        GptPrompt.CAPITAL.value, "Chat: the capital of France", "What is the capital of France?", PromptKind.CHAT
    ),
    ExamplePrompt(
        GptPrompt.FOX.value,
        "A sentence seen before",
        "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy",
        PromptKind.TEXT,
    ),  # noqa: E501
    ExamplePrompt(GptPrompt.CODE.value, "Python code", "def add(a, b):\n    return", PromptKind.TEXT),
)
EXAMPLES_BY_KEY = {example.key: example for example in EXAMPLES}
PROMPT_LABELS = {**{e.key: e.label for e in EXAMPLES}, OWN_PROMPT: "Your own text"}


def _row(attention_row: torch.Tensor | None) -> np.ndarray:
    """A generated token's attention row, stored small (float16); generate() was asked for the rows."""
    assert attention_row is not None
    return attention_row.cpu().half().numpy()


def render(model: smollm2.SmolLM2, text: str, kind: PromptKind) -> str:
    """What the model reads: the text itself, or the question inside the chat template."""
    if kind is PromptKind.CHAT:
        return smollm2.chat_prompt(model, [ChatMessage(Role.USER, text)])
    return text


# ----------------------------------------------------------------------------------------------
# 1-2: one prompt's forward pass


@dataclass(frozen=True)
class PromptAnalysis:
    """text: what the model read; attentions (L, H, T, T) float16; sink, previous (L, H);
    last_logits (V,) float32: the next token's logits."""

    text: str
    token_ids: tuple[int, ...]
    tokens: tuple[str, ...]
    attentions: np.ndarray
    sink: np.ndarray
    previous: np.ndarray
    last_logits: np.ndarray
    num_layers: int
    num_heads: int
    num_kv_heads: int

    @property
    def sink_mean(self) -> float:
        return float(self.sink.mean())

    @property
    def heads_mostly_on_sink(self) -> int:
        return int((self.sink > SINK_BIG).sum())


def analyse_prompt(_model: smollm2.SmolLM2, text: str, kind: PromptKind) -> PromptAnalysis:
    """The prompt's forward pass with every head's weights. Raises TextError for a prompt the model cannot take."""
    rendered = render(_model, text, kind)
    ids = smollm2.encode(_model, rendered, max_tokens=MAX_PROMPT_TOKENS)
    if ids.numel() < 3:
        raise smollm2.TextError("Give at least three tokens, so that the heads have something to look back at.")
    out = smollm2.forward(_model, ids, return_attentions=True)
    assert out.attentions is not None  # asked for above
    attentions = out.attentions.cpu()  # (L, H, T, T)
    config = _model.config
    return PromptAnalysis(
        text=rendered,
        token_ids=tuple(ids.tolist()),
        tokens=out.tokens,
        attentions=attentions.half().numpy(),  # half the bytes in the cache; weights are in 0..1
        sink=measures.sink_share(attentions).numpy(),
        previous=measures.previous_token_score(attentions).numpy(),
        last_logits=out.logits[-1].cpu().numpy(),
        num_layers=config.num_layers,
        num_heads=config.num_heads,
        num_kv_heads=config.num_kv_heads,
    )


@dataclass(frozen=True)
class Candidate:
    token: str
    before: float  # the model's own probability (no temperature, no filter)
    after: float  # after temperature, top-k and top-p: what is sampled from


@dataclass(frozen=True)
class SamplingView:
    settings: SamplingSettings
    seed: int
    candidates: tuple[Candidate, ...]  # the model's most probable tokens
    kept: int  # tokens that can still be drawn
    sampled: str


def sampling_settings(temperature: float, top_k: int, top_p: float) -> SamplingSettings:
    """The page's values (0 and 1.0 meaning no filter) as the model core's settings."""
    return SamplingSettings(temperature, top_k or None, None if top_p >= 1.0 else top_p)


def sampling_view(
    analysis: PromptAnalysis, tokens: Sequence[str], settings: SamplingSettings, seed: int
) -> SamplingView:
    """The model's next-token distribution and what the settings leave to draw from, and one seeded draw
    (cheap: not cached)."""
    distribution = next_token_distribution(torch.from_numpy(analysis.last_logits), settings)
    top = ranked(torch.from_numpy(analysis.last_logits), TOP_CANDIDATES)  # greedy's pick first, even in a tie
    drawn = sample(distribution, torch.Generator().manual_seed(seed))
    candidates = tuple(Candidate(tokens[i], float(distribution.before[i]), float(distribution.after[i])) for i in top)
    return SamplingView(settings, seed, candidates, distribution.kept, tokens[drawn])


def vocabulary_texts(_model: smollm2.SmolLM2) -> tuple[str, ...]:
    """Every token id's text (V,): what `sampling_view` names, decoded once per process."""
    return smollm2.token_texts(_model, list(range(_model.config.vocab_size)))


def top_token_question(analysis: PromptAnalysis, tokens: Sequence[str]) -> Prediction:
    """Which of four candidates does the model rank first? Answered from the stored logits.

    A token whose logit equals the first one's is not offered (it would be right too): the
    explanation names it instead.
    """
    logits = torch.from_numpy(analysis.last_logits)
    order = ranked(logits, 4 + TOP_CANDIDATES)
    tied = [i for i in order[1:] if logits[i] == logits[order[0]]]
    offered = [order[0], *[i for i in order[1:] if i not in tied][:3]]
    options = tuple(repr(tokens[i]) for i in offered)
    probabilities = logits.softmax(-1)
    verb = "has" if len(tied) == 1 else "have"
    tie = (
        f" {', '.join(repr(tokens[i]) for i in tied)}, not offered, {verb} the same logit "
        f"({float(logits[order[0]]):g}); greedy decoding takes the token with the lower id, {options[0]}."
        if tied
        else ""
    )
    return Prediction(
        "Which of these tokens does the model think most likely to come next?",
        options,
        0,
        f"{options[0]} at {float(probabilities[offered[0]]):.1%}, ahead of {options[1]} at "
        f"{float(probabilities[offered[1]]):.1%}.{tie}",
    )


def sink_sentence(analysis: PromptAnalysis) -> str:
    total = analysis.num_layers * analysis.num_heads
    return (
        f"On this prompt, {analysis.sink_mean:.0%} of all attention (mean over heads and queries after the first) "
        f"lands on the first token; {analysis.heads_mostly_on_sink} of {total} heads put more than half there."
    )


def best_previous_head(analysis: PromptAnalysis) -> tuple[int, int, float]:
    layer, head = np.unravel_index(int(np.argmax(analysis.previous)), analysis.previous.shape)
    return int(layer), int(head), float(analysis.previous[layer, head])


class LookedAt(Enum):
    """Where one head puts the largest of one query's weights (the model view's counts)."""

    FIRST = "the first token"
    PREVIOUS = "the token just before it"
    ITSELF = "itself"
    ELSEWHERE = "another token"


@dataclass(frozen=True)
class TokenAcrossModel:
    """One query's attention row in every head of every layer (BertViz's model view, for one token).

    rows: (L, H, query + 1) float32, each head's weights on the keys the query can see (they sum to 1).
    """

    query: int
    tokens: tuple[str, ...]  # the prompt's tokens up to and including the query
    rows: np.ndarray

    @property
    def looked_at(self) -> np.ndarray:
        """(L, H) the key each head puts most weight on."""
        return self.rows.argmax(-1)

    def kinds(self) -> dict[LookedAt, np.ndarray]:
        """(L, H) masks: which heads give their largest weight to each kind of key (the first token wins where it
        is also the previous one, at query 1)."""
        top = self.looked_at
        first = top == 0
        previous = (top == self.query - 1) & ~first
        itself = top == self.query
        return {
            LookedAt.FIRST: first,
            LookedAt.PREVIOUS: previous,
            LookedAt.ITSELF: itself,
            LookedAt.ELSEWHERE: ~(first | previous | itself),
        }

    def counts(self) -> dict[LookedAt, int]:
        """How many heads give their largest weight to each kind of key."""
        return {kind: int(mask.sum()) for kind, mask in self.kinds().items()}


def token_across_model(analysis: PromptAnalysis, query: int) -> TokenAcrossModel:
    """Query `query`'s row (1 <= query < T: query 0 sees only itself) in all L x H heads."""
    if not 1 <= query < len(analysis.tokens):
        raise ValueError(f"query {query} is not between 1 and {len(analysis.tokens) - 1}")
    rows = analysis.attentions[:, :, query, : query + 1].astype(np.float32)  # (L, H, T, T) -> (L, H, query + 1)
    return TokenAcrossModel(query, analysis.tokens[: query + 1], rows)


def model_view_sentence(view: TokenAcrossModel) -> str:
    """The counts behind the model view, and where the heads that look elsewhere look most often."""
    kinds = view.kinds()
    counts = {kind: int(mask.sum()) for kind, mask in kinds.items()}
    total = int(view.looked_at.size)
    token = view.tokens[view.query]
    said = (
        # "the largest", not "most": a head's top key may hold well under half of the row
        f"Of the {total} heads, {counts[LookedAt.FIRST]} give {token!r}'s largest weight to the first token, "
        f"{counts[LookedAt.PREVIOUS]} to the token just before it, {counts[LookedAt.ITSELF]} to itself and "
        f"{counts[LookedAt.ELSEWHERE]} to another token"
    )
    elsewhere = view.looked_at[kinds[LookedAt.ELSEWHERE]]  # (n,) the keys those heads chose
    if elsewhere.size == 0:
        return said + "."
    key = int(np.bincount(elsewhere).argmax())
    heads = int((elsewhere == key).sum())
    return said + f" (most often {view.tokens[key]!r} at position {key}, in {heads} head{'s' if heads > 1 else ''})."


# ----------------------------------------------------------------------------------------------
# 1: generation, step by step


@dataclass(frozen=True)
class GeneratedToken:
    token: str
    probability: float  # its probability in the filtered distribution it was drawn from
    row: np.ndarray  # (L, H, tokens so far) float16: every head's weights from the position that predicted it


@dataclass(frozen=True)
class GenerationResult:
    prompt_tokens: tuple[str, ...]
    steps: tuple[GeneratedToken, ...]

    @property
    def text(self) -> str:
        return "".join(step.token for step in self.steps)


def generate_steps(
    _model: smollm2.SmolLM2,
    text: str,
    kind: PromptKind,
    settings: SamplingSettings,
    seed: int,
    new_tokens: int,
    _keep_going: Callable[[], bool] | None = None,
) -> GenerationResult:
    """Up to `new_tokens` tokens (capped), each with the attention row that chose it; one seeded generator.

    `_keep_going` (left out of the cache's key by its underscore) stops the work once the student has left:
    smollm2.GenerationCancelled, and nothing is cached."""
    ids = smollm2.encode(_model, render(_model, text, kind), max_tokens=MAX_PROMPT_TOKENS)
    result = smollm2.generate(
        _model,
        ids,
        max_new_tokens=min(new_tokens, MAX_NEW_TOKENS),
        settings=settings,
        generator=torch.Generator().manual_seed(seed),
        attention_rows=True,
        keep_going=_keep_going,
    )
    steps = tuple(
        GeneratedToken(s.token, float(s.distribution.after[s.token_id]), _row(s.attention_row)) for s in result.steps
    )
    return GenerationResult(smollm2.token_texts(_model, ids), steps)


# ----------------------------------------------------------------------------------------------
# 3-5: induction heads, ablation, grouped-query attention


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
    )


COMPOSITION_DROP = 0.5  # a top induction head whose score falls below this share of it needs the switched-off head


def composition_sentence(lesson: InductionLesson, result: AblationLesson) -> str:
    """The top induction heads' scores with the chosen head on and off (3 decimals: at 2, a fall from 0.22 to
    0.11 looked like exactly half, an independent review). With layer 16 head 0, the clearest previous-token
    head, off, layer 17's induction heads fall from about 0.74 to under 0.05: they need what it writes (the
    literature's K-composition; this experiment does not tell their queries, keys and values apart). The
    switched-off head's own score does not move."""
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
            f"{opening} None of the others loses half its score: they find the token without what {named} writes. "
            + own
        )
    count = f"All {len(fallen)}" if len(fallen) == len(others) else f"{len(fallen)} of the {len(others)} others"
    one = len(fallen) == 1
    verb = "loses more than half its score: it needs" if one else "lose more than half their score: they need"
    return f"{opening} {count} {verb} what {named} writes. {own}"


def _top(model: smollm2.SmolLM2, logits: torch.Tensor, count: int = 5) -> tuple[tuple[str, float], ...]:
    ids = ranked(logits, count)
    probabilities = logits.softmax(-1)
    return tuple(zip(smollm2.token_texts(model, ids), (float(probabilities[i]) for i in ids), strict=True))


def kv_groups(num_heads: int, num_kv_heads: int) -> tuple[int, ...]:
    """The key/value head each query head reads: h // (H / G)."""
    return tuple(head // (num_heads // num_kv_heads) for head in range(num_heads))


@dataclass(frozen=True)
class CacheSizes:
    per_token_shared: int  # bytes per token with the model's G key/value heads (float32)
    per_token_full: int  # ... with one key/value head per query head
    num_kv_heads: int
    num_heads: int


def cache_sizes(_model: smollm2.SmolLM2) -> CacheSizes:
    config = _model.config
    return CacheSizes(
        smollm2.kv_cache_bytes_per_token(config),
        smollm2.kv_cache_bytes_per_token(config, config.num_heads),
        config.num_kv_heads,
        config.num_heads,
    )


# ----------------------------------------------------------------------------------------------
# 6: RoPE


@dataclass(frozen=True)
class RopeLesson:
    layer: int
    head: int
    query_token: str
    key_token: str
    i: int
    j: int
    shifts: tuple[int, ...]
    scores: tuple[float, ...]  # the score at (i + s, j + s) for each shift
    unrotated: float  # q . k before any rotation: what an order-blind head would score
    rotated_query: tuple[float, ...]  # (d,) the query rotated as at position i: one pair up close
    rotated_key: tuple[float, ...]  # (d,) the key rotated as at position j
    # The same query and key at every distance i - j in DISTANCES, the key at each position of STARTS:
    # rotated (RoPE) and, for contrast, with sinusoidal position vectors added instead.
    rope_curves: tuple[tuple[float, ...], ...]  # (len(STARTS), len(DISTANCES))
    additive_curves: tuple[tuple[float, ...], ...]  # (len(STARTS), len(DISTANCES))

    @property
    def rope_start_gap(self) -> float:
        """The largest difference, at one distance, between the key at one start and at another: RoPE's."""
        return _start_gap(self.rope_curves)

    @property
    def additive_start_gap(self) -> float:
        """The same with added sinusoidal positions: how much where the pair sits changes its score."""
        return _start_gap(self.additive_curves)

    @property
    def spread(self) -> float:
        return max(self.scores) - min(self.scores)

    @property
    def products(self) -> np.ndarray:
        """(d,) q_n x k_n for each dimension n of the rotated pair: their sum is the score at (i, j)."""
        return np.array(self.rotated_query, dtype=np.float64) * np.array(self.rotated_key, dtype=np.float64)


PAIR_NAMED = 3  # the pair view names this many dimensions with the largest products


def pair_sentence(lesson: RopeLesson) -> str:
    """What the pair view's strips show, from their numbers: the products' sum is the table's first score, and
    the dimensions whose products are largest in size, with their sign."""
    products = lesson.products
    largest = np.argsort(-np.abs(products), kind="stable")[:PAIR_NAMED]
    named = ", ".join(f"{int(n)} ({products[n]:+.3f})" for n in largest)
    positive = int((products > 0).sum())
    return (
        f"The {products.size} products add up to {products.sum():.3f}: the score q·k of {lesson.query_token!r} and "
        f"{lesson.key_token!r} at positions {lesson.i} and {lesson.j}, the table's first row. {positive} of them are "
        f"positive and {products.size - positive} are not; the largest in size are in dimensions {named}."
    )


ROPE_SHIFTS = (0, 1, 10, 100, 1000)
DISTANCES = tuple(range(0, 64))  # i - j drawn: the query 0 to 63 tokens after the key
STARTS = (0, 100)  # the key's position in each curve


def _start_gap(curves: tuple[tuple[float, ...], ...]) -> float:
    return max(max(column) - min(column) for column in zip(*curves, strict=True))


def rope_lesson(_model: smollm2.SmolLM2, text: str, kind: PromptKind, head: int) -> RopeLesson:
    """Layer 0's query of the prompt's last token and key of its first ordinary token, rotated at shifted positions.

    Layer 0's queries and keys before rotation depend on the token alone (its embedding, normalised),
    so they can be moved to any position; the score then depends only on i - j.
    """
    ids = smollm2.encode(_model, render(_model, text, kind), max_tokens=MAX_PROMPT_TOKENS)
    config, layer = _model.config, _model.weights.layers[0]
    d = config.head_dim
    with torch.inference_mode():
        x = _model.weights.embeddings[ids].float()  # (T, D)
        normed = smollm2.rms_norm(x, layer.attention_norm, config.rms_norm_eps)
        q_all = smollm2.linear(normed, layer.query)  # (T, H * d)
        k_all = smollm2.linear(normed, layer.key)  # (T, G * d)
    i, j = len(ids) - 1, 1
    kv = config.kv_head_of(head)
    query = q_all[i, head * d : (head + 1) * d]  # (d,)
    key = k_all[j, kv * d : (kv + 1) * d]  # (d,)
    scores = measures.rope_offset_scores(query, key, i, j, list(ROPE_SHIFTS), config)
    rotated_query, rotated_key = measures.rotated_pair(query, key, i, j, config)
    tokens = smollm2.token_texts(_model, ids)
    rope_curves = tuple(
        tuple(measures.rope_score(query, key, start + distance, start, config) for distance in DISTANCES)
        for start in STARTS
    )
    additive_curves = tuple(
        tuple(measures.additive_score(query, key, start + distance, start) for distance in DISTANCES)
        for start in STARTS
    )
    return RopeLesson(
        0,
        head,
        tokens[i],
        tokens[j],
        i,
        j,
        ROPE_SHIFTS,
        tuple(scores),
        float(query @ key),
        tuple(float(v) for v in rotated_query),
        tuple(float(v) for v in rotated_key),
        rope_curves,
        additive_curves,
    )


# ----------------------------------------------------------------------------------------------
# 7: the KV cache


@dataclass(frozen=True)
class CacheTiming:
    lengths: tuple[int, ...]  # the sequence length at each step
    with_cache_ms: tuple[float, ...]
    without_cache_ms: tuple[float, ...]
    max_logit_difference: float  # between the two runs' logits at every step
    same_tokens: bool
    cache_bytes: int  # the cache's size after the last step, measured
    repeats: int = 1  # each step's time is the median of this many runs of it

    # The first step reads the whole prompt both ways (the cache is filled then); only the steps after it
    # feed one token. A mean over all steps let the prompt pass hide what the cache buys per new token.
    @property
    def prompt_ms(self) -> tuple[float, float]:
        """The first step, the prompt pass: (with the cache, without)."""
        return self.with_cache_ms[0], self.without_cache_ms[0]

    @property
    def new_token_ms(self) -> tuple[float, float] | None:
        """The mean of the steps after the prompt pass, (with, without); None after one step."""
        if len(self.lengths) < 2:
            return None
        rest = len(self.lengths) - 1
        return sum(self.with_cache_ms[1:]) / rest, sum(self.without_cache_ms[1:]) / rest


def cache_timing(
    _model: smollm2.SmolLM2,
    text: str,
    kind: PromptKind,
    new_tokens: int,
    _keep_going: Callable[[], bool] | None = None,
) -> CacheTiming:
    """Greedy generation twice, with and without the cache, each step timed (wall clock, this machine).

    `_keep_going` (left out of the cache's key) is asked before each step: smollm2.GenerationCancelled once it
    says False (the student has left), and nothing is kept."""
    ids = smollm2.encode(_model, render(_model, text, kind), max_tokens=MAX_PROMPT_TOKENS)
    steps = min(new_tokens, MAX_NEW_TOKENS)
    with_ms, without_ms, lengths, diffs, same = [], [], [], [], True
    cache, cached_feed, sequence = None, ids, ids
    # One untimed pass first: the first call on a process pays for allocations and kernel choices, and the
    # fifth review saw it charged to the cached prompt pass (923 ms against 250 ms for the same work).
    smollm2.forward(_model, ids, path=smollm2.AttentionPath.FAST, last_logits_only=True)
    for step in range(steps):
        if _keep_going is not None and not _keep_going():
            raise smollm2.GenerationCancelled(f"timing stopped after {step} of {steps} steps")
        feed_cached = functools.partial(
            smollm2.forward,
            _model,
            cached_feed,
            path=smollm2.AttentionPath.FAST,
            last_logits_only=True,
            cache=cache,  # immutable: each repeat starts from the same cache
            use_cache=True,
        )
        out, ms = _median_timed(feed_cached)
        with_ms.append(ms)
        feed_all = functools.partial(
            smollm2.forward, _model, sequence, path=smollm2.AttentionPath.FAST, last_logits_only=True
        )
        full, ms = _median_timed(feed_all)
        without_ms.append(ms)
        cache = out.cache
        diffs.append(float((out.logits[-1] - full.logits[-1]).abs().max()))
        token = int(out.logits[-1].argmax())
        same &= token == int(full.logits[-1].argmax())
        lengths.append(int(sequence.numel()))
        cached_feed = torch.tensor([token])
        sequence = torch.cat((sequence, cached_feed))
    cache_bytes = 0 if cache is None else cache.nbytes()  # steps >= 1, so the cache is there
    return CacheTiming(
        tuple(lengths), tuple(with_ms), tuple(without_ms), max(diffs), same, cache_bytes, repeats=TIMING_REPEATS
    )


def _median_timed(run: Callable[[], smollm2.ForwardOutput]) -> tuple[smollm2.ForwardOutput, float]:
    """`run` TIMING_REPEATS times: its (last) output and the median wall time in ms. One timing on a shared
    server varied up to ten-fold between page loads (issue 41); the median of a few is steadier."""
    times, out = [], None
    for _ in range(TIMING_REPEATS):
        start = time.perf_counter()
        out = run()
        times.append(1000 * (time.perf_counter() - start))
    assert out is not None  # TIMING_REPEATS >= 1
    return out, statistics.median(times)


def logits_sentence(timing: CacheTiming) -> str:
    """What the two runs' logits measured: the same numbers, or how far apart (never assumed)."""
    if timing.max_logit_difference == 0.0:
        return "every logit at every step was the same number both ways (largest difference 0)"
    return f"the largest logit difference was {timing.max_logit_difference:.3g}"


def time_per_token_sentence(timing: CacheTiming) -> str:
    """The prompt pass apart, then the new tokens' mean time both ways and their ratio as printed."""
    prompt_with, prompt_without = (f"{ms:.0f}" for ms in timing.prompt_ms)
    prompt = (
        f"The first step reads the whole {timing.lengths[0]}-token prompt either way ({prompt_with} ms with the "
        f"cache, which it fills, {prompt_without} ms without)"
    )
    if timing.new_token_ms is None:
        return prompt + "; with one step there is no new token to compare."
    with_ms, without_ms = (round(ms) for ms in timing.new_token_ms)
    runs = f"Each time is the median of {timing.repeats} runs of its step; on" if timing.repeats > 1 else "On"
    # The ratio of the times as printed, so that a reader's own division gives it. A mean, said as one: "each
    # took" read as every step's time, while the uncached steps on the chart ranged from 135 to 252 ms (s20 review).
    new = len(timing.lengths) - 1
    took = "the next token then took" if new == 1 else f"the next {new} tokens then took on average"
    return (
        f"{prompt}; {took} {with_ms} ms with the cache and "
        f"{without_ms} ms without ({without_ms / max(with_ms, 1):.1f}× the time). {runs} a shared server the "
        "times change from one page load to the next, and the ratio is what holds."
    )


def cache_caption(timing: CacheTiming) -> str:
    """The KV-cache section's caption: the tokens, the logits and the time per token, all from `timing`."""
    same = "the same tokens" if timing.same_tokens else "different tokens"
    cached = timing.lengths[-1]  # the last step's sequence: its new token was chosen, not yet fed back
    return (
        f"Both runs chose {same}, and {logits_sentence(timing)}. {time_per_token_sentence(timing)} "
        f"The cache held {timing.cache_bytes / 2**20:.1f} MiB at the end: {cached} tokens × "
        f"{timing.cache_bytes / cached / 1024:g} KiB (the last token chosen is never fed back, so it has no row)."
    )


# ----------------------------------------------------------------------------------------------
# Code boxes


def code(lesson: InductionLesson) -> str:
    """The filled recipe core/recipes/inside_gpt.py: this induction run's sequence, in float32."""
    return recipes.fill("inside_gpt", {"length": lesson.length, "seed": lesson.seed})


def next_token_code(analysis: PromptAnalysis, view: SamplingView) -> str:
    """The filled recipe core/recipes/inside_gpt_next_token.py: this prompt's ids, these filters, this seed."""
    settings = view.settings
    values = {
        "ids": list(analysis.token_ids),
        "temperature": settings.temperature,
        "top_k": settings.top_k or 0,
        "top_p": 1.0 if settings.top_p is None else settings.top_p,
        "seed": view.seed,
    }
    return recipes.fill("inside_gpt_next_token", values)


def heads_code(analysis: PromptAnalysis) -> str:
    """The filled recipe core/recipes/inside_gpt_heads.py: every head's sink share and previous-token score."""
    return recipes.fill("inside_gpt_heads", {"ids": list(analysis.token_ids)})


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


def rope_code(analysis: PromptAnalysis, result: RopeLesson) -> str:
    """The filled recipe core/recipes/inside_gpt_rope.py: this prompt's ids (`rope_lesson` reads the same
    prompt), this head."""
    return recipes.fill("inside_gpt_rope", {"ids": list(analysis.token_ids), "head": result.head})


def kv_cache_code(analysis: PromptAnalysis, new_tokens: int) -> str:
    """The filled recipe core/recipes/inside_gpt_kv_cache.py: this prompt's ids, as many greedy tokens as timed."""
    return recipes.fill("inside_gpt_kv_cache", {"ids": list(analysis.token_ids), "new_tokens": new_tokens})


# Bounds: a prompt's analysis is at most 30 x 9 x 64 x 64 float16 (2.2 MB) plus the logits (0.2 MB).
# tests/unit/test_inside_gpt.py measures the largest of each and holds the sum under CACHE_BUDGET_MIB.
CACHE_BUDGET_MIB = 40
PROMPT = LessonSpec(analyse_prompt, uses=None, max_entries=8)
VOCABULARY = LessonSpec(vocabulary_texts, uses=None, max_entries=1)  # 49,152 short strings, one model
GENERATION = LessonSpec(generate_steps, uses=None, max_entries=16, ttl_s=30 * 60)  # <= 16 x 270 x 80 float16
INDUCTION = LessonSpec(induction_lesson, uses=None, max_entries=32)
ABLATION = LessonSpec(ablation_lesson, uses=None, max_entries=128)
ROPE = LessonSpec(rope_lesson, uses=None, max_entries=64)
CACHE_TIMING = LessonSpec(cache_timing, uses=None, max_entries=16)
CACHE_SIZES = LessonSpec(cache_sizes, uses=None, max_entries=1)
LESSONS = (PROMPT, VOCABULARY, GENERATION, INDUCTION, ABLATION, ROPE, CACHE_TIMING, CACHE_SIZES)
STOPPABLE = (GENERATION, CACHE_TIMING)  # they take `_keep_going` (and stop between tokens, between steps)
EXAMPLE_INPUTS = frozenset((example.text, example.kind) for example in EXAMPLES)


def timed_without_asking(text: str, kind: PromptKind) -> bool:
    """Whether the KV cache's timing runs as the page opens: on the example prompts only (their timing is
    computed once per process and shared). On a student's own prompt it runs when the student asks: it
    generates TIMED_TOKENS tokens twice, about 85% of the model's work for a new prompt (loadtest/
    inside_gpt_queue.py), and twenty students changing prompts made every other student wait behind it."""
    return (text, kind) in EXAMPLE_INPUTS


def shared_by_everyone(lesson: LessonSpec, args: tuple) -> bool:
    """Whether a result is one a new student reads at the page's defaults: the example prompts' analyses, RoPE
    checks, timings and default generations, the default induction run and its heads switched off (to zero),
    the vocabulary and the cache's sizes. `args` leave the model out.

    A finite set (4 prompts; x 9 heads for RoPE; 270 heads for the switch-off's small results): the app keeps
    all of it apart from the students' own results, which can never push it out (ui/gpt_queue.py).
    """
    if lesson in (VOCABULARY, CACHE_SIZES):
        return True
    if lesson in (PROMPT, ROPE, CACHE_TIMING, GENERATION) and tuple(args[:2]) not in EXAMPLE_INPUTS:
        return False
    if lesson in (PROMPT, ROPE):  # ROPE: (text, kind, head)
        return True
    if lesson is CACHE_TIMING:  # (text, kind, new_tokens)
        return args[2] == TIMED_TOKENS
    if lesson is GENERATION:  # (text, kind, settings, seed, new_tokens)
        return tuple(args[2:5]) == (sampling_settings(DEFAULT_TEMPERATURE, 0, 1.0), DEFAULT_SEED, DEFAULT_NEW_TOKENS)
    if lesson is INDUCTION:  # (length, seed)
        return tuple(args) == (DEFAULT_REPEAT, DEFAULT_SEED)
    if lesson is ABLATION:  # (length, seed, layer, head, choice)
        return tuple(args[:2]) == (DEFAULT_REPEAT, DEFAULT_SEED) and args[4] == AblationChoice.ZERO
    return False


def run_lesson(lesson: LessonSpec[R], model: smollm2.SmolLM2, args: tuple, keep_going: Callable[[], bool]) -> R:
    """One of the page's computations, as the app's model queue runs it: `lesson.compute(model, *args)` under
    torch.inference_mode (no autograd graph can be recorded, so every intermediate tensor is freed when the run
    ends); the stoppable ones are given `keep_going` (False once nobody waits for the result)."""
    with torch.inference_mode():
        if lesson in STOPPABLE:
            return lesson.compute(model, *args, keep_going)
        return lesson.compute(model, *args)
