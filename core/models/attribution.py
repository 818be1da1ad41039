"""From attention to the answer (issue 42): where the last position's logits come from, part by part.

The residual stream is a sum. After the last layer, before the final RMSNorm, the last position holds

    residual = token embedding + sum over layers ( every head's output + the feed-forward's output )

where head h's output is its weighted sum of values (d numbers) times its own d columns of the layer's
output matrix W_O (the columns that multiply head h's slice of the concatenation). Three readings of
that sum, all from one traced forward pass (`trace`):

- `decompose`: the parts themselves, for any position; they add up to the real residual.
- `logit_lens`: the final RMSNorm and the unembedding applied to the residual after every attention and
  every feed-forward (2L points), as if the model stopped there: when does the answer appear?
- `direct_attribution`: each part's direct effect on one logit (or on a difference of two logits). The
  final RMSNorm is not linear (it divides by the residual's root mean square), so its scale is frozen at
  its value on the real residual; the map part -> logit is then linear and the parts' effects add up to
  the real logit exactly. "Direct": what a head writes that later layers read and change is not counted
  here (activation patching, patching.py, measures the total effect).

Any precision. A head's share needs W_O's columns, which the 4-bit blocks do not give: `smollm2.head_results`
dequantizes one layer's W_O at a time (transient). On 4-bit weights, trace with `by_heads=True`: the
attention's output is then that same float32 W_O times the heads' outputs, so the parts add up to the
traced residual exactly; its logits differ a little from the 4-bit forward's (which rounds each
attention output to bfloat16), and a lesson shows the traced path's own numbers throughout.

Shape legend (smollm2's): T tokens, D hidden width (576), H heads (9), G key/value heads (3), d head
width (64), L layers (30), V vocabulary, P = 2L lens points, k top tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import torch

from core.models import smollm2 as sm


class Sublayer(Enum):
    ATTENTION = "attention"  # the point after a layer's attention has added its output
    MLP = "mlp"  # the point after the feed-forward: the layer's output


@dataclass(frozen=True)
class ResidualTrace:
    """One forward pass of one sequence, kept part by part (no cache, the fast path's arithmetic).

    embedding  (T, D): the token embeddings, where the residual stream starts
    heads_out  (L, H, T, d): each head's weighted sum of values, before W_O
    attended   (L, T, D): each attention's output (all heads mixed by W_O)
    mlp_out    (L, T, D): each feed-forward's output
    points     (2L, T, D): the residual after layer l's attention (row 2l) and after its feed-forward (2l + 1)
    keys, values: per layer (G, T, d): this pass's keys (after RoPE) and values, which patching reuses
    by_heads: traced with the output matrices as float32 numbers (`smollm2.layer_pass`)
    """

    token_ids: torch.Tensor
    tokens: tuple[str, ...]
    embedding: torch.Tensor
    heads_out: torch.Tensor
    attended: torch.Tensor
    mlp_out: torch.Tensor
    points: torch.Tensor
    keys: tuple[torch.Tensor, ...]
    values: tuple[torch.Tensor, ...]
    by_heads: bool = False

    @property
    def residual(self) -> torch.Tensor:
        """The final residual stream (T, D), before the final RMSNorm."""
        return self.points[-1]

    def before_layer(self, layer: int) -> torch.Tensor:
        """The residual stream (T, D) that layer `layer` reads."""
        return self.embedding if layer == 0 else self.points[2 * layer - 1]


def trace(model: sm.SmolLM2, token_ids: torch.Tensor, *, by_heads: bool = False) -> ResidualTrace:
    """Run token_ids (T,) through every layer with `smollm2.layer_pass`, keeping every part."""
    if token_ids.ndim != 1 or token_ids.numel() == 0:
        raise sm.TextError("Give a 1-D sequence of at least one token id.")
    return trace_batch(model, token_ids[None], by_heads=by_heads)[0]


def trace_batch(model: sm.SmolLM2, token_ids: torch.Tensor, *, by_heads: bool = False) -> list[ResidualTrace]:
    """`trace` for B sequences of the same length at once, token_ids (B, T): one pass reads each layer's
    weights once for all of them. (Patching traces its prompts one by one: a batch rounds bfloat16 products
    differently, and the clean prompt's numbers must be attribution's to the last digit.)"""
    ids = token_ids.to(model.device)
    parts: list[sm.LayerPass] = []
    with torch.inference_mode():
        embedding = model.weights.embeddings[ids].float()  # (B, T, D)
        x = embedding
        for index in range(model.config.num_layers):
            step = sm.layer_pass(model, index, x, by_heads=by_heads)
            parts.append(step)
            x = step.residual
        attended = torch.stack([p.attended for p in parts], dim=1)  # (B, L, T, D)
        mlp_out = torch.stack([p.mlp_out for p in parts], dim=1)  # (B, L, T, D)
        after_mlp = torch.stack([p.residual for p in parts], dim=1)  # (B, L, T, D)
        read = torch.cat((embedding[:, None], after_mlp[:, :-1]), dim=1)  # (B, L, T, D): the residual each layer read
        after_attention = read + attended  # (B, L, T, D)
        points = torch.stack((after_attention, after_mlp), dim=2).flatten(1, 2)  # (B, L, 2, T, D) -> (B, 2L, T, D)
        heads_out = torch.stack([p.heads_out for p in parts], dim=1)  # (B, L, H, T, d)
    return [
        ResidualTrace(
            token_ids=token_ids[b],
            tokens=sm.token_texts(model, token_ids[b]),
            embedding=embedding[b],
            heads_out=heads_out[b],
            attended=attended[b],
            mlp_out=mlp_out[b],
            points=points[b],
            keys=tuple(p.keys[b] for p in parts),  # (G, T, d) each
            values=tuple(p.values[b] for p in parts),
            by_heads=by_heads,
        )
        for b in range(ids.shape[0])
    ]


def final_logits(model: sm.SmolLM2, residual: torch.Tensor) -> torch.Tensor:
    """What the model makes of residual vectors (..., D): the final RMSNorm, then the tied unembedding -> (..., V)."""
    normed = sm.rms_norm(residual, model.weights.final_norm, model.config.rms_norm_eps)
    logits = sm.unembed(model, normed.reshape(-1, normed.shape[-1]))  # (N, D) -> (N, V)
    return logits.reshape(*normed.shape[:-1], -1)  # (..., V)


# ----------------------------------------------------------------------------------------------
# The residual as a sum of parts


@dataclass(frozen=True)
class Contributions:
    """One number per part of the residual stream: the embedding, every head (L, H), every feed-forward (L,).

    `total` is the quantity the parts explain, computed the model's way (not by adding them up).
    """

    embedding: float
    heads: torch.Tensor  # (L, H)
    mlps: torch.Tensor  # (L,)
    total: float

    def summed(self) -> float:
        """The parts added up: equals `total` when the map from parts to the quantity is linear."""
        return self.embedding + float(self.heads.double().sum()) + float(self.mlps.double().sum())

    def top_heads(self, k: int) -> list[tuple[int, int, float]]:
        """The k heads with the largest contributions, as (layer, head, value), largest first."""
        values, flat = self.heads.flatten().topk(k)
        heads = self.heads.shape[1]
        return [(int(i) // heads, int(i) % heads, float(v)) for v, i in zip(values, flat, strict=True)]


@dataclass(frozen=True)
class ResidualDecomposition:
    """The residual stream at one position, part by part (vectors of D numbers).

    embedding (D,), heads (L, H, D): each head's output (its values times its columns of W_O),
    mlps (L, D), residual (D,): the real residual, as the forward pass summed it.
    """

    position: int
    embedding: torch.Tensor
    heads: torch.Tensor
    mlps: torch.Tensor
    residual: torch.Tensor

    def summed(self) -> torch.Tensor:
        """Embedding + every head + every feed-forward (D,): the residual again, up to rounding."""
        return self.embedding + self.heads.sum(dim=(0, 1)) + self.mlps.sum(dim=0)

    def along(self, direction: torch.Tensor, total: float) -> Contributions:
        """Every part's dot product with direction (D,): how much of it points that way."""
        return Contributions(
            embedding=float(self.embedding @ direction),
            heads=self.heads @ direction,  # (L, H, D) @ (D,) -> (L, H)
            mlps=self.mlps @ direction,  # (L, D) @ (D,) -> (L,)
            total=total,
        )

    def shares(self) -> Contributions:
        """Each part's projection on the residual, as a share of it (the shares add up to 1).

        Why a projection: the parts' lengths do not add up (they point in many directions), their
        components along the residual's own direction do.
        """
        return self.along(self.residual / self.residual.pow(2).sum(), total=1.0)


def decompose(model: sm.SmolLM2, traced: ResidualTrace, position: int = -1) -> ResidualDecomposition:
    """The residual at `position` (negative counts from the end) split into its 1 + L x H + L parts."""
    position = position % traced.embedding.shape[0]
    heads = torch.stack(
        [sm.head_results(layer, traced.heads_out[i, :, position]) for i, layer in enumerate(model.weights.layers)]
    )  # L x (H, D) -> (L, H, D)
    return ResidualDecomposition(
        position=position,
        embedding=traced.embedding[position],
        heads=heads,
        mlps=traced.mlp_out[:, position],  # (L, D)
        residual=traced.residual[position],
    )


# ----------------------------------------------------------------------------------------------
# The logit lens


@dataclass(frozen=True)
class LensPoint:
    """A place in the residual stream: after layer `layer`'s attention or after its feed-forward."""

    layer: int
    sublayer: Sublayer

    def label(self) -> str:
        """A short name for a chart's axis: "L23 attn", "L23 MLP" (MLP as the page's other labels write it)."""
        return f"L{self.layer} {'attn' if self.sublayer is Sublayer.ATTENTION else 'MLP'}"


@dataclass(frozen=True)
class LogitLens:
    """The final norm and unembedding read at every point (P = 2L), for one position.

    top_ids, top_probabilities (P, k): the k likeliest next tokens at each point, likeliest first
    answer_id: the model's own answer (the top token at the last point, which is the real output)
    answer_probabilities, answer_ranks (P,): the answer's probability and rank (0 = top) at each point
    first_on_top: the first point where the answer is on top; settled_at: the first from which it stays there
    """

    position: int
    points: tuple[LensPoint, ...]
    top_ids: torch.Tensor
    top_tokens: tuple[tuple[str, ...], ...]
    top_probabilities: torch.Tensor
    answer_id: int
    answer: str
    answer_probabilities: torch.Tensor
    answer_ranks: torch.Tensor
    first_on_top: LensPoint | None
    settled_at: LensPoint | None


def lens_points(config: sm.DecoderConfig) -> tuple[LensPoint, ...]:
    """The 2L points in the order of `ResidualTrace.points`."""
    return tuple(LensPoint(layer, sub) for layer in range(config.num_layers) for sub in Sublayer)


def lens_logits(model: sm.SmolLM2, traced: ResidualTrace, position: int = -1) -> torch.Tensor:
    """The logits (P, V) the final norm and unembedding give at each point, in one (P, D) x (D, V) product."""
    with torch.inference_mode():
        return final_logits(model, traced.points[:, position])  # (P, D) -> (P, V)


def logit_lens(model: sm.SmolLM2, traced: ResidualTrace, position: int = -1, k: int = 5) -> LogitLens:
    """The logit lens at `position`: top-k tokens at every point, and where the model's answer comes on top."""
    logits = lens_logits(model, traced, position)  # (P, V)
    probabilities = logits.softmax(dim=-1)  # (P, V)
    top = probabilities.topk(k, dim=-1)  # (P, k) twice
    answer = int(logits[-1].argmax())
    answer_logit = logits[:, answer : answer + 1]  # (P, 1)
    ranks = (logits > answer_logit).sum(dim=-1)  # (P,): tokens above the answer
    points = lens_points(model.config)
    on_top = (ranks == 0).tolist()
    first = next((point for point, top_now in zip(points, on_top, strict=True) if top_now), None)
    settled = None
    for point, top_now in zip(reversed(points), reversed(on_top), strict=True):
        if not top_now:
            break
        settled = point
    return LogitLens(
        position=position % traced.embedding.shape[0],
        points=points,
        top_ids=top.indices,
        top_tokens=tuple(sm.token_texts(model, row) for row in top.indices),
        top_probabilities=top.values,
        answer_id=answer,
        answer=sm.token_texts(model, [answer])[0],
        answer_probabilities=probabilities[:, answer],
        answer_ranks=ranks,
        first_on_top=first,
        settled_at=settled,
    )


# ----------------------------------------------------------------------------------------------
# Direct logit attribution


@dataclass(frozen=True)
class LogitTarget:
    """What to explain: the logit of `token_id`, or with `minus_id` the difference logit(token) - logit(minus)."""

    token_id: int
    minus_id: int | None = None

    def direction(self, embeddings: torch.Tensor) -> torch.Tensor:
        """The unembedding direction (D,) of the target, float32 (embeddings (V, D): tied unembedding)."""
        row = embeddings[self.token_id].float()
        return row if self.minus_id is None else row - embeddings[self.minus_id].float()


@dataclass(frozen=True)
class DirectAttribution:
    """Each part's direct effect on the target's logit (or logit difference) at one position.

    contributions: embedding, heads (L, H), feed-forwards (L,), and the real logit (difference) as total
    scale: the final RMSNorm's 1 / rms of the real residual, frozen (what makes the map linear)
    """

    target: LogitTarget
    position: int
    contributions: Contributions
    scale: float


def direct_attribution(
    model: sm.SmolLM2, decomposition: ResidualDecomposition, target: LogitTarget
) -> DirectAttribution:
    """Project every part through the final norm (scale frozen) and the target's unembedding direction.

    logit = (residual * scale * gain) . direction with scale = 1 / rms(residual); with the scale fixed,
    this is linear in the residual, so it distributes over the parts and they add up to the real logit.
    """
    config = model.config
    residual = decomposition.residual
    scale = torch.rsqrt(residual.pow(2).mean() + config.rms_norm_eps)  # the norm's scale on the real residual
    direction = target.direction(model.weights.embeddings)  # (D,)
    effective = scale * model.weights.final_norm * direction  # (D,): gain and frozen scale folded in
    # The target's logit (or difference) itself, in float64 from the same numbers: `final_logits` keeps only each
    # row's largest logits exact on a bfloat16 model, and a token the student picks far down (" Maryland") came
    # out 9e-3 off the sum of its parts, which the page says add up to it exactly (an independent review).
    total = residual.double() @ effective.double()
    return DirectAttribution(
        target=target,
        position=decomposition.position,
        contributions=decomposition.along(effective, total=float(total)),
        scale=float(scale),
    )
