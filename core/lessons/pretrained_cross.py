"""Lesson 7 on learned weights: cross-attention through one real head of all-MiniLM-L6-v2, returning the same
CrossLesson as on random draws (core/lessons/cross_attention.lesson_from_cross).

Queries come from one sentence, keys and values from another; each sentence runs through the model alone
up to the chosen layer (core/inputs/pretrained_heads.py). The rest of the pretrained mode is core/lessons/pretrained.py.

Shape legend: T1 = word pieces of the first sentence, T2 = of the second, D = hidden width (384),
d_k = head width (32).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from core import recipes
from core.app.choices import CrossPair  # the pair box's codes (with OWN_PAIR and pair_choices), which a link names too
from core.app.registry import LessonSpec
from core.inputs.pretrained_heads import check_head, head_input, hidden_entering
from core.inputs.weights import head_trace
from core.lessons.common import Prediction
from core.lessons.cross_attention import CrossLesson, TrainedHead, lesson_from_cross, strongest_keys
from core.models import minilm as real_model


# ------------------------------------------------------------------ lesson 7
@dataclass(frozen=True)
class SentencePair:
    key: str
    label: str
    first: str  # the queries' sentence
    second: str  # the keys' and values' sentence


# One for each CrossPair key, in its order (the keys live in core.app.choices, for the link rule).
PAIRS: tuple[SentencePair, ...] = (
    SentencePair(
        CrossPair.PARAPHRASE.value,
        "A sentence and its paraphrase",
        "The young boy kicked the red ball across the park.",
        "In the park, a child kicked a ball that was red.",
    ),
    SentencePair(
        CrossPair.QUESTION.value,
        "A question and the sentence that answers it",
        "Where did the cat sleep last night?",
        "Last night the cat slept on the warm kitchen floor.",
    ),
)


OWN_PAIR_LABEL = "Your own two sentences"


def pair_label(code: str) -> str:
    """What the pair box shows for `code`."""
    return next((pair.label for pair in PAIRS if pair.key == code), OWN_PAIR_LABEL)


SPECIAL_PIECES = ("[CLS]", "[SEP]")
_FUNCTION_PIECES = frozenset({"the", "a", "an", ".", ",", "?", "!"})  # too common to call a match meaningful


def _raw(label: str) -> str:
    """The word piece behind a unique chart label ('the (2)' -> 'the')."""
    return label.split(" (")[0]


def shared_word_pairs(tokens: tuple[str, ...], second: tuple[str, ...]) -> list[tuple[int, list[int]]]:
    """(query position, the positions of its copies in the second sentence) for each content piece in both."""
    pairs = []
    for i, token in enumerate(tokens):
        word = _raw(token)
        if word in SPECIAL_PIECES or word in _FUNCTION_PIECES:
            continue
        copies = [j for j, other in enumerate(second) if _raw(other) == word]
        if copies:
            pairs.append((i, copies))
    return pairs


NEAR_TIE = 0.05  # shares of the words' weight closer than this: the question has no clear answer at that head
SPECIAL_MOST = 0.9  # [CLS] and [SEP] taking at least this much: the head reads almost nothing but them
# The sink question's buckets, (low, high, label): at 7 of 72 heads on each shipped pair the special tokens take
# 0.90 to 0.99, both sides of 0.95, so the two top buckets are both answers somewhere (measured at this release).
SINK_BUCKETS = (
    (0.0, 0.5, "Less than half"),
    (0.5, SPECIAL_MOST, f"Half to {SPECIAL_MOST:.2f}"),
    (SPECIAL_MOST, 0.95, f"{SPECIAL_MOST:.2f} to 0.95"),
    (0.95, 1.0 + 1e-9, "More than 0.95"),
)


def _sink_question(word: str, special: float, best: str, best_weight: float) -> Prediction:
    """At a head where [CLS] and [SEP] take most of the row, which word wins is decided on a hundredth of the
    weight (0.0101 at layer 3, head 5; the s28b review): ask how much the two take instead."""
    answer = next(i for i, (low, high, _) in enumerate(SINK_BUCKETS) if low <= special < high)
    return Prediction(
        question=f"How much of “{word}”'s weight will [CLS] and [SEP] take together at this head?",
        options=tuple(label for _, _, label in SINK_BUCKETS),
        answer=answer,
        explanation=(
            f"[CLS] and [SEP] take {special:.4f} of “{word}”'s weight: this head reads almost nothing but them. "
            f"Every word of the second sentence shares the remaining {1 - special:.4f}; the most, “{best}”, gets "
            f"{best_weight:.4f}, too little to say what the head looks for. A common reading of such heads: they "
            "park their weight on the special tokens when they have nothing to add. Pick another layer or head to "
            "see one that reads words."
        ),
    )


def _cross_question(
    tokens: tuple[str, ...], second: tuple[str, ...], weights: torch.Tensor, pairs: list[tuple[int, list[int]]]
) -> Prediction:
    """Apart from [CLS] and [SEP], which piece of the second sentence does one word of the first read most?

    The word asked about is the first content piece that also occurs in the second sentence (else the
    first word); the options are the second sentence's word pieces, the answer the largest of its weights.
    The explanation weighs that answer among the words alone, where two words may nearly tie. Where [CLS] and
    [SEP] take at least SPECIAL_MOST of the row, the question asks how much they take instead.
    """
    query = pairs[0][0] if pairs else 1
    words = tuple(range(1, len(second) - 1))  # the second sentence's pieces without [CLS] and [SEP]
    row = weights[query]
    best, runner_up = sorted(words, key=lambda j: -float(row[j]))[:2]
    special = float(row[0] + row[-1])
    on_words = float(row[1:-1].sum())
    # As printed (2 decimals): the near-tie sentence compares the two numbers the student reads beside it.
    best_share = round(float(row[best]) / on_words, 2)
    runner_up_share = round(float(row[runner_up]) / on_words, 2)
    among = (
        f"Among the words alone (their weights rescaled to add up to 1), “{second[best]}” takes {best_share:.2f} "
        f"and the next, “{second[runner_up]}”, {runner_up_share:.2f}."
    )
    if special >= SPECIAL_MOST:
        return _sink_question(tokens[query], special, second[best], float(row[best]))
    caveats = [among]
    # Words within NEAR_TIE of the answer's share are not offered: graded on 0.01 of the words' weight, half a
    # class was told it was wrong where the page itself said the question had no clear answer (the s29b review).
    near = [j for j in words if j != best and best_share - round(float(row[j]) / on_words, 2) < NEAR_TIE - 1e-9]
    if near:  # 0.23 against 0.18 is 0.05 apart, not less
        named = ", ".join(f"“{second[j]}”" for j in near)
        caveats.append(
            f"Less than {NEAR_TIE:.2f} behind it, what we call a near tie: {named}, so "
            f"{'it is' if len(near) == 1 else 'they are'} not offered as an option."
        )
    offered = tuple(j for j in words if j not in near)
    return Prediction(
        question=(f"Apart from [CLS] and [SEP], which piece of the second sentence will “{tokens[query]}” read most?"),
        options=tuple(second[j] for j in offered),
        answer=offered.index(best),
        explanation=" ".join(
            [
                f"“{second[best]}” gets {float(row[best]):.4f} of the weight, the most of any piece; [CLS] and [SEP] "
                f"together take {special:.4f}.",
                *caveats,
                "The query comes from the first sentence and the keys from the second, though the head was trained "
                "on one sentence at a time.",
            ]
        ),
    )


def pretrained_cross_lesson(model: real_model.RealModel, first: str, second: str, layer: int, head: int) -> CrossLesson:
    """Cross-attention through (layer, head): each sentence runs through the model alone up to `layer`; the same
    lesson as on random draws, with what the trained head does across the two sentences."""
    check_head(model, layer, head)
    tokens, x_first = hidden_entering(model, first, layer)  # (T1, D)
    second_tokens, x_second = hidden_entering(model, second, layer)  # (T2, D)
    kv_head = head_input(model, second_tokens, x_second, layer, head)  # keys and values read the second
    trace = head_trace(kv_head, x_query=x_first)  # weights (T1, T2)
    weights = trace.weights
    on_words = weights[:, 1:-1]  # (T1, T2 - 2): the second sentence's word pieces only
    best_word = on_words.argmax(dim=-1) + 1  # (T1,)
    pairs = shared_word_pairs(tokens, second_tokens)
    shares = [float(weights[i, copies].sum() / on_words[i].sum()) for i, copies in pairs]
    d_k = kv_head.w_query.shape[1]
    trained = TrainedHead(
        layer=layer,
        head=head,
        special_share=float((weights[:, 0] + weights[:, -1]).mean()),
        copy_share=sum(shares) / len(shares) if shares else 0.0,
        copies_found=sum(int(best_word[i]) in copies for i, copies in pairs),
        shared_words=len(pairs),
    )
    strongest = strongest_keys(tokens, second_tokens, weights, ("query", "reads most")).assign(
        **{
            "reads most among words": [second_tokens[j] for j in best_word.tolist()],
            "its weight": weights.gather(1, best_word[:, None])[:, 0].double().numpy(),
        }
    )
    shapes = (
        ("x₁ (first sentence, entering the layer)", tuple(x_first.shape)),
        ("x₂ (second sentence, entering the layer)", tuple(x_second.shape)),
        ("queries = x₁ W_q + b_q", (len(tokens), d_k)),
        ("keys = x₂ W_k + b_k, values = x₂ W_v + b_v", (len(second_tokens), d_k)),
        ("weights", (len(tokens), len(second_tokens))),
        ("context", (len(tokens), d_k)),
    )
    return lesson_from_cross(
        tokens,
        second_tokens,
        weights,
        trace.context,  # (T1, d_k)
        shapes,
        strongest=strongest,
        prediction=_cross_question(tokens, second_tokens, weights, pairs),
        code=recipes.fill(
            "pretrained_cross", {"first_sentence": first, "second_sentence": second, "layer": layer, "head": head}
        ),
        trained=trained,
    )


# What the page caches (ui/cache.py `computed`); the model is kept out of the key by its leading underscore.
def _cross(_model: real_model.RealModel, first: str, second: str, layer: int, head: int):
    return pretrained_cross_lesson(_model, first, second, layer, head)


CROSS = LessonSpec(_cross, uses=None, max_entries=12)
