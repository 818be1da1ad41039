"""From attention to the answer (core/models/attribution.py): the residual as a sum of parts, the logit lens and
direct logit attribution, on SmolLM2-135M in float32, against our own forward pass and transformers' model.

All slow: they need the float32 model (conftest's session fixtures; ~15 s to load, transformers' ~30 s more).
"""

from __future__ import annotations

import pytest
import torch

from core.models import attribution as at
from core.models import decoder_measures as dm
from core.models import smollm2 as sm

pytestmark = pytest.mark.slow

NAMES = "Alice met Bob. Alice gave the book to"
PROMPTS = (
    NAMES,
    "When Mary and John went to the store, John gave a drink to",
    "The capital of France is Paris, and the capital of Italy is",
    "The cat sat on the mat. The cat sat on the",
    "def add(a, b):\n    return a + b\n\nprint(add(2, 40))",
    "In 2024, 1,234,567 people paid $89.99 each",
)


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def test_layer_passes_give_forward_s_logits(decoder32) -> None:
    model = decoder32
    for text in PROMPTS[:3]:
        ids = sm.encode(model, text)
        traced = at.trace(model, ids)
        assert traced.points.shape == (60, len(ids), 576) and traced.heads_out.shape == (30, 9, len(ids), 64)
        assert (at.final_logits(model, traced.residual) - sm.forward(model, ids).logits).abs().max() < 1e-4, text


def test_a_batch_and_a_shared_prefix_change_nothing(decoder32) -> None:
    model = decoder32
    first, second = (
        at.trace(model, sm.encode(model, text)) for text in (NAMES, NAMES.replace("Alice gave", "Bob gave"))
    )
    with torch.inference_mode():
        both = sm.layer_pass(model, 5, torch.stack((first.before_layer(5), second.before_layer(5))))  # (2, T, D)
        assert (both.residual[0] - first.points[11]).abs().max() < 1e-4
        assert (both.residual[1] - second.points[11]).abs().max() < 1e-4
        # Positions 4.. after positions 0..3 held as keys and values: the same as the whole sequence's rows.
        tail = sm.layer_pass(
            model, 5, second.before_layer(5)[None, 4:], past=(second.keys[5][:, :4], second.values[5][:, :4])
        )
        assert (tail.residual[0] - second.points[11][4:]).abs().max() < 1e-4
    pair = at.trace_batch(model, torch.stack((first.token_ids, second.token_ids)))
    for alone, batched in zip((first, second), pair, strict=True):
        # Float32 rounding relative to the stream's size: the sink's entries reach some 22,000, where a 2026-11
        # Xeon's batched products differ by 0.017 (7.5e-7 of it); a batching bug would differ by the whole entry.
        assert (alone.points - batched.points).abs().max() < 1e-5 * alone.points.abs().max()
        assert torch.equal(alone.token_ids, batched.token_ids)
        assert (alone.heads_out - batched.heads_out).abs().max() < 1e-5 * alone.heads_out.abs().max()


@pytest.mark.parametrize("position", [-1, 0, 3])
def test_the_parts_add_up_to_the_residual(decoder32, position: int) -> None:
    model = decoder32
    traced = at.trace(model, sm.encode(model, NAMES))
    parts = at.decompose(model, traced, position)
    assert parts.heads.shape == (30, 9, 576) and parts.mlps.shape == (30, 576)
    assert _relative(parts.summed(), parts.residual) < 1e-4
    # Each layer's heads, added, are its attention's output (the heads' columns of W_O partition the matrix).
    assert _relative(parts.heads.sum(dim=1), traced.attended[:, parts.position]) < 1e-5
    assert parts.shares().summed() == pytest.approx(1.0, abs=1e-4)


def test_the_first_token_is_the_sink_with_a_huge_residual(decoder32) -> None:
    # Issue 42 measured ~22,000 at the sink against ~160 elsewhere; here from layer ~11 to the last feed-forward,
    # which cancels most of it (the final residual's sink is ~5,700, still far above the others' < 1,000).
    traced = at.trace(decoder32, sm.encode(decoder32, NAMES))
    norms = traced.points.norm(dim=-1)  # (60, T): every point, every position
    middle = norms[2 * 15 + 1]  # after layer 15
    assert float(middle[0]) > 20_000 and float(middle[1:].median()) < 300
    assert float(norms[-1, 0]) > 5 * float(norms[-1, 1:].max())


def test_logit_lens_matches_transformers_hidden_states(decoder32, smollm2_transformers) -> None:
    model, reference = decoder32, smollm2_transformers
    layers = reference.model.layers
    for text in PROMPTS[:3]:
        ids = sm.encode(model, text)
        attention_outputs: list[torch.Tensor] = []
        hooks = [
            layer.self_attn.register_forward_hook(lambda _m, _i, out: attention_outputs.append(out[0][0]))
            for layer in layers
        ]
        try:
            with torch.no_grad():
                out = reference(ids[None], output_hidden_states=True)
        finally:
            for hook in hooks:
                hook.remove()
        states = [s[0] for s in out.hidden_states]  # 31 x (T, D): the embedding, then each layer's output ...
        after_mlp = [reference.model.norm(s) for s in states[1:-1]] + [states[-1]]  # ... the last one normalised
        after_attention = [reference.model.norm(s + a) for s, a in zip(states[:-1], attention_outputs, strict=True)]
        with torch.no_grad():
            theirs = reference.lm_head(
                torch.stack([x for pair in zip(after_attention, after_mlp, strict=True) for x in pair])
            )
        ours = at.lens_logits(model, at.trace(model, ids), position=-1)  # (60, V)
        assert ours.shape == (60, model.config.vocab_size)
        assert (ours - theirs[:, -1]).abs().max() < 1e-3, text
        assert (ours[-1] - out.logits[0, -1]).abs().max() < 1e-3  # the last point is the model's output


def test_logit_lens_summary(decoder32) -> None:
    model = decoder32
    traced = at.trace(model, sm.encode(model, NAMES))
    lens = at.logit_lens(model, traced, k=3)
    assert lens.answer == " Bob" and lens.top_tokens[-1][0] == " Bob"
    assert lens.top_ids.shape == (60, 3) and bool(
        (lens.top_probabilities[:, :-1] >= lens.top_probabilities[:, 1:]).all()
    )
    assert int(lens.answer_ranks[-1]) == 0 and lens.settled_at is not None and lens.first_on_top is not None
    assert lens.points.index(lens.first_on_top) <= lens.points.index(lens.settled_at)
    before = lens.points.index(lens.settled_at) - 1
    assert before < 0 or int(lens.answer_ranks[before]) > 0
    assert float(lens.answer_probabilities[-1]) == pytest.approx(
        float(sm.forward(model, traced.token_ids).logits[-1].softmax(-1).max()), abs=1e-5
    )


def test_direct_attribution_adds_up_to_the_logit(decoder32) -> None:
    model = decoder32
    for text in PROMPTS:
        ids = sm.encode(model, text)
        logits = sm.forward(model, ids).logits[-1]
        top, second = logits.topk(2).indices.tolist()
        parts = at.decompose(model, at.trace(model, ids))
        for target in (at.LogitTarget(top), at.LogitTarget(top, second)):
            dla = at.direct_attribution(model, parts, target)
            real = float(logits[top] - (0.0 if target.minus_id is None else logits[second]))
            assert dla.contributions.heads.shape == (30, 9) and dla.contributions.mlps.shape == (30,)
            assert dla.contributions.total == pytest.approx(real, abs=1e-3), text
            assert dla.contributions.summed() == pytest.approx(real, abs=1e-3), text


def test_a_heads_copying_effect_is_its_direct_attribution_to_the_token_it_reads(decoder32) -> None:
    # decoder_measures.copying_effects against direct_attribution (itself checked against the logit above): a
    # head's effect on the logit of the token at its most-attended key, less its effect on the average token.
    model, length = decoder32, 8
    ids = dm.random_repeated_tokens(length, torch.Generator().manual_seed(0), model.config.vocab_size)
    attentions = sm.forward(model, ids, return_attentions=True).attentions
    traced = at.trace(model, ids, by_heads=True)
    effects = dm.copying_effects(model, traced, attentions, length)
    assert effects.shape == (30, 9, length - 1)
    average = model.weights.embeddings.float().mean(dim=0)
    assert torch.allclose(dm.average_embedding(model.weights.embeddings), average, atol=1e-6)
    for layer, head, query in ((17, 4, 0), (23, 7, 3), (2, 5, 6)):
        position = length + query
        read = 1 + int(attentions[layer, head, position, 1:].argmax())
        parts = at.decompose(model, traced, position)
        dla = at.direct_attribution(model, parts, at.LogitTarget(int(ids[read])))
        on_average = float(parts.heads[layer, head] @ (dla.scale * model.weights.final_norm * average))
        assert float(effects[layer, head, query]) == pytest.approx(
            float(dla.contributions.heads[layer, head]) - on_average, abs=1e-4
        )


def test_one_head_carries_the_name(decoder32) -> None:
    # Issue 42's finding (transformers, float32): on name prompts layer 23 head 3 writes most of " Bob" - " Alice".
    model = decoder32
    bob, alice = (int(sm.encode(model, name)[0]) for name in (" Bob", " Alice"))
    dla = at.direct_attribution(
        model, at.decompose(model, at.trace(model, sm.encode(model, NAMES))), at.LogitTarget(bob, alice)
    )
    (layer, head, value), runner_up = dla.contributions.top_heads(2)
    assert (layer, head) == (23, 3) and value > 0.5 * dla.contributions.total and value > 3 * runner_up[2]
