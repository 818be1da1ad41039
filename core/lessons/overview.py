"""Lesson 0, the overview: the current input, one embedding vector per token."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from core import recipes
from core.app import registry
from core.app.registry import LessonSpec
from core.app.settings import PresetKey, Settings, load_example
from core.inputs.examples import life_vocabulary
from core.inputs.weights import BFLOAT16_WEIGHT_GAP
from core.lessons.common import dims, inputs_source, matrix_frame, tokens_comment, unique_labels
from core.lessons.inside_gpt import PromptAnalysis, best_previous_head


@dataclass(frozen=True)
class OverviewLesson:
    tokens: tuple[str, ...]
    source: str  # where the input comes from, in words
    d_in: int
    embeddings: pd.DataFrame  # matrix_frame of the (T, d_in) inputs
    signed: bool  # whether any embedding value is negative (picks the colour scale)
    vocabulary: tuple[tuple[str, int], ...]  # the self-attention article's word -> id table (empty otherwise)
    token_ids: tuple[int, ...]  # the sentence as ids, the rows nn.Embedding looks up (empty otherwise)
    code: str  # the filled recipe core/recipes/overview.py


def overview_lesson(settings: Settings) -> OverviewLesson:
    example = load_example(settings)
    vocabulary = life_vocabulary() if settings.preset == PresetKey.ARTICLE else {}
    tokens = unique_labels(example.tokens)
    code = recipes.fill("overview", {"tokens": tokens_comment(settings), "inputs": inputs_source(settings)})
    return OverviewLesson(
        tokens=tokens,
        source=settings.preset_info.source,
        d_in=example.d_in,
        embeddings=matrix_frame(example.embeddings, tokens, dims("x", example.d_in)),
        signed=bool((example.embeddings < 0).any()),
        vocabulary=tuple(vocabulary.items()),
        token_ids=tuple(vocabulary[word] for word in example.tokens) if vocabulary else (),
        code=code,
    )


# The cached computation the page calls (ui/cache.py `computed`); keyed on the settings it reads.
LESSON = LessonSpec(overview_lesson, uses=frozenset(), max_entries=64)


@dataclass(frozen=True)
class LecturePart:
    """One lesson in a lecture: about how long it takes in class, and what to put on the projector."""

    minutes: int
    show: str


# A 90-minute path through the lab. Keyed by slug: `lecture_path` walks the registry, so a lesson added there
# without a line here fails the overview's test instead of silently missing from the plan.
LECTURE_PLAN: dict[str, LecturePart] = {
    "without_weights": LecturePart(
        10,
        "Ask the question first; then the dot-product bars and the three normalisations, and push the "
        "multiplier to 200 to show the naive softmax overflow. End on the shuffled sentence: no word order yet.",
    ),
    "trainable_weights": LecturePart(
        10,
        "Q, K and V for one query, the scaled scores and the weights; then switch Weights to decoder and count the "
        "favourite keys again: at the default seed the random weights give every row one favourite, the decoder's "
        "head gives each row its own.",
    ),
    "why_scale": LecturePart(
        8, "The ×1…×16 question, then the bars turning peaky and the gradient falling towards zero."
    ),
    "causal_dropout": LecturePart(
        8, "The masked heatmap (the future greyed out), then a dropout draw and the rescaled weights."
    ),
    "multi_head": LecturePart(8, "The heads side by side on one sentence; one matrix split into heads."),
    "real_model": LecturePart(
        8,
        "Let the class vote on the previous-token head, then the 72-head grid and the measures map; "
        "the example sentences' pronoun heads.",
    ),
    "inside_gpt": LecturePart(
        8,
        "A counting prompt and its next-token probabilities, temperature up and down, then the chat question; "
        "the induction heads on the repeated sequence, and switch the top one off.",
    ),
    "to_the_answer": LecturePart(
        6,
        "The parts adding up to the residual; ask where the lens puts the answer on top, then the attribution "
        "map and one click on its top head; end on attribution patching.",
    ),
    "gpt_keys": LecturePart(
        4, "Ask what moving a query and a key along the text does to their score; then the shared and cached keys."
    ),
    "cross_attention": LecturePart(6, "Queries from one sentence, keys and values from the other: the shapes."),
    "training_lab": LecturePart(
        8, "Start a run in class (it trains in seconds) and watch a head find the previous token."
    ),
    "attention_at_scale": LecturePart(
        6, "The doubling question, the T² time and memory, the skipped tiles and the KV cache's speed-up."
    ),
}


def lecture_path() -> pd.DataFrame:
    """Every lesson of the registry, in order, with its minutes, a running total and what to show."""
    rows, total = [], 0
    for spec in registry.lessons():
        part = LECTURE_PLAN[spec.slug]  # a KeyError names a lesson the plan forgot
        total += part.minutes
        rows.append(
            {
                # "10. …" in a table cell is read as a markdown list: its "1" was cut off
                "lesson": f"{spec.number} · {spec.title}",
                "minutes": part.minutes,
                "after (min)": total,
                "what to show": part.show,
            }
        )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------
# Attention at work on the first screen: one real GPT head on the current input (where the model is installed)


@dataclass(frozen=True)
class LivePattern:
    """The clearest previous-token head of SmolLM2-135M on the current input, measured on it."""

    sentence: str  # what the model read
    layer: int
    head: int
    score: float  # decoder_measures.previous_token_score: first token left out, rows renormalised
    raw_share: float  # mean weight on the token just before, first token kept (queries 2..T-1)
    sink_share: float  # the same head's mean weight on the first token (the same queries 2..T-1)
    weights: pd.DataFrame  # matrix_frame of the head's (T, T) weights

    def caption(self) -> str:
        return (
            f"Layer {self.layer}, head {self.head} of SmolLM2-135M-Instruct, a real GPT, reading this sentence: the "
            "head with the highest previous-token score here. From the third token on, a token puts on average "
            f"{self.raw_share:.0%} of its weight on the token just before it and {self.sink_share:.0%} on the "
            "first token (where many heads park what they do not need); leaving the first token out, "
            f"{self.score:.0%} of the rest goes to the token before, on average. The grey triangle is the future, "
            "which a GPT may not see. These are the model's own numbers (its 4-bit weights multiplied in "
            "bfloat16); lessons 2, 4 and 5 redo one head in float32, so their weights can differ from these by up "
            f"to about {BFLOAT16_WEIGHT_GAP}. Lesson 10 opens all 270 heads."
        )


def overview_sentence(settings: Settings) -> str:
    """The current input as a sentence: the sidebar's own sentence, or the example's words."""
    if settings.preset == PresetKey.CUSTOM:
        return settings.text
    return " ".join(load_example(settings).tokens)


def live_pattern(analysis: PromptAnalysis) -> LivePattern:
    """The head of `analysis` (a prompt's forward pass) that best reads the previous token, and its numbers."""
    layer, head, score = best_previous_head(analysis)
    weights = torch.from_numpy(analysis.attentions[layer, head]).float()  # (T, T)
    num_tokens = weights.shape[0]
    queries = torch.arange(2, num_tokens)
    tokens = unique_labels(analysis.tokens)
    return LivePattern(
        sentence=analysis.text,
        layer=layer,
        head=head,
        score=score,
        raw_share=float(weights[queries, queries - 1].mean()),
        sink_share=float(weights[queries, 0].mean()),
        weights=matrix_frame(weights, tokens, tokens),
    )
