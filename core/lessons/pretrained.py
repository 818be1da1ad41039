"""Lessons 2, 4 and 5 (7: pretrained_cross.py) on learned weights: one real head of a model, not a random draw.

The step-by-step lessons draw random W_q, W_k, W_v on purpose (the sources do, to show the
mechanics). With a model weight source (core/inputs/weights.py) the same steps run on weights that
learned something, and these functions never ask which model (core/inputs/model_heads.py):
- ENCODER (`?weights=pretrained`), all-MiniLM-L6-v2: x is the hidden state entering the layer
  ([CLS] and [SEP] included), W_q, W_k, W_v a head's 32 columns of 384, with biases;
- DECODER (`?weights=decoder`), SmolLM2-135M: x is the normalised stream entering the layer, W_q a
  query head's 64 columns of 576, W_k and W_v its group's key/value head, no biases, RoPE, and the
  causal mask it was trained behind.
Lessons 2, 4 and 5 return the same TrainableLesson, CausalLesson and MultiHeadLesson as on random draws
(core/lessons/trainable_weights.lesson_from_trace, core/lessons/causal_dropout.lesson_from_masks,
core/lessons/multi_head.lesson_from_heads); lesson 7's adapter, pretrained_cross.py, returns its CrossLesson.

Shape legend: T = tokens of the sentence, D = hidden width, h = heads, d_k = head width.
Matrices are drawn as (D, d_k), the x @ W layout of lesson 2.
"""

from __future__ import annotations

import pandas as pd
import torch

from core import recipes
from core.app.registry import LessonSpec
from core.app.settings import PresetKey, Settings, load_example
from core.inputs import model_heads
from core.inputs.examples import LIFE_SENTENCE
from core.inputs.model_heads import AnyModel
from core.inputs.pretrained_heads import HeadPattern, parks_most
from core.inputs.weights import ModelShape, WeightSource, head_trace
from core.lessons import multi_head
from core.lessons.causal_dropout import (
    CausalLesson,
    MaskEffect,
    applied_rate,
    causal_masks,
    lesson_from_masks,
    mask_effect,
)
from core.lessons.common import Prediction, clamp_index
from core.lessons.multi_head import MultiHeadLesson, TrainedLayer, lesson_from_heads

# Lesson 7 has its own module; the tests read it through this one too (pt.CROSS, pt.PAIRS, ...).
from core.lessons.pretrained_cross import CROSS, PAIRS  # noqa: F401
from core.lessons.trainable_weights import TrainableLesson, favourite_keys_question, lesson_from_trace

# The head each lesson opens on, per model, chosen by its measured pattern on the lesson's default sentence
# (tests/unit/test_pretrained.py and test_decoder_source.py re-measure each one and fail if it stops making
# the lesson's point).
DEFAULT_HEADS: dict[WeightSource, dict[str, tuple[int, int]]] = {
    WeightSource.ENCODER: {
        # A next-piece head: 5 different favourite keys on the book's 8 pieces, against 1 for the random draws.
        # (Layer 0, head 2, the previous-piece head, is lesson 6's question: it must not be shown here first.)
        "trainable_weights": (4, 9),
        "causal_dropout": (1, 8),  # a next-piece head: the causal mask removes the key it looks at most
        # Layer 1: three kinds of head side by side (next piece, [CLS]/[SEP] two ways). Layer 0 has four, but its
        # head 2 is the previous-piece head that answers lesson 6's question.
        "multi_head": (1, 0),
        "cross_attention": (1, 1),  # a same-word head: a piece reads its copy in the other sentence
    },
    WeightSource.DECODER: {
        # A self head: all 6 rows their own favourite, 0.86 of a row on itself. (Layer 16, head 0, the overview's
        # previous-token head on the same sentence, would show this question's answer on the first page.)
        "trainable_weights": (11, 6),
        "causal_dropout": (16, 0),  # the overview's previous-token head: trained behind the mask, it loses nothing
        # Layer 11: four kinds of head on the book's sentence, each clear (previous token 0.75, itself 0.83, first
        # token 0.57, spread out). Layer 0's nine looked alike (the s20 review); layers 3-9 park every head on the sink.
        "multi_head": (11, 0),
    },
}


# ------------------------------------------------------------------ lesson 2
# A (384, 32) matrix is 12,288 cells: as a chart it is noise that takes the browser seconds to draw. The page
# shows its top-left corner (the Code box has all of it) and says so: its first 12 rows by all 64 of the
# decoder's columns were still unreadable at a laptop's width (the s22 review).
W_ROWS_SHOWN = W_COLS_SHOWN = 8


def pretrained_trainable_lesson(
    model: AnyModel, sentence: str, layer: int, head: int, query_index: int
) -> TrainableLesson:
    """Lesson 2 on (layer, head) of a model, for `sentence`: the same lesson as on random draws.

    A decoder head runs as the model runs it, behind its causal mask: its weights are the model's own."""
    real = model_heads.heads_of(model).head(sentence, layer, head)
    tokens = real.tokens
    query_index = clamp_index(query_index, len(tokens))
    trace = head_trace(real, causal=real.causal)
    pattern = HeadPattern.of(layer, head, trace.weights, model_heads.shape_of(model))
    return lesson_from_trace(
        tokens,
        trace,
        (real.w_query, real.w_key, real.w_value),
        query_index,
        rows_shown=W_ROWS_SHOWN,
        cols_shown=W_COLS_SHOWN,
        prediction=favourite_keys_question(tokens, trace.weights, head=pattern),
        code=_head_code(model, sentence, layer, head),
        pattern=pattern,
        provenance=real.provenance,
        causal=real.causal,
    )


def _head_code(model: AnyModel, sentence: str, layer: int, head: int) -> str:
    """Lesson 2's Code box: the head from the model's own files (the decoder's from its GGUF file, by token ids)."""
    ids = model_heads.heads_of(model).token_ids(sentence)
    if ids is not None:
        return recipes.fill("decoder_head", {"text": sentence, "ids": ids, "layer": layer, "head": head})
    return recipes.fill("pretrained_head", {"sentence": sentence, "layer": layer, "head": head})


# ------------------------------------------------------------------ lesson 4
def _future_question(tokens: tuple[str, ...], changed: int, future_mass: float, trained_causal: bool) -> Prediction:
    """How many rows the causal mask sends to another strongest key (`changed` of them)."""
    total = len(tokens)
    # Ranges that do not overlap: "Fewer than half" was true of none as well (the s28b review).
    buckets = ("None of them", "Some, but fewer than half", "Half or more")
    answer = 0 if changed == 0 else (1 if changed < total / 2 else 2)
    if trained_causal:
        question = (
            f"This decoder head was trained behind the causal mask. Take the mask away and compare with the model's "
            f"own, masked weights: of its {total} rows, how many have a different strongest key?"
        )
        reason = (
            f"Unmasked, a head that never saw the future in training still scores later tokens: an average row "
            f"put {future_mass:.2f} of its weight there. Those scores were never trained, which is why the model "
            "never lets a query see them."
        )
    else:
        question = (
            f"This head was trained to see the whole sentence. Mask the future: of its {total} rows, how many will "
            "get a different strongest key?"
        )
        reason = (
            f"Unmasked, the head put {future_mass:.2f} of an average row's weight on later pieces (a mean over all "
            f"{total} rows, the last included, which has no later piece); the mask takes that away and the softmax "
            "hands it to the pieces that remain."
        )
    return Prediction(
        question=question,
        options=buckets,
        answer=answer,
        explanation=f"{changed} of {total} rows changed their strongest key. {reason}",
    )


def pretrained_causal_lesson(
    model: AnyModel, sentence: str, layer: int, head: int, training: bool, dropout: float, seed: int
) -> CausalLesson:
    """Lesson 4 on (layer, head) of a model, for `sentence`: the same lesson as on random draws.

    `dropout` is the sidebar's rate (at 0, training mode applies the book's 0.5); `seed` draws the dropout mask.
    An encoder head gets a mask it never had; a decoder head's masked weights are its own, and its unmasked
    ones are what it would do if it could see the future it was never trained on."""
    real = model_heads.heads_of(model).head(sentence, layer, head)
    tokens = real.tokens
    masks = causal_masks(head_trace(real).scaled_scores, training=training, sidebar_rate=dropout, dropout_seed=seed)
    # A head is named by what it does as the model runs it: a decoder's behind its mask.
    shown = masks.masked if real.causal else masks.unmasked
    effect = mask_effect(tokens, masks)
    rate = applied_rate(dropout, training)
    return lesson_from_masks(
        tokens,
        masks,
        head_dim=int(real.w_query.shape[1]),
        prediction=_future_question(tokens, effect.rows_changed, effect.future_mass, real.causal),
        code=_causal_code(model, sentence, layer, head, training, rate, seed),
        trained_causal=real.causal,
        effect=effect,
        pattern=HeadPattern.of(layer, head, shown, model_heads.shape_of(model)),
        provenance=real.provenance,
    )


OTHER_MODEL = {WeightSource.ENCODER: WeightSource.DECODER, WeightSource.DECODER: WeightSource.ENCODER}


def mask_contrast(this: CausalLesson, other: CausalLesson, other_model: str) -> str:
    """Lesson 4's two kinds of head side by side, in words from both lessons' numbers: a decoder head trained
    behind the mask, and an encoder head that gets the mask afterwards (each from its own model)."""
    if other.provenance is None or this.effect is None or other.effect is None:
        raise ValueError("mask_contrast compares two models' heads; a lesson on random draws has no head to name.")

    def kind(lesson: CausalLesson) -> str:
        return "trained behind the mask" if lesson.trained_causal else "given the mask afterwards"

    def measured(lesson: CausalLesson, effect: MaskEffect) -> str:
        return (
            f"unmasked, an average row puts {effect.future_mass:.2f} of its weight on later tokens, and the mask "
            f"gives {effect.rows_changed} of its {len(lesson.tokens)} rows another strongest key"
        )

    return (
        f"This head ({kind(this)}): {measured(this, this.effect)}. {other_model}'s layer {other.provenance.layer}, "
        f"head {other.provenance.head} "
        f"({kind(other)}), on the same sentence: {measured(other, other.effect)}."
    )


def _causal_code(
    model: AnyModel, sentence: str, layer: int, head: int, training: bool, dropout: float, seed: int
) -> str:
    settings = {"layer": layer, "head": head, "dropout": dropout, "training": training, "seed": seed}
    ids = model_heads.heads_of(model).token_ids(sentence)
    if ids is not None:
        return recipes.fill("decoder_causal", {"text": sentence, "ids": ids, **settings})
    return recipes.fill("pretrained_causal", {"sentence": sentence, **settings})


# ------------------------------------------------------------------ lesson 5
def score_similarity(model: AnyModel, layer: int) -> float:
    """The largest |cosine| between two heads' score functions W_q W_kᵀ (D, D) in `layer`: 1 would be two
    heads that score every pair of pieces alike, whatever the sentence."""
    forms = model_heads.heads_of(model).score_forms(layer)
    stacked = torch.stack(forms)  # (h, D * D)
    unit = stacked / stacked.norm(dim=1, keepdim=True)
    cosines = (unit @ unit.T).abs()  # (h, h)
    off_diagonal = ~torch.eye(len(forms), dtype=torch.bool)
    return float(cosines[off_diagonal].max())


def sink_count_options(heads: int) -> tuple[tuple[str, range], ...]:
    """Lesson 5's trained-heads question: four ranges of how many of `heads` heads (none, a few, a third to two
    thirds, most), each with its label; 12 heads: none, 1 to 3, 4 to 8, 9 to 12 (9 heads: 3 to 6 in the third).
    Not "about half": 8 of 12 is two thirds (the s28b review)."""
    few = max(heads // 4, 1)
    return (
        ("None of them", range(0, 1)),
        (f"A few: 1 to {few}", range(1, few + 1)),
        (f"A third to two thirds: {few + 1} to {heads - few - 1}", range(few + 1, heads - few)),
        (f"Most: {heads - few} or more", range(heads - few, heads + 1)),
    )


def _heads_question(
    patterns: tuple[HeadPattern, ...], weights: torch.Tensor, similarity: float, shape: ModelShape
) -> Prediction:
    """How many heads of this layer park most of their weight on the model's sink? weights: (h, T, T).

    A two-option "will they look alike?" had one answer nobody picks (the s26b review). This count is a real
    question: a student expects heads to read words, and most trained heads put their spare weight on a token
    that carries little. The count reads the printed shares, as the heads' labels do ("most" is over 0.50 as
    printed). The explanation then shows that even the heads that park there differ, cell by cell.
    """
    heads, num_tokens = weights.shape[0], weights.shape[-1]
    parked = [p for p in patterns if parks_most(p.sinks)]
    ranges = sink_count_options(heads)
    answer = next(i for i, (_, counts) in enumerate(ranges) if len(parked) in counts)
    # A decoder's first row can read only the first token: it is left out, as the heads' labels leave it out.
    rows = (
        "averaged over the rows after the first, whose only key is the first token"
        if shape.causal
        else "averaged over the rows"
    )
    pairs = [float((weights[i] - weights[j]).abs().mean()) for i in range(heads) for j in range(i + 1, heads)]
    typical = float(torch.tensor(pairs).median())
    # Compact, so the verdict ends above a projector's fold beside the options (one "head h (0.87)" each ran 741 px).
    named = (
        f"head{'s' if len(parked) > 1 else ''} {', '.join(str(p.head) for p in parked)} "
        + (
            f"({parked[0].sinks:.2f})"
            if len(parked) == 1
            else f"({min(p.sinks for p in parked):.2f} to {max(p.sinks for p in parked):.2f})"
        )
        if parked
        else ""
    )
    counted = (
        f"{len(parked)} of the {heads} heads put more than half of their weight on {shape.sink} ({rows})"
        + (f": {named}. " if parked else ". ")
        + (
            "A head with nothing to read here still has to place its weight, which adds up to 1, and parks it there "
            "(attention sinks: Clark et al. 2019, Xiao et al. 2023). "
            if parked
            else ""
        )
    )
    # A head printed at 0.50 is not over half: said, as a student counting the table would count it (s27b review).
    at_half = [p for p in patterns if f"{p.sinks:.2f}" == "0.50"]
    boundary = ""
    if len(at_half) == 1:
        boundary = f"Head {at_half[0].head} prints 0.50: not more than half, so not counted. "
    elif at_half:
        boundary = f"Heads {', '.join(str(p.head) for p in at_half)} print 0.50: not more than half, so not counted. "
    differ = typical >= multi_head.HEADS_DIFFER
    measured = (
        # A decoder's masked cells are zeros in every head: they count in the mean, as in random mode, and say so
        # (the s24 review: the decoder's "per weight" silently averaged 15 zeros of 36 cells). Whether they "still
        # differ" is read off the same threshold it quotes (decoder layer 20: 0.018, the s27b review).
        ("The heads still differ" if differ else "Here the heads differ less than we call clear")
        + f": measured weight by weight over all {num_tokens} × {num_tokens} cells"
        + (", the masked zeros included," if shape.causal else ",")
        + f" a typical pair differs by {typical:.3f} per weight (we call at least {multi_head.HEADS_DIFFER} clear; "
        f"the closest pair {min(pairs):.3f}, the farthest {max(pairs):.3f}). "
    )
    weights_part = (
        ("Their weights say so too" if differ and similarity < 0.9 else "Their weights")
        + f": the two most similar heads' W_q W_kᵀ have a cosine similarity of "
        f"{similarity:.2f} (1 would score every pair of pieces alike)"
        + (", so each head computes its own scores." if similarity < 0.9 else ".")
    )
    return Prediction(
        question=f"These are the {heads} heads of one trained layer. How many of them put more than half of "
        f"their weight on {shape.sink} ({rows})?",
        options=tuple(label for label, _ in ranges),
        answer=answer,
        explanation=counted + boundary + measured + weights_part,
    )


def pretrained_multihead_lesson(model: AnyModel, sentence: str, layer: int) -> MultiHeadLesson:
    """Lesson 5 on every head of `layer` for `sentence`: the same lesson as on random draws."""
    heads_source = model_heads.heads_of(model)
    heads_source.check(layer, 0)
    shape = model_heads.shape_of(model)
    forms = heads_source.layer_forms(sentence, layer)
    tokens, weights = forms.tokens, forms.weights  # weights (h, T, T)
    heads = shape.num_heads
    patterns = tuple(HeadPattern.of(layer, h, weights[h], shape) for h in range(heads))
    trained = TrainedLayer(
        layer=layer,
        patterns=patterns,
        patterns_table=_patterns_table(patterns, SINK_COLUMN[shape.sink]),
        split_vs_model=float((forms.split - forms.model_output).abs().max()),
        largest_output=float(forms.model_output.abs().max()),
        shapes=forms.shapes,
        d_model=shape.hidden_size,
        kv_heads=heads // 3 if shape.causal else heads,
    )
    return lesson_from_heads(
        tokens,
        weights,
        range(heads),
        forms.wrapper,
        forms.split,
        head_dim=shape.head_dim,
        causal=shape.causal,
        prediction=_heads_question(patterns, weights, score_similarity(model, layer), shape),
        code=_multihead_code(model, sentence, layer),
        trained=trained,
    )


def _patterns_table(patterns: tuple[HeadPattern, ...], sink_column: str) -> pd.DataFrame:
    """One row per head: what it was measured to do."""
    return pd.DataFrame(
        {
            "head": [p.head for p in patterns],
            "pattern": [p.summary for p in patterns],
            "entropy (nats)": [p.entropy for p in patterns],
            "previous": [p.previous for p in patterns],
            "next": [p.next for p in patterns],
            sink_column: [p.sinks for p in patterns],
            "itself": [p.self_weight for p in patterns],
        }
    )


def _multihead_code(model: AnyModel, sentence: str, layer: int) -> str:
    """Lesson 5's Code box: the layer from the model's own files (the decoder's from its GGUF file, by token ids)."""
    ids = model_heads.heads_of(model).token_ids(sentence)
    if ids is None:
        return recipes.fill("pretrained_multi_head", {"sentence": sentence, "layer": layer})
    return recipes.fill("decoder_multi_head", {"text": sentence, "ids": ids, "layer": layer})


# The patterns table's sink column, named after the model's sink.
SINK_COLUMN = {"[CLS] and [SEP]": "[CLS] + [SEP]", "the first token": "first token"}


def lesson_sentence(settings: Settings) -> str:
    """The sentence a pretrained lesson reads: the sidebar's own sentence, or the preset's as words."""
    if settings.preset == PresetKey.CUSTOM:
        return settings.text
    if settings.preset == PresetKey.ARTICLE:
        return LIFE_SENTENCE  # with its comma, as the article writes it
    return " ".join(load_example(settings).tokens)


def default_query(settings: Settings, num_tokens: int, source: WeightSource = WeightSource.ENCODER) -> int:
    """The preset's query token, one place later since [CLS] comes first among the encoder's word pieces; in a
    decoder the last token, the one that predicts the next and sees every key (a causal head's early queries
    have one or two keys to choose from)."""
    if source is WeightSource.DECODER:
        return num_tokens - 1
    return clamp_index(settings.preset_info.query_index + 1, num_tokens)


BOOK_SENTENCE = "Your journey starts with one step"


def usable_sentence(model: AnyModel, sentence: str) -> tuple[str, tuple[str, ...], str | None]:
    """(the sentence to show, its tokens as labelled, why the asked one could not be used or None).

    A sentence the model cannot take (no words, over the lessons' 64-token cap) gives way to the book's.
    """
    try:
        return sentence, model_heads.heads_of(model).pieces(sentence), None
    except ValueError as error:  # the encoder's SentenceError, the decoder's TextError
        book = model_heads.heads_of(model).pieces(BOOK_SENTENCE)
        return BOOK_SENTENCE, book, f"{error} Showing the book's sentence instead."


# ------------------------------------------------------------------ what the pages cache (ui/cache.py `computed`)
# The model is the process's one shared encoder: the leading underscore keeps it out of st.cache_data's
# key. Entries: the one byte budget of every lesson (ui/cache.CACHE_BUDGET_MIB, the server's
# maxCacheDataSize) over the largest result at the 64-piece cap (pickled ~1.1, 0.9, 3.1 and 0.3 MiB),
# measured by tests/unit/test_cache_budget.py. A class mostly stays on each lesson's default head, so a
# few entries serve it; another head is recomputed in milliseconds.


# `source` names the model in the cache key (the model itself, underscored, is not hashed), so an encoder's
# and a decoder's results never share an entry.
def _trainable(source: WeightSource, _model: AnyModel, sentence: str, layer: int, head: int, query: int):
    return pretrained_trainable_lesson(_model, sentence, layer, head, query)


def _causal(
    source: WeightSource, _model: AnyModel, sentence: str, layer: int, head: int, training: bool, p: float, seed: int
):
    return pretrained_causal_lesson(_model, sentence, layer, head, training, p, seed)  # p: the sidebar's rate


def _multihead(source: WeightSource, _model: AnyModel, sentence: str, layer: int):
    return pretrained_multihead_lesson(_model, sentence, layer)


def _usable_sentence(source: WeightSource, _model: AnyModel, sentence: str):
    return usable_sentence(_model, sentence)


TRAINABLE = LessonSpec(_trainable, uses=None, max_entries=6)
CAUSAL = LessonSpec(_causal, uses=None, max_entries=6)
MULTIHEAD = LessonSpec(_multihead, uses=None, max_entries=2)
SENTENCE = LessonSpec(_usable_sentence, uses=None, max_entries=256)  # a sentence's word pieces: ~1 kB each
