"""Activation patching (issue 42): which heads carry the answer, measured by copying them between two runs.

Two prompts of the same length differ in one name: "Alice met Bob. Alice gave the book to" answers
" Bob"; "Alice met Bob. Bob gave the book to" does not. The metric is the logit difference
m = logit(" Bob") - logit(" Alice") at the last position. Run the corrupted prompt, but copy one head's
output (at every position) from the clean run: the share of the gap it closes,

    restored = (m_patched - m_corrupted) / (m_clean - m_corrupted),

is 1 when that head alone carries everything the change needs, 0 when it carries nothing.

- `exact_head_patching`: every head, one corrupted run each, batched by layer (a layer's 9 heads in one
  batch of 9 sequences). Only the tokens from the first one that differs are recomputed: before it the
  two prompts are the same text, so (causal attention) every earlier position is the same in both runs
  and their keys and values are taken from the corrupted run.
- `attribution_patching`: the first-order estimate from one clean run, one corrupted run and one
  backward pass: the gradient of m with respect to each head's output, times (clean - corrupted) output.
  Cheap, and good where m is close to linear in that head; it can miss where a softmax saturates.
- `patched_difference`: m with any set of parts (embedding, heads, feed-forwards) copied: patching every
  part gives the clean run back (restored exactly 1), patching none the corrupted one (0).

Float32 weights (Precision.FLOAT32) for the numbers the lesson reports. Shape legend as smollm2's.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

import torch

from core.models import smollm2 as sm
from core.models.attribution import ResidualTrace, final_logits, trace

Progress = Callable[[int, int], None]  # (heads done, heads in all)


class PatchingCancelled(RuntimeError):
    """`exact_head_patching` stopped because its `keep_going` said False."""


class PatchingMethod(Enum):
    EXACT = "exact"  # one patched run per head
    ATTRIBUTION = "attribution"  # gradient x difference: one forward and one backward for all heads


class PartKind(Enum):
    EMBEDDING = "embedding"
    HEAD = "head"
    MLP = "mlp"


@dataclass(frozen=True, order=True)
class Part:
    """One part of the residual stream that can be copied from the clean run: the token embeddings, head
    `head` of layer `layer`, or the feed-forward of layer `layer` (unused numbers are 0)."""

    kind: PartKind
    layer: int = 0
    head: int = 0


def every_part(config: sm.DecoderConfig) -> frozenset[Part]:
    """The embedding, all L x H heads and all L feed-forwards: together, everything the residual holds."""
    heads = {Part(PartKind.HEAD, layer, head) for layer in range(config.num_layers) for head in range(config.num_heads)}
    mlps = {Part(PartKind.MLP, layer) for layer in range(config.num_layers)}
    return frozenset({Part(PartKind.EMBEDDING), *heads, *mlps})


@dataclass(frozen=True)
class Contrast:
    """The metric: logit(answer) - logit(other) at the last position (answer: the clean run's, other: the
    corrupted run's)."""

    answer_id: int
    other_id: int
    answer: str
    other: str


@dataclass(frozen=True)
class Corruption:
    """A corrupted prompt suggested for a clean one: the last `repeated` replaced by `replacement`."""

    clean_text: str
    corrupted_text: str
    repeated: str
    replacement: str

    def contrast(self, model: sm.SmolLM2) -> Contrast | None:
        """logit(" replacement") - logit(" repeated"): the name the clean prompt should end on against the
        one the corrupted prompt should (None when either name with its space is more than one token)."""
        ids = [sm.encode(model, " " + name) for name in (self.replacement, self.repeated)]
        if any(i.numel() != 1 for i in ids):
            return None
        answer, other = int(ids[0][0]), int(ids[1][0])
        return Contrast(answer, other, *sm.token_texts(model, [answer, other]))


# Capitalised only because they open a sentence: never a name to swap, nor a partner ("The capital of France is
# Paris. The capital of Germany is" swapped its second "The" for "France", and lesson 11 explained ' France'
# against ' The' where the model answers ' Berlin'; the s29 review).
_NOT_NAMES = frozenset(
    " ".join(
        (
            "A An The This That These Those It Its He She They We You I His Her Their Our My Your When Then Once",
            "After Before While If As At In On Of To For From With By And But Or So Yet There Here What Who Which",
            "Why How Where Now Today Yesterday Tomorrow Every Each Some All No Not One Two Three Mr Mrs Ms Dr",
        )
    ).split()
)


def suggest_corruption(model: sm.SmolLM2, text: str) -> Corruption | None:
    """Swap the repeated name: the last occurrence of a capitalised word that appears more than once is
    replaced by the nearest other name ("Alice met Bob. Alice gave the book to" -> "Alice met Bob. Bob
    gave the book to"). None when no swap keeps the token length (patching compares the two prompts
    position by position).

    A name, here: a capitalised word that is not one of the words capitalised only at a sentence's start
    (_NOT_NAMES: "The", "When", ...); a partner also does not start a sentence, and is not the repeated word;
    the nearest one to the repeated name's first mention is its partner in "Alice and Bob" or "Alice met Bob".
    """
    found = [(m.group(), m.start()) for m in re.finditer(r"\b[A-Z][a-z]+\b", text) if m.group() not in _NOT_NAMES]
    counts = Counter(word for word, _ in found)
    length = sm.encode(model, text).numel()
    for name in (word for word in counts if counts[word] > 1):
        mentions = [at for word, at in found if word == name]  # character offsets
        others = sorted(
            {
                (abs(at - mentions[0]), word)
                for word, at in found
                if counts[word] == 1 and not _starts_sentence(text, at)
            }
        )  # (distance to the first mention, word), nearest first
        for _, other in others:
            corrupted = text[: mentions[-1]] + other + text[mentions[-1] + len(name) :]
            if sm.encode(model, corrupted).numel() == length:
                return Corruption(text, corrupted, name, other)
    return None


def _starts_sentence(text: str, at: int) -> bool:
    return re.search(r"(^|[.!?]\s+)$", text[:at]) is not None


def contrast_of(model: sm.SmolLM2, clean: ResidualTrace, corrupted: ResidualTrace) -> Contrast:
    """The clean run's top token against the corrupted run's; when they agree, the clean one's runner-up."""
    clean_logits = final_logits(model, clean.residual[-1])  # (V,)
    answer = int(clean_logits.argmax())
    other = int(final_logits(model, corrupted.residual[-1]).argmax())
    if other == answer:
        other = int(clean_logits.topk(2).indices[1])
    answer_text, other_text = sm.token_texts(model, [answer, other])
    return Contrast(answer, other, answer_text, other_text)


def logit_difference(model: sm.SmolLM2, residual_last: torch.Tensor, contrast: Contrast) -> torch.Tensor:
    """m for last-position residuals (..., D): the final norm, then the two tokens' unembedding rows -> (...,)."""
    normed = sm.rms_norm(residual_last, model.weights.final_norm, model.config.rms_norm_eps)
    rows = model.weights.embeddings[[contrast.answer_id, contrast.other_id]].float()  # (2, D)
    logits = normed @ rows.T  # (..., 2)
    return logits[..., 0] - logits[..., 1]


@dataclass(frozen=True)
class PatchingResult:
    """Every head's share of the logit difference restored (L, H), and the two runs' differences.

    For ATTRIBUTION the shares are the first-order estimates (they need not lie in 0..1).
    """

    method: PatchingMethod
    contrast: Contrast
    clean_difference: float
    corrupted_difference: float
    restored: torch.Tensor  # (L, H)

    def top_heads(self, k: int) -> list[tuple[int, int, float]]:
        """The k heads that restore the most, as (layer, head, share), largest first."""
        values, flat = self.restored.flatten().topk(k)
        heads = self.restored.shape[1]
        return [(int(i) // heads, int(i) % heads, float(v)) for v, i in zip(values, flat, strict=True)]


@dataclass(frozen=True)
class PatchingRuns:
    """The clean and corrupted runs, traced, and the metric on both (what every patching reads)."""

    clean: ResidualTrace
    corrupted: ResidualTrace
    contrast: Contrast
    clean_difference: float
    corrupted_difference: float

    @property
    def by_heads(self) -> bool:
        """Traced with float32 output matrices (`attribution.trace`): every patched run is run the same way."""
        return self.clean.by_heads

    @property
    def first_difference(self) -> int:
        """The first position where the two prompts' tokens differ."""
        differ = (self.clean.token_ids != self.corrupted.token_ids).nonzero()
        return int(differ[0, 0])

    def share(self, patched: torch.Tensor) -> torch.Tensor:
        """The share of the gap restored by patched logit differences (any shape): 0 = corrupted, 1 = clean."""
        return (patched - self.corrupted_difference) / (self.clean_difference - self.corrupted_difference)


def prepare_runs(
    model: sm.SmolLM2,
    clean_ids: torch.Tensor,
    corrupted_ids: torch.Tensor,
    contrast: Contrast | None = None,
    *,
    by_heads: bool = False,
) -> PatchingRuns:
    """Trace both prompts (same length, not the same tokens) and measure m on each; contrast None = `contrast_of`.
    by_heads: trace (and later patch) with float32 output matrices, as `attribution.trace` says."""
    if clean_ids.shape != corrupted_ids.shape or torch.equal(clean_ids, corrupted_ids):
        raise sm.TextError("Patching needs two prompts of the same token length that differ somewhere.")
    # One trace each, not one batch of two: a batch rounds the bfloat16 products differently, and lesson 11 showed
    # the clean prompt's difference as 6.1032 by attribution (a trace of its own) and +6.09 here (the s20 review).
    clean, corrupted = (trace(model, ids, by_heads=by_heads) for ids in (clean_ids, corrupted_ids))
    contrast = contrast_of(model, clean, corrupted) if contrast is None else contrast
    clean_m = float(logit_difference(model, clean.residual[-1], contrast))
    corrupted_m = float(logit_difference(model, corrupted.residual[-1], contrast))
    if abs(clean_m - corrupted_m) < 1e-6:
        raise sm.TextError("The two prompts give the same logit difference: there is nothing to restore.")
    return PatchingRuns(clean, corrupted, contrast, clean_m, corrupted_m)


def patched_difference(model: sm.SmolLM2, runs: PatchingRuns, parts: frozenset[Part]) -> float:
    """m of the corrupted run with `parts` copied from the clean run (whole sequence, one run: the reference)."""
    clean = runs.clean
    with torch.inference_mode():
        x = clean.embedding if Part(PartKind.EMBEDDING) in parts else runs.corrupted.embedding
        x = x[None]  # (1, T, D)
        for index in range(model.config.num_layers):
            heads = [p.head for p in parts if p.kind is PartKind.HEAD and p.layer == index]

            def copy_heads(heads_out: torch.Tensor, layer: int = index, chosen: list[int] = heads) -> torch.Tensor:
                heads_out = heads_out.clone()  # (1, H, T, d)
                heads_out[:, chosen] = clean.heads_out[layer, chosen]
                return heads_out

            def copy_mlp(mlp_out: torch.Tensor, layer: int = index) -> torch.Tensor:
                return clean.mlp_out[layer][None]  # (1, T, D)

            x = sm.layer_pass(
                model,
                index,
                x,
                heads_edit=copy_heads if heads else None,
                mlp_edit=copy_mlp if Part(PartKind.MLP, index) in parts else None,
                by_heads=runs.by_heads,
            ).residual
        return float(logit_difference(model, x[0, -1], runs.contrast))


def exact_head_patching(
    model: sm.SmolLM2,
    runs: PatchingRuns,
    *,
    progress: Progress | None = None,
    keep_going: Callable[[], bool] | None = None,
) -> PatchingResult:
    """Copy each head's output (every position) from the clean run into the corrupted run, one head at a time.

    Layer by layer: the corrupted residual that layer reads is run once through its attention, expanded to
    a batch of H sequences in which sequence h takes head h's clean output, and the H sequences run on
    through the later layers together. Only positions from `first_difference` on are computed; the
    earlier ones (the same text in both prompts) lend their keys and values from the corrupted run.
    progress(done, total) after each layer; keep_going() before each (False raises PatchingCancelled).
    """
    config = model.config
    start = runs.first_difference
    total = config.num_layers * config.num_heads
    patched = torch.empty(config.num_layers, config.num_heads)
    diagonal = torch.arange(config.num_heads)
    with torch.inference_mode():
        for layer in range(config.num_layers):
            if keep_going is not None and not keep_going():
                raise PatchingCancelled(f"stopped after {layer * config.num_heads} of {total} heads")
            clean_heads = runs.clean.heads_out[layer, :, start:]  # (H, T', d)

            def one_head_each(heads_out: torch.Tensor, clean_heads: torch.Tensor = clean_heads) -> torch.Tensor:
                batch = heads_out.expand(config.num_heads, -1, -1, -1).clone()  # (1, H, T', d) -> (H, H, T', d)
                batch[diagonal, diagonal] = clean_heads  # sequence h: head h from the clean run
                return batch

            x = runs.corrupted.before_layer(layer)[start:][None]  # (1, T', D)
            for index in range(layer, config.num_layers):
                past = (runs.corrupted.keys[index][:, :start], runs.corrupted.values[index][:, :start])  # (G, S, d)
                edit = one_head_each if index == layer else None
                x = sm.layer_pass(model, index, x, past=past, heads_edit=edit, by_heads=runs.by_heads).residual
            patched[layer] = logit_difference(model, x[:, -1], runs.contrast)  # (H,)
            if progress is not None:
                progress((layer + 1) * config.num_heads, total)
    return _result(PatchingMethod.EXACT, runs, runs.share(patched))


def attribution_patching(model: sm.SmolLM2, runs: PatchingRuns) -> PatchingResult:
    """The first-order estimate of every head's exact patching share, from one corrupted forward and backward.

    m_patched - m_corrupted ~ sum over positions and d of grad_m(head output) * (clean - corrupted output),
    with the gradient taken on the corrupted run through every later path (later heads included): a zero
    tensor that requires a gradient is added to each layer's head outputs, and its gradient is theirs.
    """
    config = model.config
    tokens = runs.corrupted.token_ids.numel()
    probes = [
        torch.zeros(1, config.num_heads, tokens, config.head_dim, requires_grad=True) for _ in range(config.num_layers)
    ]  # L x (1, H, T, d)
    with torch.enable_grad():
        x = runs.corrupted.embedding.clone()[None]  # (1, T, D): a normal tensor (the trace's is an inference one)
        for index, probe in enumerate(probes):
            x = sm.layer_pass(
                model, index, x, heads_edit=probe.add, by_heads=runs.by_heads
            ).residual  # probe + heads_out
        logit_difference(model, x[0, -1], runs.contrast).backward()
    gradients = torch.stack([_gradient(probe)[0] for probe in probes])  # (L, H, T, d)
    change = runs.clean.heads_out - runs.corrupted.heads_out  # (L, H, T, d)
    estimate = (gradients * change).sum(dim=(-2, -1))  # (L, H)
    return _result(PatchingMethod.ATTRIBUTION, runs, runs.share(estimate + runs.corrupted_difference))


def _gradient(probe: torch.Tensor) -> torch.Tensor:
    if probe.grad is None:  # every head reaches the last position's residual, so never
        raise RuntimeError("A head's output got no gradient.")
    return probe.grad


def _result(method: PatchingMethod, runs: PatchingRuns, restored: torch.Tensor) -> PatchingResult:
    return PatchingResult(method, runs.contrast, runs.clean_difference, runs.corrupted_difference, restored)
