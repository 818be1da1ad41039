"""Choosing the next token from a model's logits: temperature, top-k, top-p, greedy.

Pure functions of a logits vector (V,). `next_token_distribution` returns the distribution before
and after filtering (the lesson shows both); `sample` draws from the filtered one with the
caller's `torch.Generator` (no global RNG: two sessions in one process never disturb each other).
Order of the filters, as most libraries apply them: temperature, then top-k, then top-p.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SamplingSettings:
    """temperature 0 = greedy (always the most probable token); top_k / top_p None = no filter."""

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError("The temperature cannot be negative.")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError("top-k keeps at least one token.")
        if self.top_p is not None and not 0.0 < self.top_p <= 1.0:
            raise ValueError("top-p is a probability mass in (0, 1].")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass(frozen=True)
class NextTokenDistribution:
    """before (V,): the model's own probabilities, softmax(logits); after (V,): what is sampled from,
    softmax(logits / temperature) over the tokens top-k and top-p keep, renormalised to sum to 1 (one-hot
    when greedy). `before` leaves the temperature out so that a chart of the two shows what it changed."""

    before: torch.Tensor
    after: torch.Tensor

    @property
    def kept(self) -> int:
        """How many tokens can still be drawn."""
        return int((self.after > 0).sum())


def ranked(values: torch.Tensor, count: int) -> list[int]:
    """The ids of the `count` largest values (V,), largest first, equal values in id order.

    Why the tie rule: bfloat16 logits are coarse (0.125 apart near 25), so two tokens can share
    the top logit; `argmax`, and so greedy decoding, takes the lower id, and every list of
    candidates must put that one first too (`topk` orders ties as it likes).
    """
    order = torch.sort(values, descending=True, stable=True).indices  # (V,): ties keep id order
    return order[:count].tolist()


def top_k_mask(probabilities: torch.Tensor, k: int) -> torch.Tensor:
    """True for the k most probable tokens (ties broken by id, so exactly k are kept)."""
    keep = torch.zeros_like(probabilities, dtype=torch.bool)
    keep[ranked(probabilities, k)] = True
    return keep


def top_p_mask(probabilities: torch.Tensor, p: float) -> torch.Tensor:
    """True for the smallest set of most probable tokens whose mass reaches p (at least one token)."""
    ordered, order = probabilities.sort(descending=True)
    mass_before = ordered.cumsum(dim=0) - ordered  # the mass of the tokens ranked above each one
    keep_sorted = mass_before < p  # a token is needed while the mass above it is still short of p
    keep = torch.zeros_like(keep_sorted)
    keep[order] = keep_sorted
    return keep


def next_token_distribution(logits: torch.Tensor, settings: SamplingSettings) -> NextTokenDistribution:
    """The distribution over the next token (V,): the model's, and what the three settings leave to draw from."""
    logits = logits.float()
    before = torch.softmax(logits, dim=-1)
    if settings.greedy:
        after = torch.zeros_like(before)
        after[int(logits.argmax())] = 1.0
        return NextTokenDistribution(before, after)
    tempered = torch.softmax(logits / settings.temperature, dim=-1)
    keep = torch.ones_like(tempered, dtype=torch.bool)
    if settings.top_k is not None:
        keep &= top_k_mask(tempered, settings.top_k)
    if settings.top_p is not None:  # on the tempered probabilities: temperature changes how many reach p
        renormalised = torch.where(keep, tempered, 0.0) / torch.where(keep, tempered, 0.0).sum()
        keep &= top_p_mask(renormalised, settings.top_p)
    after = torch.where(keep, tempered, 0.0)
    return NextTokenDistribution(before, after / after.sum())


def sample(distribution: NextTokenDistribution, generator: torch.Generator) -> int:
    """One token id drawn from `distribution.after` with the caller's generator."""
    after = distribution.after
    if distribution.kept == 1:  # greedy, or a filter left one token: no draw, so no generator state used
        return int(after.argmax())
    return int(torch.multinomial(after.cpu(), 1, generator=generator))
