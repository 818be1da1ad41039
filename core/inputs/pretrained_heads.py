"""The ENCODER weight source: one head of all-MiniLM-L6-v2 taken apart into a `HeadInput`
(core/inputs/weights.py), its measured pattern, and a layer's twelve heads run both ways.

The computation behind the pretrained mode of lessons 2, 4, 5 and 7 (core/lessons/pretrained.py,
core/lessons/pretrained_cross.py): the hidden state entering a layer, one head's slice of the layer's
projections, that head's attention, and the layer's twelve heads run both ways (separate heads, one split
projection).

Shape legend: T = word pieces of the sentence, D = hidden width (384), h = heads (12),
d_k = head width (32). Matrices are drawn as (D, d_k), the x @ W layout of lesson 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from core.attention import functional as fn
from core.attention.head_measures import head_measures, row_entropy
from core.inputs.examples import unique_labels
from core.inputs.weights import MODELS, HeadInput, ModelShape, Provenance, WeightSource, head_trace
from core.models import minilm as real_model


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


def head_input(
    model: real_model.RealModel, tokens: tuple[str, ...], x: torch.Tensor, layer: int, head: int
) -> HeadInput:
    """The weight source's ingredients for (layer, head) reading `x` (T, D), whose pieces are `tokens`."""
    w_q, w_k, w_v, b_q, b_k, b_v = head_slice(model, layer, head)
    provenance = Provenance(MODELS[WeightSource.ENCODER].name, layer, head)
    return HeadInput(tokens, x, w_q, w_k, w_v, b_q, b_k, b_v, real_model.scale_factor(model.config), provenance)


def real_head(model: real_model.RealModel, sentence: str, layer: int, head: int) -> HeadInput:
    """x, W_q, W_k, W_v, their biases and the scale of (layer, head) for `sentence`: the ENCODER source."""
    check_head(model, layer, head)
    tokens, x = hidden_entering(model, sentence, layer)
    return head_input(model, tokens, x, layer, head)


# ------------------------------------------------------------------ what a head's pattern is
SHARE = 0.3  # mean weight per row: a head is named by the strongest measure at or above this
CHANCE = 1.5  # ... and this many times what a head spreading evenly would put there (`_above_chance`)
MOST = 0.5  # ...and said to "park" on [CLS] and [SEP] only when more than half of each row lands there


def parks_most(share: float) -> bool:
    """More than half, read off the printed figure: 0.5047 prints as 0.50, which is not more than half (s24)."""
    return float(f"{share:.2f}") > MOST


def _even_share(num_tokens: int, causal: bool) -> float:
    """The mean weight an evenly spreading head puts on one key of each row: 1/T, or in a decoder (query i sees
    i + 1 keys) the mean of 1/(i + 1) over the rows after the first, as the decoder's measures are taken."""
    if not causal or num_tokens < 2:
        return 1 / max(num_tokens, 1)
    return sum(1 / (i + 1) for i in range(1, num_tokens)) / (num_tokens - 1)


def _above_chance(even: float) -> float:
    """The least share that is a pattern, not chance: CHANCE times the even head's, or halfway from it to 1 where
    that is lower (on three pieces [CLS] and [SEP] get 2/3 of an even head's weight: 1.5 times is past 1)."""
    return min(CHANCE * even, (1 + even) / 2)


@dataclass(frozen=True)
class HeadPattern:
    """One head's measured pattern on this sentence (real_model_lesson's measures, in words)."""

    layer: int
    head: int
    entropy: float  # nats, averaged over queries
    previous: float  # mean weight on the previous piece
    next: float  # mean weight on the next piece
    sinks: float  # mean weight on the model's sink: [CLS] + [SEP] (encoder), the first token (decoder)
    self_weight: float  # mean weight on the query's own piece
    summary: str  # the strongest of those, in words

    @staticmethod
    def of(layer: int, head: int, weights: torch.Tensor, shape: ModelShape | None = None) -> HeadPattern:
        """Measure a (T, T) weights matrix (rows sum to 1) of a head of `shape`'s model (default: the encoder).

        The sink is where the model parks spare weight: [CLS] and [SEP] in the encoder, the first token in
        a decoder (whose first token is the only key every query can see).
        """
        shape = shape or MODELS[WeightSource.ENCODER]
        m = head_measures(weights)
        self_weight = float(weights.double().diagonal().mean())
        sinks = float(m.cls + m.sep) if len(shape.sink_positions) == 2 else float(m.cls)
        if shape.causal and weights.shape[0] > 1:
            # A decoder's query 0 sees only itself, the first token: its row is 1 there whatever the head does.
            # Measured over the queries that have a choice (1..T-1), as lesson 10's sink share is
            # (decoder_measures.sink_share): one definition for both lessons.
            sinks = float(weights[1:, 0].double().mean())
            self_weight = float(weights.double().diagonal()[1:].mean())
        # "Parks its weight" only where most of it lands there; 0.3-0.5 is a large share, not the weight.
        # Each measure beside what a head spreading evenly over the keys it sees would score: on a short sentence a
        # decoder's even head already puts 0.29 on itself (query i sees i + 1 keys), and "looks at itself (0.32)"
        # named chance as a pattern (the s20 review). A measure names a head only well above it.
        one, sink_count = _even_share(weights.shape[0], shape.causal), len(shape.sink_positions)
        candidates = {
            "looks at the next piece": (float(m.next), one),
            "looks at the previous piece": (float(m.previous), one),
            # "Most" is read off the printed figure: 0.5047 prints as 0.50, which is not more than half (s24 review).
            ("parks most of its weight on " if parks_most(sinks) else "puts a large share on ") + shape.sink: (
                sinks,
                one * sink_count,  # [CLS] and [SEP] are two keys
            ),
            "looks at itself": (self_weight, one),
        }
        named = {k: value for k, (value, even) in candidates.items() if value >= max(SHARE, _above_chance(even))}
        entropy, broad = _entropy_and_share_of_maximum(weights, shape.causal)
        if named:
            (label, value), *others = sorted(named.items(), key=lambda item: item[1], reverse=True)
            # A decoder's measures leave out query 0 (above): say so, or 0.83 read as the mean of every row, whose
            # first is 1 (0.86 over all six of the book's sentence, an independent review).
            rows = _rows_measured(label, causal=shape.causal and weights.shape[0] > 1)
            summary = f"{label} ({value:.2f} of {rows} on average)"
            if others:
                # A second clear pattern is named too: a head at 0.50 on [CLS] and [SEP] whose map is a next-piece
                # diagonal (0.33) was described by its sink alone (the s24 review).
                # Never "most" twice: the measures overlap (the last word's next piece is [SEP]).
                second = others[0][0].replace("parks most of its weight on ", "puts a large share on ")
                summary += f", and {second} ({others[0][1]:.2f})"
        else:
            summary = f"spreads out (entropy {broad:.2f} of its maximum)"
        return HeadPattern(layer, head, entropy, float(m.previous), float(m.next), sinks, self_weight, summary)


def _rows_measured(label: str, *, causal: bool) -> str:
    """The rows a pattern's mean is taken over, in words: the next piece is measured on every row but the last
    (which has none), the previous on every row after the first; a decoder leaves out query 0 throughout. Said,
    because lesson 4 set "the next piece (0.54 of each row)" beside "0.49 of an average row on later pieces",
    a mean over all rows, and a student read a contradiction (the s26b review)."""
    if label.endswith("next piece"):
        return "each row but the last"
    if causal or label.endswith("previous piece"):
        return "each row after the first"
    return "each row"


def _entropy_and_share_of_maximum(weights: torch.Tensor, causal: bool) -> tuple[float, float]:
    """A head's mean entropy in nats, and the mean of each row's entropy over the most it could be.

    An encoder's row spreads over all T keys (at most log T). A decoder's query i sees i + 1 keys (at most
    log(i + 1)), and query 0, which sees only itself, is left out as the other decoder measures leave it out:
    dividing by log T called a peaked decoder head "spreads out 0.41" (the s23 review).
    """
    num_tokens = weights.shape[-1]
    rows = row_entropy(weights)  # (T,)
    if not causal or num_tokens < 2:
        entropy = float(rows.mean())
        return entropy, entropy / math.log(max(num_tokens, 2))
    most = torch.log(torch.arange(2, num_tokens + 1, dtype=torch.float64))  # (T - 1,): log(i + 1) for i >= 1
    return float(rows[1:].mean()), float((rows[1:] / most).mean())


def wrapper_form(model: real_model.RealModel, x: torch.Tensor, layer: int) -> torch.Tensor:
    """Twelve separate heads, each its own 384 -> 32 projections, contexts concatenated, then the output
    projection: (T, D) -> (T, D)."""
    weights = model.weights.layers[layer]
    contexts = []
    for head in range(model.config.num_heads):
        contexts.append(head_trace(head_input(model, (), x, layer, head)).context)  # (T, d_k)
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
