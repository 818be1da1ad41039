"""Lesson 10: inside a GPT (SmolLM2-135M-Instruct), every number from our own forward pass.

Each section has one cached computation (a `LessonSpec`), a pure function of the shared model and the
page's own values, returning a frozen dataclass of plain arrays. Sampling from the stored logits is cheap
and is not cached. The model is passed as `_model` so that Streamlit's cache does not hash it (it is one
object per process, ui/cache.py).

This module holds the prompt: the example prompts and how the model reads them, the prompt's forward pass
(tokens, every head's weights, the next-token logits) with its question, sampling and the model view, and a
generation, with their Code boxes. The induction measurement and one head's ablation are in
`inside_gpt_induction.py`, RoPE's offset check in `inside_gpt_rope.py`, the KV cache (and grouped-query
attention's sizes) in `inside_gpt_cache.py`; which of them run on the model queue, and which are shared by
every student, in `inside_gpt_runs.py`.

Shape legend: L layers (30), H query heads (9), T tokens, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum, StrEnum

import numpy as np
import torch

from core import recipes
from core.app.choices import MAX_NEW_TOKENS, OWN_PROMPT, GptPrompt
from core.app.registry import LessonSpec
from core.lessons.common import Prediction
from core.models import decoder_measures as measures
from core.models import smollm2
from core.models.gguf_file import ChatMessage, Role
from core.models.sampling import SamplingSettings, next_token_distribution, ranked, sample

MAX_PROMPT_TOKENS = 64  # bounded work per student: 30 x 9 maps of 64 x 64 per prompt
TOP_CANDIDATES = 10
# MAX_NEW_TOKENS, MIN_REPEAT, MAX_REPEAT and the sampling boxes' choices: core.app.choices (links are read by them).
# The page's defaults: a new student's first view reads the results at these values
# (inside_gpt_runs.shared_by_everyone).
DEFAULT_TEMPERATURE = 0.7  # at 1.0 seed 0 drew ' seven' after 'five,' (3%): a class's first text should read well
DEFAULT_SEED = 0
DEFAULT_NEW_TOKENS = 8
DEFAULT_REPEAT = 20
SINK_BIG = 0.5  # a head "parks" on the first token when over half its weight lands there


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


# How far the float32 Code box's probabilities can stand from the page's (4-bit weights multiplied in bfloat16),
# as the page's caption says; tests/unit/test_inside_gpt.py holds the box to it.
FLOAT32_PROBABILITY_GAP = 0.04


def top_token_question(analysis: PromptAnalysis, tokens: Sequence[str]) -> Prediction:
    """Which of four candidates does the model rank first? Answered from the stored logits.

    A token whose logit equals the first one's is not offered (it would be right too), nor one within
    FLOAT32_PROBABILITY_GAP of its probability (the chat question's 'L' at 14.2% against 'The' at 14.5%: a
    student marked wrong for it was marked on a difference the page's own numbers cannot settle, the s28b
    review); the explanation names both instead.
    """
    logits = torch.from_numpy(analysis.last_logits)
    probabilities = logits.softmax(-1)
    order = ranked(logits, 4 + TOP_CANDIDATES)
    top = float(probabilities[order[0]])
    tied = [i for i in order[1:] if logits[i] == logits[order[0]]]
    near = [i for i in order[1:] if i not in tied and top - float(probabilities[i]) < FLOAT32_PROBABILITY_GAP]
    far = [i for i in order[1:] if i not in tied and i not in near]
    # Four options always: on a flat distribution (every candidate within the gap: a 20-token prompt of the load
    # test, whose top token had 3%) the nearest fill the places the far ones leave, and are said to be near.
    rest = sorted([*far[:3], *near[: max(0, 3 - len(far))]], key=order.index)
    offered = [order[0], *rest]
    near_offered, near_left_out = [i for i in near if i in offered], [i for i in near if i not in offered]
    options = tuple(repr(tokens[i]) for i in offered)
    points = f"{FLOAT32_PROBABILITY_GAP * 100:.0f} percentage points"
    shares = lambda ids: ", ".join(f"{tokens[i]!r} at {float(probabilities[i]):.1%}" for i in ids)  # noqa: E731
    verb = "has" if len(tied) == 1 else "have"
    tie = (
        f" {', '.join(repr(tokens[i]) for i in tied)}, not offered, {verb} the same logit "
        f"({float(logits[order[0]]):g}); greedy decoding takes the token with the lower id, {options[0]}."
        if tied
        else ""
    )
    close = (
        f" Not offered, as too close to call: {shares(near_left_out)}: within {points} ({FLOAT32_PROBABILITY_GAP}) "
        "of the top one, closer than the page's numbers and the float32 Code box below can differ."
        if near_left_out
        else ""
    )
    if near_offered:
        be = "is" if len(near_offered) == 1 else "are"
        close += f" A near tie: {shares(near_offered)}, offered, {be} also within {points} of the top one."
    return Prediction(
        "Which of these tokens does the model think most likely to come next?",
        options,
        0,
        # "the most likely option": with near tokens left out, "ahead of 'Al' at 5.9%" read as ahead of every
        # token, where 'L' (14.2%) and 'La' were between them (the s29b review).
        f"{options[0]} at {top:.1%}, the most likely of the options; the next of them, {options[1]}, at "
        f"{float(probabilities[offered[1]]):.1%}.{tie}{close}",
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
# Code boxes


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


# Bounds: a prompt's analysis is at most 30 x 9 x 64 x 64 float16 (2.2 MB) plus the logits (0.2 MB).
PROMPT = LessonSpec(analyse_prompt, uses=None, max_entries=8)
VOCABULARY = LessonSpec(vocabulary_texts, uses=None, max_entries=1)  # 49,152 short strings, one model
GENERATION = LessonSpec(generate_steps, uses=None, max_entries=16, ttl_s=30 * 60)  # <= 16 x 270 x 80 float16
