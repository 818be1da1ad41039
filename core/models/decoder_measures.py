"""What the decoder's heads do, measured from a forward pass: sink, previous-token, induction and copying
scores, the loss on a repeated sequence, head ablation, and RoPE's offset invariance.

Every score is per head, an (L, H) tensor. Scores other than the sink's leave the first token out
as a key: most heads park a large share of their attention on token 0 (the attention sink), which
would swamp any other pattern. "Leaving it out" means: drop key 0 from each query's row and
renormalise the rest to sum to 1 (`without_sink`), then measure.

Shape legend as in core.models.smollm2: L layers, H query heads, T tokens.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from core.models import attribution
from core.models.smollm2 import (
    Ablation,
    AblationMode,
    AttentionPath,
    DecoderConfig,
    SmolLM2,
    forward,
    head_results,
    layer_pass,
    linear_rows,
    rms_norm,
    rope_angles,
    rotate_pairs,
)

FIRST_ORDINARY_TOKEN = 17  # ids 0-16 are special tokens (<|endoftext|>, <|im_start|>, ...): never drawn


def sink_share(attentions: torch.Tensor) -> torch.Tensor:
    """Mean weight on token 0 over queries 1..T-1 (query 0 sees only token 0): (L, H, T, T) -> (L, H)."""
    return attentions[..., 1:, 0].mean(dim=-1)


def without_sink(attentions: torch.Tensor) -> torch.Tensor:
    """Each row with key 0 dropped and the rest renormalised: (..., T, T) -> (..., T, T - 1).

    Query 0 has nothing left (its row was all on key 0): its row becomes zeros.
    """
    rest = attentions[..., 1:]  # (..., T, T - 1): keys 1..T-1
    return rest / rest.sum(dim=-1, keepdim=True).clamp(min=1e-12)


def previous_token_score(attentions: torch.Tensor) -> torch.Tensor:
    """Mean renormalised weight (key 0 left out) each query puts on the token just before it.

    Queries 2..T-1 (query 1's previous token is token 0, left out): (L, H, T, T) -> (L, H).
    """
    rest = without_sink(attentions)  # (L, H, T, T - 1): column c is key c + 1
    tokens = attentions.shape[-1]
    queries = torch.arange(2, tokens)
    return rest[..., queries, queries - 2].mean(dim=-1)  # key i - 1 sits in column i - 2


def random_repeated_tokens(length: int, generator: torch.Generator, vocab_size: int) -> torch.Tensor:
    """`length` random ordinary tokens, then the same tokens again: (2 * length,)."""
    first = torch.randint(FIRST_ORDINARY_TOKEN, vocab_size, (length,), generator=generator)
    return torch.cat((first, first))


def induction_score(attentions: torch.Tensor, length: int) -> torch.Tensor:
    """Attention from each token of the second copy to the token after its first occurrence, as
    Olsson et al. (2022) define the prefix-matching score: the raw weight, nothing left out.

    For the token at position length + i (a repeat of position i), the induction target is
    position i + 1; mean over i = 0..length-2 of the weight on it. The last token's target would be
    position `length` itself, the copy's start, so it is left out. (L, H, 2 * length, 2 * length) -> (L, H).
    Raw, not renormalised without the first token: a head that parks 0.9999 of each row on the sink
    scored 0.77 renormalised (sixth of 270) while it moved 0.0001 of the weight, and switching it off
    changed the loss by 0.02 (issue 41).
    """
    offsets = torch.arange(0, length - 1)
    queries, targets = length + offsets, offsets + 1
    return attentions[..., queries, targets].mean(dim=-1)


def average_embedding(embeddings: torch.Tensor, rows: int = 8192) -> torch.Tensor:
    """The mean of the vocabulary's embeddings (V, D) -> (D,), float32, a block of rows at a time (the whole
    matrix in float32 would be 113 MB on a bfloat16 model)."""
    total = sum(embeddings[start : start + rows].float().sum(dim=0) for start in range(0, embeddings.shape[0], rows))
    return torch.as_tensor(total) / embeddings.shape[0]


def copying_effects(
    model: SmolLM2, traced: attribution.ResidualTrace, attentions: torch.Tensor, length: int
) -> torch.Tensor:
    """Does each head write the token it reads? (L, H, P) logits, one per query of the second copy.

    For query p (the same P = length - 1 queries as `induction_score`), the token a head reads is the one at
    its most-attended key, the first token left out (the sink holds no token worth copying). The head's
    output at p, through the final RMSNorm with its scale frozen at the real residual's (as
    `attribution.direct_attribution` does), raises that token's logit by some amount and the average token's
    by another: the difference is the effect. Positive: the head copies what it attends to, through its
    value and output matrices (its OV circuit), as Olsson et al. (2022) ask of an induction head; their own
    copying score reads the OV matrix's eigenvalues instead, over every token, not this sequence's.
    attentions (L, H, T, T) of the same sequence; traced with `by_heads=True` (each head's own output).
    """
    device = traced.residual.device
    queries = torch.arange(length, 2 * length - 1, device=device)  # (P,)
    read = attentions.to(device)[..., queries, 1:].argmax(dim=-1) + 1  # (L, H, P): most-attended key, not the sink
    read_tokens = traced.token_ids.to(device)[read]  # (L, H, P)
    embeddings = model.weights.embeddings
    average = average_embedding(embeddings)  # (D,)
    residual = traced.residual[queries].float()  # (P, D)
    scale = torch.rsqrt(residual.pow(2).mean(dim=-1) + model.config.rms_norm_eps)  # (P,): the norm's, frozen
    gain = model.weights.final_norm.float()  # (D,)
    effects = []
    for index, layer in enumerate(model.weights.layers):
        outputs = traced.heads_out[index][:, queries].transpose(0, 1)  # (H, T, d) -> (H, P, d) -> (P, H, d)
        written = head_results(layer, outputs) * gain  # (P, H, D): what each head adds, as the norm weighs it
        heads, positions = read_tokens[index].shape
        directions = embeddings[read_tokens[index].flatten()].float().view(heads, positions, -1) - average  # (H, P, D)
        effects.append(torch.einsum("phd,hpd->hp", written, directions) * scale)  # (H, P)
    return torch.stack(effects)  # (L, H, P)


@dataclass(frozen=True)
class CopyLoss:
    """Next-token loss (nats) and accuracy on the first copy against the second copy.

    Both over the same number of predictions: positions 1..length-1 of each copy, each predicted
    from what comes before it (the first token of each copy cannot be known from before it).
    """

    first_loss: float
    second_loss: float
    first_accuracy: float
    second_accuracy: float


def copy_loss(logits: torch.Tensor, token_ids: torch.Tensor, length: int) -> CopyLoss:
    """logits (2 * length, V) of a sequence made of `length` tokens repeated twice."""
    predicted = logits[:-1]  # (2 * length - 1, V): position p predicts token p + 1
    targets = token_ids[1:].to(logits.device)  # (2 * length - 1,)
    losses = F.cross_entropy(predicted.float(), targets, reduction="none")
    correct = (predicted.argmax(dim=-1) == targets).float()
    first, second = slice(0, length - 1), slice(length, 2 * length - 1)  # targets 1..n-1 and n+1..2n-1
    return CopyLoss(
        first_loss=float(losses[first].mean()),
        second_loss=float(losses[second].mean()),
        first_accuracy=float(correct[first].mean()),
        second_accuracy=float(correct[second].mean()),
    )


@dataclass(frozen=True)
class InductionReport:
    token_ids: torch.Tensor  # (2 * length,)
    scores: torch.Tensor  # (L, H) induction scores
    sink: torch.Tensor  # (L, H) sink shares on this sequence
    loss: CopyLoss
    copying: torch.Tensor  # (L, H) copying scores: mean logit effect on the token each head reads (`copying_effects`)
    previous: torch.Tensor  # (L, H) previous-token scores on this sequence (key 0 left out)

    def top_heads(self, count: int = 5) -> list[tuple[int, int, float]]:
        """(layer, head, score) of the `count` highest induction scores, highest first."""
        heads = self.scores.shape[1]
        values, flat = self.scores.flatten().topk(count)
        return [(int(i) // heads, int(i) % heads, float(v)) for v, i in zip(values, flat, strict=True)]


def induction_report(model: SmolLM2, length: int, generator: torch.Generator) -> InductionReport:
    """Forward a seeded random sequence repeated twice and measure every head and the loss; a second, traced
    pass keeps each head's output for the copying scores."""
    ids = random_repeated_tokens(length, generator, model.config.vocab_size)
    out = forward(model, ids, return_attentions=True)
    assert out.attentions is not None  # asked for above
    attentions = out.attentions.cpu()  # (L, H, 2n, 2n)
    traced = attribution.trace(model, ids, by_heads=True)
    with torch.inference_mode():
        copying = copying_effects(model, traced, attentions, length).mean(dim=-1).cpu()  # (L, H)
    return InductionReport(
        ids,
        induction_score(attentions, length),
        sink_share(attentions),
        copy_loss(out.logits.cpu(), ids, length),
        copying,
        previous_token_score(attentions),
    )


@dataclass(frozen=True)
class AblationEffect:
    """The loss on the second copy with and without the ablation, and the shift of the last position's
    next-token probabilities (total variation distance, 0 = unchanged, 1 = disjoint)."""

    loss_before: float
    loss_after: float
    probability_shift: float


def induction_scores_with(model: SmolLM2, token_ids: torch.Tensor, length: int, ablation: Ablation) -> torch.Tensor:
    """Every head's induction score (L, H) on the repeated sequence with `ablation`'s heads switched off. A
    switched-off head's own pattern does not move (only its output is gone); a later head's falls where its
    queries or keys read what the switched-off head wrote (K-composition, for a previous-token head)."""
    out = forward(model, token_ids, return_attentions=True, ablation=ablation)
    assert out.attentions is not None  # asked for above
    return induction_score(out.attentions.cpu(), length)


def ablation_effect(model: SmolLM2, token_ids: torch.Tensor, length: int, ablation: Ablation) -> AblationEffect:
    """Run the repeated sequence with and without `ablation` (fast path) and compare."""
    before = forward(model, token_ids, path=AttentionPath.FAST)
    after = forward(model, token_ids, path=AttentionPath.FAST, ablation=ablation)
    p, q = before.logits[-1].softmax(-1), after.logits[-1].softmax(-1)
    return AblationEffect(
        loss_before=copy_loss(before.logits.cpu(), token_ids, length).second_loss,
        loss_after=copy_loss(after.logits.cpu(), token_ids, length).second_loss,
        probability_shift=float(0.5 * (p - q).abs().sum()),
    )


class Reads(enum.StrEnum):
    """Which inputs of a later layer's heads read the residual stream without the switched-off heads' output."""

    NEITHER = "neither"  # the clean stream: the layer's own pattern
    QUERIES = "queries only"
    KEYS = "keys only"
    BOTH = "queries and keys"  # the whole ablation, as far as the pattern goes (values do not shape it)


@dataclass(frozen=True)
class CompositionSplit:
    """The later head whose induction score falls the most when heads are switched off, and its score for each
    `Reads`: which of its inputs needs what the switched-off heads wrote. A previous-token head feeds an induction
    head's keys (K-composition): with only the keys reading the stream without it the score falls, with only the
    queries it stays."""

    layer: int
    head: int
    scores: dict[Reads, float]

    @property
    def needs(self) -> Reads:
        """The input whose change alone takes away most of the fall (NEITHER: neither does on its own)."""
        full = self.scores[Reads.NEITHER] - self.scores[Reads.BOTH]
        alone = {reads: self.scores[Reads.NEITHER] - self.scores[reads] for reads in (Reads.QUERIES, Reads.KEYS)}
        most = [reads for reads, fall in alone.items() if fall > COMPOSITION_SHARE * full]
        return most[0] if len(most) == 1 else (Reads.BOTH if most else Reads.NEITHER)


COMPOSITION_SHARE = 0.5  # an input "needs" the switched-off heads when changing it alone takes this share of the fall


def _streams_into(model: SmolLM2, clean: list[torch.Tensor], ablation: Ablation) -> list[torch.Tensor]:
    """The residual stream (1, T, D) that each layer reads with `ablation`'s heads (ZERO or MEAN) changed on the
    way. `clean` holds each layer's stream without the change (`attribution.trace`'s `before_layer`): up to the
    first switched-off layer nothing differs, so the passes start there, and the last layer's output is read by
    no layer."""
    first = min(layer for layer, _ in ablation.heads)
    read = clean[: first + 1]
    x = clean[first]
    for index in range(first, model.config.num_layers - 1):
        heads = ablation.in_layer(index)

        def edit(heads_out: torch.Tensor, heads: list[int] = heads) -> torch.Tensor:
            heads_out = heads_out.clone()  # (1, H, T, d)
            for head in heads:
                zero = ablation.mode is AblationMode.ZERO
                heads_out[:, head] = 0.0 if zero else heads_out[:, head].mean(dim=1, keepdim=True)  # (1, 1, d) spread
            return heads_out

        x = layer_pass(model, index, x, heads_edit=edit if heads else None).residual
        read.append(x)
    return read


def _layer_weights(model: SmolLM2, layer: int, for_queries: torch.Tensor, for_keys: torch.Tensor) -> torch.Tensor:
    """`layer`'s attention weights (H, T, T) with its queries read from one stream (1, T, D) and its keys from
    another: the layer's own norm, projections and RoPE, the causal softmax in float64 (as `attention`)."""
    config, weights = model.config, model.weights.layers[layer]
    tokens = for_queries.shape[1]
    angles = rope_angles(torch.arange(tokens, device=for_queries.device), config.head_dim, config.rope_base)

    def projected(stream: torch.Tensor, matrix, heads: int) -> torch.Tensor:  # noqa: ANN001 - a weight matrix
        normed = rms_norm(stream, weights.attention_norm, config.rms_norm_eps)  # (1, T, D)
        split = linear_rows(normed, matrix).view(tokens, heads, config.head_dim).transpose(0, 1)  # (heads, T, d)
        return rotate_pairs(split, angles).double()

    queries = projected(for_queries, weights.query, config.num_heads)  # (H, T, d)
    keys = projected(for_keys, weights.key, config.num_kv_heads).repeat_interleave(config.group_size, dim=0)
    scores = queries @ keys.transpose(-2, -1) / math.sqrt(config.head_dim)  # (H, T, d) @ (H, d, T) -> (H, T, T)
    future = torch.ones(tokens, tokens, dtype=torch.bool, device=scores.device).triu(1)  # (T, T)
    return scores.masked_fill(future, float("-inf")).softmax(dim=-1).float()  # (H, T, T)


def composition_split(
    model: SmolLM2, token_ids: torch.Tensor, length: int, ablation: Ablation
) -> CompositionSplit | None:
    """On the repeated sequence token_ids (2 * length,): the head after every switched-off one whose induction
    score falls the most without `ablation`'s heads (ZERO or MEAN), and its score with its queries, its keys, both
    or neither reading the stream without them. None when no layer comes after them.

    The whole-model ablation (`induction_scores_with`) changes queries and keys at once; this tells them apart.
    """
    if ablation.mode is AblationMode.UNIFORM:
        raise ValueError("Zero the heads or replace them by their mean: a uniform pattern is not an output edit.")
    first_later = max(layer for layer, _ in ablation.heads) + 1
    layers = model.config.num_layers
    if first_later >= layers:
        return None

    def scores(layer: int, for_queries: torch.Tensor, for_keys: torch.Tensor) -> torch.Tensor:  # (H,)
        return induction_score(_layer_weights(model, layer, for_queries, for_keys).cpu(), length)

    with torch.inference_mode():
        traced = attribution.trace(model, token_ids)
        clean = [traced.before_layer(layer)[None] for layer in range(layers)]  # (1, T, D) each
        without = _streams_into(model, clean, ablation)
        falls = torch.stack(
            [
                scores(lay, clean[lay], clean[lay]) - scores(lay, without[lay], without[lay])
                for lay in range(first_later, layers)
            ]
        )  # (later layers, H)
        index = int(falls.argmax())
        layer, head = first_later + index // falls.shape[1], index % falls.shape[1]
        streams = {
            Reads.NEITHER: (clean[layer], clean[layer]),
            Reads.QUERIES: (without[layer], clean[layer]),
            Reads.KEYS: (clean[layer], without[layer]),
            Reads.BOTH: (without[layer], without[layer]),
        }
        split = {reads: float(scores(layer, *pair)[head]) for reads, pair in streams.items()}
    return CompositionSplit(layer, head, split)


def rotated_pair(
    query: torch.Tensor, key: torch.Tensor, i: int, j: int, config: DecoderConfig
) -> tuple[torch.Tensor, torch.Tensor]:
    """The query rotated as at position i and the key as at position j (both (d,)), as the model rotates them."""
    angles = rope_angles(torch.tensor([i, j]), config.head_dim, config.rope_base)  # (2, d / 2)
    return rotate_pairs(query[None, :], angles[:1])[0], rotate_pairs(key[None, :], angles[1:])[0]  # (d,), (d,)


def rope_score(query: torch.Tensor, key: torch.Tensor, i: int, j: int, config: DecoderConfig) -> float:
    """q . k after rotating the query as at position i and the key as at position j (both (d,))."""
    q, k = rotated_pair(query, key, i, j, config)
    return float(q.double() @ k.double())


def rope_offset_scores(
    query: torch.Tensor, key: torch.Tensor, i: int, j: int, shifts: list[int], config: DecoderConfig
) -> list[float]:
    """The score of the same query and key at positions (i + s, j + s) for each shift s: all equal,
    because each pair turns by (i - j) x its frequency relative to the other, whatever s is."""
    return [rope_score(query, key, i + s, j + s, config) for s in shifts]


def sinusoidal_positions(positions: torch.Tensor, width: int) -> torch.Tensor:
    """The original Transformer's position vectors: (P,) -> (P, width); pair i is sin and cos of
    position x 10000^(-2i / width). RoPE turns pair i by the same kind of frequency, base^(-2i / width),
    with SmolLM2's own base (`DecoderConfig.rope_base`, 100,000), not this 10,000."""
    pair = torch.arange(0, width, 2, dtype=torch.float64)  # (width / 2,)
    angles = positions.to(torch.float64)[:, None] * 10000.0 ** (-pair / width)  # (P, width / 2)
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # (P, width / 2, 2) -> (P, width)


def additive_score(query: torch.Tensor, key: torch.Tensor, i: int, j: int) -> float:
    """(q + p_i) . (k + p_j) with sinusoidal position vectors added instead of a rotation (both (d,))."""
    positions = sinusoidal_positions(torch.tensor([i, j]), query.numel())  # (2, d)
    return float((query.double() + positions[0]) @ (key.double() + positions[1]))
