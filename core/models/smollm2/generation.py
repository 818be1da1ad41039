"""Generation, one token at a time: each step feeds the newest token (with the KV cache) and draws the next
from the last position's logits with a session's own generator."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from core.models.sampling import NextTokenDistribution, SamplingSettings, next_token_distribution, sample
from core.models.smollm2.forward import AttentionPath, forward
from core.models.smollm2.loading import SmolLM2, token_texts


class GenerationCancelled(RuntimeError):
    """`generate` stopped because the one it was generating for had gone (its `keep_going` said False)."""


@dataclass(frozen=True)
class GenerationStep:
    """One generated token: its id and text, the logits it was drawn from (V,), the model's distribution
    and what the sampling settings left to draw from, and (when asked) the attention row that predicted it:
    the last position's weights over every token so far, in every head (L, H, tokens so far)."""

    token_id: int
    token: str
    logits: torch.Tensor
    distribution: NextTokenDistribution
    attention_row: torch.Tensor | None


@dataclass(frozen=True)
class Generation:
    prompt_ids: torch.Tensor  # (T,)
    steps: tuple[GenerationStep, ...]

    @property
    def token_ids(self) -> torch.Tensor:
        """Prompt and generated tokens, (T + steps,)."""
        new = torch.tensor([s.token_id for s in self.steps], dtype=torch.int64)
        return torch.cat((self.prompt_ids.cpu(), new))


def generate(
    model: SmolLM2,
    prompt_ids: torch.Tensor,
    *,
    max_new_tokens: int,
    settings: SamplingSettings,
    generator: torch.Generator,
    use_cache: bool = True,
    attention_rows: bool = False,
    stop_at_eos: bool = True,
    keep_going: Callable[[], bool] | None = None,
) -> Generation:
    """Append up to `max_new_tokens` tokens, each drawn from the logits of the last position.

    With the cache, each step feeds only the newest token and reuses every earlier key and value;
    without it, each step runs the whole sequence again (same logits, more work: a test checks both).
    `generator` is a CPU torch.Generator (the draws never touch the global RNG). `keep_going` is asked
    before each new token; once it says False, GenerationCancelled is raised (no partial result that a
    cache could keep as if it were whole).
    """
    path = AttentionPath.REFERENCE if attention_rows else AttentionPath.FAST
    sequence = prompt_ids.to(torch.int64)
    feed, cache = sequence, None
    steps: list[GenerationStep] = []
    for _ in range(max_new_tokens):
        if keep_going is not None and not keep_going():
            raise GenerationCancelled(f"stopped after {len(steps)} of {max_new_tokens} new tokens")
        if use_cache:
            out = forward(
                model,
                feed,
                path=path,
                return_attentions=attention_rows,
                last_logits_only=True,
                cache=cache,
                use_cache=True,
            )
            cache = out.cache
        else:
            out = forward(model, sequence, path=path, return_attentions=attention_rows, last_logits_only=True)
        logits = out.logits[-1]  # (V,)
        distribution = next_token_distribution(logits, settings)
        token_id = sample(distribution, generator)
        row = out.attentions[:, :, -1, :] if out.attentions is not None else None  # (L, H, S + T)
        steps.append(GenerationStep(token_id, token_texts(model, [token_id])[0], logits, distribution, row))
        feed = torch.tensor([token_id], dtype=torch.int64)
        sequence = torch.cat((sequence, feed))
        if stop_at_eos and token_id == model.config.eos_token_id:
            break
    return Generation(prompt_ids, tuple(steps))
