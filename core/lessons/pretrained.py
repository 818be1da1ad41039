"""Lessons 2, 4, 5 and 7 on learned weights: one real head of all-MiniLM-L6-v2 instead of a random draw.

The step-by-step lessons draw random W_q, W_k, W_v on purpose (the sources do, to show the
mechanics). In `pretrained` mode the same steps run on weights that learned something: x is the
hidden state entering the chosen layer (the word pieces the model reads, [CLS] and [SEP]
included), W_q, W_k, W_v are that head's 32 columns of the layer's 384 -> 384 projections, and the
scale is the model's own 1/sqrt(32). BERT's projections carry a bias, so q = x W_q + b_q.

Shape legend: T = word pieces of the sentence, D = hidden width (384), h = heads (12),
d_k = head width (32). Matrices are drawn as (D, d_k), the x @ W layout of lesson 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch
import torch.nn.functional as F

from core import functional as fn
from core import recipes
from core.examples import LIFE_SENTENCE
from core.head_measures import head_measures
from core.lessons.common import Prediction, clamp_index, dims, generator, matrix_frame, row_values, unique_labels
from core.models import minilm as real_model
from core.registry import LessonSpec
from core.settings import PresetKey, Settings, load_example

# The head each lesson opens on, chosen by its measured pattern on the lesson's default sentence
# (tests/test_pretrained.py re-measures each one and fails if it stops making the lesson's point).
DEFAULT_HEADS: dict[str, tuple[int, int]] = {
    "trainable_weights": (0, 2),  # a previous-piece head: each row's weight lands on one clear key
    "causal_dropout": (1, 8),  # a next-piece head: the causal mask removes the key it looks at most
    "multi_head": (0, 0),  # layer 0: its twelve heads show the most different patterns side by side
    "cross_attention": (1, 1),  # a same-word head: among the words, a piece reads its copy in the other sentence
}


@dataclass(frozen=True)
class RealHead:
    """One head of one layer, as lesson 2 draws its ingredients (all float32 on the CPU).

    x (T, D); w_query, w_key, w_value (D, d_k); b_query, b_key, b_value (d_k,).
    """

    tokens: tuple[str, ...]  # the word pieces, [CLS] and [SEP] included (unique labels for charts)
    layer: int
    head: int
    x: torch.Tensor
    w_query: torch.Tensor
    w_key: torch.Tensor
    w_value: torch.Tensor
    b_query: torch.Tensor
    b_key: torch.Tensor
    b_value: torch.Tensor
    scale: float  # the model's 1/sqrt(d_k)


def check_head(model: real_model.RealModel, layer: int, head: int) -> None:
    """ValueError in plain words for a layer or head the model does not have."""
    config = model.config
    if not 0 <= layer < config.num_layers or not 0 <= head < config.num_heads:
        raise ValueError(
            f"The model has layers 0 to {config.num_layers - 1} and heads 0 to {config.num_heads - 1}; "
            f"layer {layer}, head {head} does not exist."
        )


def hidden_entering(model: real_model.RealModel, sentence: str, layer: int) -> tuple[tuple[str, ...], torch.Tensor]:
    """The word pieces and the hidden states (T, D) entering `layer` (layer 0: the embeddings' output).

    Runs only the layers before `layer` (the later ones cannot change what enters it).
    """
    batch = real_model.tokenize(model, [sentence])
    attn_mask = batch.attention_mask[:, None, None, :]  # (1, 1, 1, T): one sentence, no padding
    with torch.inference_mode():
        x = real_model.embed(model, batch)  # (1, T, D)
        for weights in model.weights.layers[:layer]:
            x, _ = real_model.encoder_layer(model, weights, x, attn_mask)
    return unique_labels(batch.tokens[0]), x[0].clone()  # (T, D)


def head_slice(model: real_model.RealModel, layer: int, head: int) -> tuple[torch.Tensor, ...]:
    """W_q, W_k, W_v (D, d_k) and b_q, b_k, b_v (d_k,) of one head: rows head*d_k .. of each (out, in) matrix."""
    check_head(model, layer, head)
    weights = model.weights.layers[layer]
    d_k = model.config.head_dim
    rows = slice(head * d_k, (head + 1) * d_k)
    matrices = tuple(w[rows].T.clone() for w in (weights.query_weight, weights.key_weight, weights.value_weight))
    biases = tuple(b[rows].clone() for b in (weights.query_bias, weights.key_bias, weights.value_bias))
    return (*matrices, *biases)


def real_head(model: real_model.RealModel, sentence: str, layer: int, head: int) -> RealHead:
    """x, W_q, W_k, W_v, their biases and the scale of (layer, head) for `sentence`."""
    w_q, w_k, w_v, b_q, b_k, b_v = head_slice(model, layer, head)
    tokens, x = hidden_entering(model, sentence, layer)
    return RealHead(tokens, layer, head, x, w_q, w_k, w_v, b_q, b_k, b_v, real_model.scale_factor(model.config))


def head_trace(head: RealHead, x_query: torch.Tensor | None = None) -> fn.AttentionTrace:
    """q = x W_q + b_q (and k, v likewise), then softmax(q kᵀ · scale) v; queries from `x_query` if given."""
    x_q = head.x if x_query is None else x_query
    with torch.no_grad():
        queries = x_q @ head.w_query + head.b_query  # (T_q, d_k)
        keys = head.x @ head.w_key + head.b_key  # (T, d_k)
        values = head.x @ head.w_value + head.b_value  # (T, d_k)
        return fn.scaled_dot_product_attention(queries, keys, values, scale=head.scale)


# ------------------------------------------------------------------ what a head's pattern is
@dataclass(frozen=True)
class HeadPattern:
    """One head's measured pattern on this sentence (real_model_lesson's measures, in words)."""

    layer: int
    head: int
    entropy: float  # nats, averaged over queries
    previous: float  # mean weight on the previous piece
    next: float  # mean weight on the next piece
    sinks: float  # mean weight on [CLS] + [SEP]
    self_weight: float  # mean weight on the query's own piece
    summary: str  # the strongest of those, in words

    @staticmethod
    def of(layer: int, head: int, weights: torch.Tensor) -> HeadPattern:
        """Measure a (T, T) weights matrix (rows sum to 1)."""
        m = head_measures(weights)
        self_weight = float(weights.double().diagonal().mean())
        candidates = {
            "looks at the next piece": float(m.next),
            "looks at the previous piece": float(m.previous),
            "parks its weight on [CLS] and [SEP]": float(m.cls + m.sep),
            "looks at itself": self_weight,
        }
        label, value = max(candidates.items(), key=lambda item: item[1])
        broad = float(m.entropy) / math.log(max(m.num_tokens, 2))
        if value >= 0.3:
            summary = f"{label} ({value:.2f} of each row on average)"
        else:
            summary = f"spreads out (entropy {broad:.2f} of its maximum)"
        return HeadPattern(
            layer, head, float(m.entropy), float(m.previous), float(m.next), float(m.cls + m.sep), self_weight, summary
        )


# ------------------------------------------------------------------ lesson 2
# A (384, 32) matrix is 12,288 cells: as a chart it is noise that takes the browser seconds to draw.
# The page shows its first rows (the Code box has all of it) and says so.
W_ROWS_SHOWN = 12


@dataclass(frozen=True)
class PretrainedTrainableLesson:
    """Lesson 2's steps on a real head (the weights heatmap is the model's own attention)."""

    tokens: tuple[str, ...]
    layer: int
    head: int
    query_index: int
    w_query: pd.DataFrame  # the first W_ROWS_SHOWN of its D rows, (W_ROWS_SHOWN, d_k), as a matrix_frame
    w_key: pd.DataFrame
    w_value: pd.DataFrame
    queries: pd.DataFrame  # (T, d_k)
    keys: pd.DataFrame
    values: pd.DataFrame
    scores: pd.DataFrame  # (T, T) q kᵀ
    scaled_scores: pd.DataFrame
    weights: pd.DataFrame  # (T, T)
    context: pd.DataFrame  # (T, d_k)
    one_query: pd.DataFrame  # token, score, scaled score, weight for the chosen query
    d_in: int
    d_k: int
    d_v: int
    scale: float
    query_vector: tuple[float, ...]
    query_context: tuple[float, ...]
    pattern: HeadPattern
    prediction: Prediction
    code: str  # the filled recipe core/recipes/pretrained_head.py


def _strongest_question(tokens: tuple[str, ...], query: int, row: torch.Tensor, pattern: HeadPattern) -> Prediction:
    """Which piece the query attends to most in this real head, answered by its row of weights."""
    answer = int(row.argmax())
    ranked = row.argsort(descending=True)
    runner_up = int(ranked[1]) if len(ranked) > 1 else answer
    return Prediction(
        question=(
            f"In layer {pattern.layer}, head {pattern.head}, which word piece will “{tokens[query]}” attend to most?"
        ),
        options=tokens,
        answer=answer,
        explanation=(
            f"“{tokens[answer]}” gets {float(row[answer]):.4f} of the weight, the next largest "
            f"(“{tokens[runner_up]}”) {float(row[runner_up]):.4f}. Over the whole sentence this head "
            f"{pattern.summary}: its W_q and W_k learned to make those scores stand out."
        ),
    )


def pretrained_trainable_lesson(
    model: real_model.RealModel, sentence: str, layer: int, head: int, query_index: int
) -> PretrainedTrainableLesson:
    """Lesson 2 on (layer, head) of the real model, for `sentence`."""
    real = real_head(model, sentence, layer, head)
    tokens = real.tokens
    query_index = clamp_index(query_index, len(tokens))
    trace = head_trace(real)
    d_in, d_k = real.w_query.shape
    pattern = HeadPattern.of(layer, head, trace.weights)
    return PretrainedTrainableLesson(
        tokens=tokens,
        layer=layer,
        head=head,
        query_index=query_index,
        w_query=matrix_frame(real.w_query[:W_ROWS_SHOWN], dims("in", W_ROWS_SHOWN), dims("out", d_k)),
        w_key=matrix_frame(real.w_key[:W_ROWS_SHOWN], dims("in", W_ROWS_SHOWN), dims("out", d_k)),
        w_value=matrix_frame(real.w_value[:W_ROWS_SHOWN], dims("in", W_ROWS_SHOWN), dims("out", d_k)),
        queries=matrix_frame(trace.queries, tokens, dims("q", d_k)),
        keys=matrix_frame(trace.keys, tokens, dims("k", d_k)),
        values=matrix_frame(trace.values, tokens, dims("v", d_k)),
        scores=matrix_frame(trace.scores, tokens, tokens),
        scaled_scores=matrix_frame(trace.scaled_scores, tokens, tokens),
        weights=matrix_frame(trace.weights, tokens, tokens),
        context=matrix_frame(trace.context, tokens, dims("z", d_k)),
        one_query=pd.DataFrame(
            {
                "token": tokens,
                "score": trace.scores[query_index].numpy(),
                "scaled score": trace.scaled_scores[query_index].numpy(),
                "weight": trace.weights[query_index].numpy(),
            }
        ),
        d_in=d_in,
        d_k=d_k,
        d_v=d_k,
        scale=real.scale,
        query_vector=row_values(trace.queries, query_index),
        query_context=row_values(trace.context, query_index),
        pattern=pattern,
        prediction=_strongest_question(tokens, query_index, trace.weights[query_index], pattern),
        code=recipes.fill("pretrained_head", {"sentence": sentence, "layer": layer, "head": head}),
    )


# ------------------------------------------------------------------ lesson 4
@dataclass(frozen=True)
class PretrainedCausalLesson:
    """Lesson 4 on a real head: the causal mask before the softmax, what it changes, dropout."""

    tokens: tuple[str, ...]
    layer: int
    head: int
    unmasked: pd.DataFrame  # (T, T) the head as the model runs it (it sees the whole sentence)
    masked: pd.DataFrame  # (T, T) -inf above the diagonal, then softmax
    renormalised: pd.DataFrame  # (T, T) softmax, zero the future, renormalise: the same numbers
    max_method_difference: float
    rows: pd.DataFrame  # per query: weight it had on the future, its strongest key before and after
    future_mass: float  # mean over rows of the weight the unmasked head put on later pieces
    rows_changed: int  # rows whose strongest key the mask changed
    dropped: pd.DataFrame  # the masked weights after dropout (unchanged in evaluation mode)
    training: bool
    dropout: float
    kept_fraction: float | None
    pattern: HeadPattern
    prediction: Prediction
    code: str  # the filled recipe core/recipes/pretrained_causal.py


def _future_question(tokens: tuple[str, ...], rows: pd.DataFrame, future_mass: float) -> Prediction:
    """How many rows the causal mask sends to another strongest key, answered from the rows table."""
    changed = int((rows["strongest before"] != rows["strongest after"]).sum())
    total = len(tokens)
    buckets = ("None of them", "Fewer than half", "Half or more")
    answer = 0 if changed == 0 else (1 if changed < total / 2 else 2)
    return Prediction(
        question=(
            f"This head was trained to see the whole sentence. Mask the future: of its {total} rows, how many will "
            "get a different strongest key?"
        ),
        options=buckets,
        answer=answer,
        explanation=(
            f"{changed} of {total} rows changed their strongest key. Unmasked, the head put {future_mass:.2f} of an "
            "average row's weight on later pieces; the mask takes that away and the softmax hands it to the "
            "pieces that remain."
        ),
    )


def pretrained_causal_lesson(
    model: real_model.RealModel, sentence: str, layer: int, head: int, training: bool, dropout: float, seed: int
) -> PretrainedCausalLesson:
    """Lesson 4 on (layer, head): mask the real head's scaled scores, compare, then dropout."""
    real = real_head(model, sentence, layer, head)
    tokens = real.tokens
    scaled = head_trace(real).scaled_scores  # (T, T)
    with torch.no_grad():
        unmasked = torch.softmax(scaled, dim=-1)
        masked = fn.mask_before_softmax(scaled)
        renormalised = fn.mask_after_softmax(scaled).renormalised
        if training and dropout > 0:
            dropped, keep = fn.dropout_with_generator(masked, dropout, generator(seed, masked.device))
        else:
            dropped, keep = masked, None
    future = unmasked.triu(diagonal=1).sum(dim=-1)  # (T,): weight each row had on later pieces
    before, after = unmasked.argmax(dim=-1), masked.argmax(dim=-1)
    rows = pd.DataFrame(
        {
            "query": tokens,
            "weight on later pieces": future.double().numpy(),
            "strongest before": [tokens[i] for i in before.tolist()],
            "strongest after": [tokens[i] for i in after.tolist()],
        }
    )
    future_mass = float(future.mean())
    return PretrainedCausalLesson(
        tokens=tokens,
        layer=layer,
        head=head,
        unmasked=matrix_frame(unmasked, tokens, tokens),
        masked=matrix_frame(masked, tokens, tokens),
        renormalised=matrix_frame(renormalised, tokens, tokens),
        max_method_difference=float((masked - renormalised).abs().max()),
        rows=rows,
        future_mass=future_mass,
        rows_changed=int((before != after).sum()),
        dropped=matrix_frame(dropped, tokens, tokens),
        training=training,
        dropout=dropout,
        kept_fraction=None if keep is None else float(keep.float().mean()),
        pattern=HeadPattern.of(layer, head, unmasked),
        prediction=_future_question(tokens, rows, future_mass),
        code=recipes.fill(
            "pretrained_causal",
            {
                "sentence": sentence,
                "layer": layer,
                "head": head,
                "dropout": dropout,
                "training": training,
                "seed": seed,
            },
        ),
    )


# ------------------------------------------------------------------ lesson 5
@dataclass(frozen=True)
class PretrainedMultiHeadLesson:
    """Lesson 5 on a real layer: its twelve heads, the wrapper and the one-split form, equal."""

    tokens: tuple[str, ...]
    layer: int
    heads: pd.DataFrame  # head, row, col, value, row_index, col_index: (h, T, T) in one long table
    patterns: tuple[HeadPattern, ...]  # one per head, in head order
    patterns_table: pd.DataFrame  # head, pattern, entropy, previous, next, [CLS]+[SEP], self
    wrapper_vs_split: float  # max |wrapper - split| of the layer's attention output (T, D)
    split_vs_model: float  # max |split form - the model's forward pass| of that output
    distinct_patterns: int  # how many different summaries the twelve heads have
    shapes: tuple[tuple[str, tuple[int, ...]], ...]  # (step, shape) of the split form
    num_heads: int
    d_model: int
    head_dim: int
    prediction: Prediction
    code: str  # the filled recipe core/recipes/pretrained_multi_head.py


def wrapper_form(model: real_model.RealModel, x: torch.Tensor, layer: int) -> torch.Tensor:
    """Twelve separate heads, each its own 384 -> 32 projections, contexts concatenated, then the output
    projection: (T, D) -> (T, D)."""
    weights = model.weights.layers[layer]
    contexts = []
    for head in range(model.config.num_heads):
        w_q, w_k, w_v, b_q, b_k, b_v = head_slice(model, layer, head)
        one = RealHead((), layer, head, x, w_q, w_k, w_v, b_q, b_k, b_v, real_model.scale_factor(model.config))
        contexts.append(head_trace(one).context)  # (T, d_k)
    concatenated = torch.cat(contexts, dim=-1)  # (T, h * d_k) = (T, D)
    return F.linear(concatenated, weights.out_proj_weight, weights.out_proj_bias)


def split_form(model: real_model.RealModel, x: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One 384 -> 384 projection each for q, k, v, split into 12 heads of 32: (output (T, D), weights (h, T, T))."""
    weights = model.weights.layers[layer]
    num_tokens, d_model = x.shape
    heads, d_k = model.config.num_heads, model.config.head_dim
    with torch.no_grad():
        q = F.linear(x, weights.query_weight, weights.query_bias).view(num_tokens, heads, d_k).transpose(0, 1)
        k = F.linear(x, weights.key_weight, weights.key_bias).view(num_tokens, heads, d_k).transpose(0, 1)
        v = F.linear(x, weights.value_weight, weights.value_bias).view(num_tokens, heads, d_k).transpose(0, 1)
        # q, k, v: (T, D) -> (T, h, d_k) -> (h, T, d_k)
        trace = fn.scaled_dot_product_attention(q, k, v)  # scale None -> 1/sqrt(d_k), the model's own
        context = trace.context.transpose(0, 1).reshape(num_tokens, d_model)  # (h, T, d_k) -> (T, h * d_k)
        return F.linear(context, weights.out_proj_weight, weights.out_proj_bias), trace.weights


def _heads_question(patterns: tuple[HeadPattern, ...]) -> Prediction:
    """Do the twelve real heads of this layer look alike? Answered by their measured summaries."""
    kinds = {p.summary.split(" (")[0] for p in patterns}
    options = ("Yes: trained heads all learn the same pattern", "No: the heads show different patterns")
    return Prediction(
        question=f"These are the {len(patterns)} heads of one trained layer. Will they look alike?",
        options=options,
        answer=0 if len(kinds) == 1 else 1,
        explanation=(
            f"Measured on this sentence, the heads fall into {len(kinds)} kind(s) of pattern: "
            + "; ".join(sorted(kinds))
            + ". Each head has its own W_q and W_k, and training pushed them apart because different heads "
            "are useful for different things."
        ),
    )


def pretrained_multihead_lesson(model: real_model.RealModel, sentence: str, layer: int) -> PretrainedMultiHeadLesson:
    """Lesson 5 on the twelve heads of `layer` for `sentence`."""
    check_head(model, layer, 0)
    tokens, x = hidden_entering(model, sentence, layer)  # x: (T, D) entering the layer
    with torch.no_grad():
        wrapper = wrapper_form(model, x, layer)
        split, weights = split_form(model, x, layer)  # weights (h, T, T)
        attn_mask = torch.ones(1, 1, 1, len(tokens), dtype=torch.bool)
        model_output, _ = real_model.self_attention(model.weights.layers[layer], x[None], attn_mask, weights.shape[0])
    heads, d_k, d_model = model.config.num_heads, model.config.head_dim, model.config.hidden_size
    patterns = tuple(HeadPattern.of(layer, h, weights[h]) for h in range(heads))
    frames = []
    for h in range(heads):
        frame = matrix_frame(weights[h], tokens, tokens)
        frame.insert(0, "head", h)
        frames.append(frame)
    num_tokens = len(tokens)
    return PretrainedMultiHeadLesson(
        tokens=tokens,
        layer=layer,
        heads=pd.concat(frames, ignore_index=True),
        patterns=patterns,
        patterns_table=pd.DataFrame(
            {
                "head": [p.head for p in patterns],
                "pattern": [p.summary for p in patterns],
                "entropy (nats)": [p.entropy for p in patterns],
                "previous": [p.previous for p in patterns],
                "next": [p.next for p in patterns],
                "[CLS] + [SEP]": [p.sinks for p in patterns],
                "itself": [p.self_weight for p in patterns],
            }
        ),
        wrapper_vs_split=float((wrapper - split).abs().max()),
        split_vs_model=float((split - model_output[0]).abs().max()),
        distinct_patterns=len({p.summary.split(" (")[0] for p in patterns}),
        shapes=(
            ("x entering the layer", (num_tokens, d_model)),
            ("queries = x W_q + b_q (one 384 → 384 projection)", (num_tokens, d_model)),
            ("split: .view(T, 12, 32)", (num_tokens, heads, d_k)),
            ("heads first: .transpose(0, 1)", (heads, num_tokens, d_k)),
            ("weights = softmax(q kᵀ / √32)", (heads, num_tokens, num_tokens)),
            ("context = weights @ v", (heads, num_tokens, d_k)),
            ("heads back together: .transpose(0, 1).reshape(T, 384)", (num_tokens, d_model)),
            ("attention.output.dense (384 → 384)", (num_tokens, d_model)),
        ),
        num_heads=heads,
        d_model=d_model,
        head_dim=d_k,
        prediction=_heads_question(patterns),
        code=recipes.fill("pretrained_multi_head", {"sentence": sentence, "layer": layer}),
    )


# ------------------------------------------------------------------ lesson 7
@dataclass(frozen=True)
class SentencePair:
    key: str
    label: str
    first: str  # the queries' sentence
    second: str  # the keys' and values' sentence


PAIRS: tuple[SentencePair, ...] = (
    SentencePair(
        "paraphrase",
        "A sentence and its paraphrase",
        "The young boy kicked the red ball across the park.",
        "In the park, a child kicked a ball that was red.",
    ),
    SentencePair(
        "question",
        "A question and the sentence that answers it",
        "Where did the cat sleep last night?",
        "Last night the cat slept on the warm kitchen floor.",
    ),
)


@dataclass(frozen=True)
class PretrainedCrossLesson:
    """Lesson 7 through a real head: queries from one sentence, keys and values from another."""

    tokens: tuple[str, ...]  # the first sentence's pieces (queries)
    second_tokens: tuple[str, ...]  # the second's (keys, values)
    layer: int
    head: int
    weights: pd.DataFrame  # (T1, T2)
    output: pd.DataFrame  # (T1, d_k)
    strongest: pd.DataFrame  # per query piece: the key piece it weights most, and that weight
    special_share: float  # mean weight of a row on the second sentence's [CLS] and [SEP]
    copy_share: float  # mean share of a shared word's weight on words (not [CLS]/[SEP]) that goes to its copy
    copies_found: int  # shared words whose strongest word key is their copy
    shared_words: int  # content word pieces that occur in both sentences
    shapes: tuple[tuple[str, tuple[int, ...]], ...]
    prediction: Prediction
    code: str  # the filled recipe core/recipes/pretrained_cross.py


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


def _cross_question(
    tokens: tuple[str, ...], second: tuple[str, ...], weights: torch.Tensor, pairs: list[tuple[int, list[int]]]
) -> Prediction:
    """Apart from [CLS] and [SEP], which piece of the second sentence does one word of the first read most?

    The word asked about is the first content piece that also occurs in the second sentence (else the
    first word); the options are the second sentence's word pieces, the answer the largest of its weights.
    """
    query = pairs[0][0] if pairs else 1
    words = tuple(range(1, len(second) - 1))  # the second sentence's pieces without [CLS] and [SEP]
    row = weights[query]
    best = max(words, key=lambda j: float(row[j]))
    special = float(row[0] + row[-1])
    return Prediction(
        question=(f"Apart from [CLS] and [SEP], which piece of the second sentence will “{tokens[query]}” read most?"),
        options=tuple(second[j] for j in words),
        answer=words.index(best),
        explanation=(
            f"“{second[best]}” gets {float(row[best]):.4f} of the weight, the most of any word; [CLS] and [SEP] "
            f"together take {special:.4f}, as they do in this head's self-attention. The query comes from the "
            "first sentence and the keys from the second, though the head was trained on one sentence at a time."
        ),
    )


def pretrained_cross_lesson(
    model: real_model.RealModel, first: str, second: str, layer: int, head: int
) -> PretrainedCrossLesson:
    """Cross-attention through (layer, head): each sentence runs through the model alone up to `layer`."""
    w_q, w_k, w_v, b_q, b_k, b_v = head_slice(model, layer, head)
    tokens, x_first = hidden_entering(model, first, layer)  # (T1, D)
    second_tokens, x_second = hidden_entering(model, second, layer)  # (T2, D)
    kv_head = RealHead(
        second_tokens, layer, head, x_second, w_q, w_k, w_v, b_q, b_k, b_v, real_model.scale_factor(model.config)
    )
    trace = head_trace(kv_head, x_query=x_first)  # weights (T1, T2)
    weights = trace.weights
    best = weights.argmax(dim=-1)
    on_words = weights[:, 1:-1]  # (T1, T2 - 2): the second sentence's word pieces only
    best_word = on_words.argmax(dim=-1) + 1
    pairs = shared_word_pairs(tokens, second_tokens)
    shares = [float(weights[i, copies].sum() / on_words[i].sum()) for i, copies in pairs]
    found = sum(int(best_word[i]) in copies for i, copies in pairs)
    d_k = w_q.shape[1]
    return PretrainedCrossLesson(
        tokens=tokens,
        second_tokens=second_tokens,
        layer=layer,
        head=head,
        weights=matrix_frame(weights, tokens, second_tokens),
        output=matrix_frame(trace.context, tokens, dims("z", d_k)),
        strongest=pd.DataFrame(
            {
                "query": tokens,
                "reads most": [second_tokens[j] for j in best.tolist()],
                "weight": weights.max(dim=-1).values.double().numpy(),
                "reads most among words": [second_tokens[j] for j in best_word.tolist()],
                "its weight": weights.gather(1, best_word[:, None])[:, 0].double().numpy(),
            }
        ),
        special_share=float((weights[:, 0] + weights[:, -1]).mean()),
        copy_share=sum(shares) / len(shares) if shares else 0.0,
        copies_found=found,
        shared_words=len(pairs),
        shapes=(
            ("x₁ (first sentence, entering the layer)", tuple(x_first.shape)),
            ("x₂ (second sentence, entering the layer)", tuple(x_second.shape)),
            ("queries = x₁ W_q + b_q", (len(tokens), d_k)),
            ("keys = x₂ W_k + b_k, values = x₂ W_v + b_v", (len(second_tokens), d_k)),
            ("weights", (len(tokens), len(second_tokens))),
            ("context", (len(tokens), d_k)),
        ),
        prediction=_cross_question(tokens, second_tokens, weights, pairs),
        code=recipes.fill(
            "pretrained_cross", {"first_sentence": first, "second_sentence": second, "layer": layer, "head": head}
        ),
    )


def lesson_sentence(settings: Settings) -> str:
    """The sentence a pretrained lesson reads: the sidebar's own sentence, or the preset's as words."""
    if settings.preset == PresetKey.CUSTOM:
        return settings.text
    if settings.preset == PresetKey.ARTICLE:
        return LIFE_SENTENCE  # with its comma, as the article writes it
    return " ".join(load_example(settings).tokens)


def default_query(settings: Settings, num_tokens: int) -> int:
    """The preset's query token, one place later: [CLS] comes first among the word pieces."""
    return clamp_index(settings.preset_info.query_index + 1, num_tokens)


BOOK_SENTENCE = "Your journey starts with one step"


def usable_sentence(model: real_model.RealModel, sentence: str) -> tuple[str, tuple[str, ...], str | None]:
    """(the sentence to show, its word pieces as labelled, why the asked one could not be used or None).

    A sentence the model cannot take (no words, over MAX_WORD_PIECES pieces) gives way to the book's.
    """
    try:
        return sentence, unique_labels(real_model.tokenize(model, [sentence]).tokens[0]), None
    except real_model.SentenceError as error:
        pieces = unique_labels(real_model.tokenize(model, [BOOK_SENTENCE]).tokens[0])
        return BOOK_SENTENCE, pieces, f"{error} Showing the book's sentence instead."


# ------------------------------------------------------------------ what the pages cache (ui/cache.py `computed`)
# The model is the process's one shared encoder: the leading underscore keeps it out of st.cache_data's
# key. Entries: a byte budget over the largest result at the 64-piece cap (pickled ~1.1, 0.9, 3.1 and
# 0.3 MiB); tests/app/test_pretrained_app.py measures them against PRETRAINED_BUDGET_MIB.
PRETRAINED_BUDGET_MIB = 80


def _trainable(_model: real_model.RealModel, sentence: str, layer: int, head: int, query: int):
    return pretrained_trainable_lesson(_model, sentence, layer, head, query)


def _causal(_model: real_model.RealModel, sentence: str, layer: int, head: int, training: bool, p: float, seed: int):
    return pretrained_causal_lesson(_model, sentence, layer, head, training, p, seed)


def _multihead(_model: real_model.RealModel, sentence: str, layer: int):
    return pretrained_multihead_lesson(_model, sentence, layer)


def _cross(_model: real_model.RealModel, first: str, second: str, layer: int, head: int):
    return pretrained_cross_lesson(_model, first, second, layer, head)


def _usable_sentence(_model: real_model.RealModel, sentence: str):
    return usable_sentence(_model, sentence)


TRAINABLE = LessonSpec(_trainable, uses=None, max_entries=16)
CAUSAL = LessonSpec(_causal, uses=None, max_entries=16)
MULTIHEAD = LessonSpec(_multihead, uses=None, max_entries=8)
CROSS = LessonSpec(_cross, uses=None, max_entries=32)
SENTENCE = LessonSpec(_usable_sentence, uses=None, max_entries=256)  # a sentence's word pieces: ~1 kB each
