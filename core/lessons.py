"""What each lesson page shows, computed from the sidebar's `Settings`.

Pages only draw; every number comes from a function here. Each returns plain data
(DataFrames, floats, small tensors on the CPU) so results can be cached per setting.
`checks` dicts name the tensors a lesson's "Code" snippet must reproduce.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
import torch

from core import functional as fn
from core import simple, stats
from core.device import resolve_device
from core.examples import (
    BOOK_CAUSAL_MASKED_SCORES,
    BOOK_CAUSAL_WEIGHTS,
    Example,
    cats_example,
    embed_text,
    random_second_sequence,
)
from core.modules import (
    CausalAttention,
    CrossAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    SelfAttention_v1,
    SelfAttention_v2,
    SimpleAverageSelfAttention,
    count_parameters,
    draw_qkv_weights,
    multihead_from_wrapper,
    multihead_parameter_count,
    v1_from_v2,
)
from core.settings import Settings, load_example


def generator(seed: int) -> torch.Generator:
    """A private CPU generator: never the global RNG (sessions share one process)."""
    return torch.Generator().manual_seed(int(seed))


def matrix_frame(
    matrix: torch.Tensor, rows: list[str] | tuple[str, ...], cols: list[str] | tuple[str, ...]
) -> pd.DataFrame:
    """(R, C) tensor -> long DataFrame with row, col, value, row_index, col_index."""
    values = matrix.detach().cpu().double()
    num_rows, num_cols = values.shape
    return pd.DataFrame(
        {
            "row": [rows[i] for i in range(num_rows) for _ in range(num_cols)],
            "col": [cols[j] for _ in range(num_rows) for j in range(num_cols)],
            "value": values.flatten().numpy(),
            "row_index": [i for i in range(num_rows) for _ in range(num_cols)],
            "col_index": [j for _ in range(num_rows) for j in range(num_cols)],
        }
    )


def unique_labels(tokens: tuple[str, ...] | list[str]) -> list[str]:
    """Token labels made unique for chart axes: 'the', 'cat', 'the (2)'."""
    seen: dict[str, int] = {}
    labels = []
    for token in tokens:
        seen[token] = seen.get(token, 0) + 1
        labels.append(token if seen[token] == 1 else f"{token} ({seen[token]})")
    return labels


def token_labels(settings: Settings) -> list[str]:
    """The (unique) token labels of the current input: what a page needs before choosing a query."""
    return unique_labels(load_example(settings).tokens)


def dims(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i + 1}" for i in range(n)]


@dataclass
class Lesson:
    """A lesson's data: frames to chart, scalars to print, tensors the code must match."""

    tokens: list[str]
    frames: dict[str, pd.DataFrame] = field(default_factory=dict)
    values: dict[str, object] = field(default_factory=dict)
    checks: dict[str, torch.Tensor] = field(default_factory=dict)


def _inputs(settings: Settings) -> tuple[Example, torch.Tensor, torch.device]:
    example = load_example(settings)
    device = resolve_device(settings.device)
    return example, example.embeddings.to(device), device


def _cpu(t: torch.Tensor) -> torch.Tensor:
    return t.detach().cpu()


# ----------------------------------------------------------------- 2. attention without weights
def simple_lesson(settings: Settings, query_index: int, logit_scale: float = 1.0) -> Lesson:
    example, x, _ = _inputs(settings)
    tokens = unique_labels(example.tokens)
    query_index = min(max(0, int(query_index)), len(tokens) - 1)
    scores = simple.dot_scores(x)  # (T, T)
    cosine = simple.cosine_similarity(x)
    row = scores[query_index]
    scaled_row = row * float(logit_scale)
    methods = {
        "divide by sum": simple.normalize_by_sum(scaled_row),
        "naive softmax": simple.softmax_naive(scaled_row),
        "stable softmax": simple.softmax_stable(scaled_row),
    }
    weights = torch.softmax(scores, dim=-1)
    context = simple.context_vectors(x, weights)
    loop_context = simple.context_vector_loop(x, weights, query_index)
    lesson = Lesson(tokens)
    lesson.frames["dots"] = pd.DataFrame(
        {"token": tokens, "dot product": _cpu(row).numpy(), "cosine similarity": _cpu(cosine[query_index]).numpy()}
    )
    lesson.frames["norms"] = pd.DataFrame(
        [
            {"token": tokens[j], "method": name, "weight": float(w[j])}
            for name, w in methods.items()
            for j in range(len(tokens))
        ]
    )
    lesson.frames["inputs"] = matrix_frame(x, tokens, dims("x", x.shape[1]))
    lesson.frames["scores"] = matrix_frame(scores, tokens, tokens)
    lesson.frames["weights"] = matrix_frame(weights, tokens, tokens)
    lesson.frames["context"] = matrix_frame(context, tokens, dims("z", x.shape[1]))
    lesson.values.update(
        query_index=query_index,
        naive_overflows=bool(torch.isnan(methods["naive softmax"]).any()),
        overflow_at=simple.naive_softmax_overflow_threshold(),
        max_scaled_score=float(scaled_row.max()),
        loop_equals_matrix=bool(torch.allclose(loop_context, context[query_index], atol=1e-6)),
        loop_scores_equal=bool(torch.allclose(simple.dot_scores_loop(x), scores, atol=1e-6)),
        query_context=_cpu(context[query_index]).tolist(),
    )
    lesson.checks.update(scores=_cpu(scores), weights=_cpu(weights), context=_cpu(context))
    return lesson


# ----------------------------------------------------------------- 3. trainable weights
def _projected(settings: Settings, x: torch.Tensor) -> tuple[fn.AttentionTrace, dict[str, torch.Tensor]]:
    """Queries/keys/values with the preset's weight layout, traced."""
    g = generator(settings.seed)
    scheme = settings.preset_info.weights
    d_in = x.shape[-1]
    if scheme == "randn":
        w_q, w_k, w_v = (
            w.to(x.device) for w in draw_qkv_weights(d_in, settings.d_out, distribution="randn", generator=g)
        )
        trace = fn.scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v, scale=settings.scale_factor)
        return trace, {"W_query": w_q, "W_key": w_k, "W_value": w_v}
    if scheme == "rand_w_at_x":
        module = CrossAttention(d_in, settings.d_out, settings.d_out + 4, generator=g).to(x.device)
        trace = module.trace(x, x, scale=settings.scale_factor)
        return trace, {"W_query": module.W_query.T, "W_key": module.W_key.T, "W_value": module.W_value.T}
    module = SelfAttention_v1(d_in, settings.d_out, generator=g).to(x.device)
    trace = module.trace(x, scale=settings.scale_factor)
    return trace, {"W_query": module.W_query, "W_key": module.W_key, "W_value": module.W_value}


def trainable_lesson(settings: Settings, query_index: int) -> Lesson:
    example, x, _ = _inputs(settings)
    tokens = unique_labels(example.tokens)
    query_index = min(max(0, int(query_index)), len(tokens) - 1)
    with torch.no_grad():
        trace, weights = _projected(settings, x)
        v2 = SelfAttention_v2(x.shape[-1], settings.d_out, generator=generator(settings.seed)).to(x.device)
        v1_fresh = SelfAttention_v1(x.shape[-1], settings.d_out, generator=generator(settings.seed)).to(x.device)
        v1_copied = v1_from_v2(v2).to(x.device)
        v2_out, v1_out, copied_out = v2(x), v1_fresh(x), v1_copied(x)
    d_k, d_v = trace.keys.shape[-1], trace.values.shape[-1]
    lesson = Lesson(tokens)
    for name, w in weights.items():
        lesson.frames[name] = matrix_frame(w, dims("in", w.shape[0]), dims("out", w.shape[1]))
    lesson.frames["queries"] = matrix_frame(trace.queries, tokens, dims("q", d_k))
    lesson.frames["keys"] = matrix_frame(trace.keys, tokens, dims("k", d_k))
    lesson.frames["values"] = matrix_frame(trace.values, tokens, dims("v", d_v))
    lesson.frames["scores"] = matrix_frame(trace.scores, tokens, tokens)
    lesson.frames["scaled_scores"] = matrix_frame(trace.scaled_scores, tokens, tokens)
    lesson.frames["weights"] = matrix_frame(trace.weights, tokens, tokens)
    lesson.frames["context"] = matrix_frame(trace.context, tokens, dims("z", d_v))
    lesson.frames["one_query"] = pd.DataFrame(
        {
            "token": tokens,
            "score": _cpu(trace.scores[query_index]).numpy(),
            "scaled score": _cpu(trace.scaled_scores[query_index]).numpy(),
            "weight": _cpu(trace.weights[query_index]).numpy(),
        }
    )
    lesson.frames["v1_vs_v2"] = pd.DataFrame(
        {
            "token": tokens,
            **{f"v1 (own init) z{j + 1}": _cpu(v1_out[:, j]).numpy() for j in range(v1_out.shape[1])},
            **{f"v2 z{j + 1}": _cpu(v2_out[:, j]).numpy() for j in range(v2_out.shape[1])},
            **{f"v1 with v2's weights z{j + 1}": _cpu(copied_out[:, j]).numpy() for j in range(v2_out.shape[1])},
        }
    )
    lesson.values.update(
        query_index=query_index,
        d_k=d_k,
        d_v=d_v,
        scale=trace.scale,
        query_vector=_cpu(trace.queries[query_index]).tolist(),
        query_context=_cpu(trace.context[query_index]).tolist(),
        v1_copied_max_diff=float((copied_out - v2_out).abs().max()),
        v1_fresh_max_diff=float((v1_out - v2_out).abs().max()),
    )
    lesson.checks.update(
        queries=_cpu(trace.queries),
        keys=_cpu(trace.keys),
        values=_cpu(trace.values),
        weights=_cpu(trace.weights),
        context=_cpu(trace.context),
    )
    return lesson


# ----------------------------------------------------------------- 4. why scale
SEED_001_SCORES = (0.1, -0.2, 0.3, -0.2, 0.5)  # seed 001's ×8 example


def scaling_variance(seed: int, trials: int) -> Lesson:
    """Monte Carlo variance of q.k, drawn from `generator(seed)` (the Code box repeats it)."""
    variance = stats.dot_product_variance(stats.DEFAULT_DIMS, trials, generator(seed))
    lesson = Lesson([])
    lesson.frames["variance"] = variance
    lesson.values["trials"] = int(trials)
    lesson.checks.update(
        unscaled_var=torch.tensor(variance.unscaled_var.values),
        scaled_var=torch.tensor(variance.scaled_var.values),
    )
    return lesson


def scaling_peakiness(seed: int) -> pd.DataFrame:
    """Peakiness vs d_k, scaling on and off, for random queries against 8 keys."""
    return stats.peakiness_vs_dk(stats.DEFAULT_DIMS, num_keys=8, trials=1_000, generator=generator(seed + 1))


def scaling_sweep(multiplier: float) -> Lesson:
    """softmax(m · scores) for seed 001's scores at m = 1, 2, 4, 8, 16 and the chosen m."""
    multipliers = sorted({1.0, 2.0, 4.0, 8.0, 16.0, float(multiplier)})
    weights, summary = stats.softmax_multiplier_sweep(torch.tensor(SEED_001_SCORES), multipliers)
    at = summary[summary.multiplier == float(multiplier)].iloc[0]
    lesson = Lesson([f"x{i + 1}" for i in range(len(SEED_001_SCORES))])
    lesson.frames.update(sweep=weights, sweep_summary=summary, saturation=stats.saturation_sweep())
    lesson.values.update(
        multiplier=float(multiplier), max_weight=float(at.max_weight), effective_tokens=float(at.effective_tokens)
    )
    return lesson


# ----------------------------------------------------------------- 5. causal attention and dropout
def causal_lesson(settings: Settings, perturb_position: int, training: bool) -> Lesson:
    example, x, device = _inputs(settings)
    tokens = unique_labels(example.tokens)
    num_tokens = len(tokens)
    batch = x.unsqueeze(0)  # (1, T, d_in)
    module = CausalAttention(
        x.shape[-1], settings.d_out, num_tokens, settings.dropout, generator=generator(settings.seed)
    ).to(device)
    with torch.no_grad():
        module.eval()
        trace = module.trace(batch, scale=settings.scale_factor)
        scaled = trace.scaled_scores[0]  # (T, T)
        after = fn.mask_after_softmax(scaled)
        before = fn.mask_before_softmax(scaled)
        buggy = fn.mask_with_classic_bug(scaled.clone())
        position = min(max(1, int(perturb_position)), num_tokens - 1) if num_tokens > 1 else 0
        changed = batch.clone()
        noise = torch.randn(x.shape[-1], generator=generator(settings.seed + 7)).to(device)
        changed[0, position] += 3.0 * noise
        original_out, changed_out = module(batch)[0], module(changed)[0]
        module.train(training)
        dropped = module.trace(batch, generator=generator(settings.seed + 1), scale=settings.scale_factor)
    row_change = (changed_out - original_out).abs().amax(dim=-1)  # (T,)
    lesson = Lesson(tokens)
    lesson.frames.update(
        scaled_scores=matrix_frame(scaled, tokens, tokens),
        softmax_all=matrix_frame(after["weights"], tokens, tokens),
        after=matrix_frame(after["renormalised"], tokens, tokens),
        before=matrix_frame(before, tokens, tokens),
        difference=matrix_frame(after["renormalised"] - before, tokens, tokens),
        buggy=matrix_frame(buggy, tokens, tokens),
        dropped=matrix_frame(dropped.dropped_weights[0], tokens, tokens),
        leakage=pd.DataFrame({"token": tokens, "position": range(num_tokens), "max change": _cpu(row_change).numpy()}),
    )
    simple_avg = SimpleAverageSelfAttention(4).attention_weights(4)
    _, chunk = cats_example()
    lesson.frames["simple_average"] = matrix_frame(simple_avg, list(chunk.inputs), list(chunk.inputs))
    lesson.frames["shift"] = pd.DataFrame(
        [{"context (input)": " ".join(ctx), "next token (target)": target} for ctx, target in chunk.pairs()]
    )
    if settings.preset == "book":
        lesson.frames["book_weights"] = matrix_frame(BOOK_CAUSAL_WEIGHTS, tokens, tokens)
        lesson.frames["book_renormalised"] = matrix_frame(
            fn.renormalise_rows(BOOK_CAUSAL_WEIGHTS, fn.causal_mask(6, 6)), tokens, tokens
        )
        lesson.frames["book_minus_inf"] = matrix_frame(
            torch.softmax(BOOK_CAUSAL_MASKED_SCORES / 2**0.5, dim=-1), tokens, tokens
        )
    kept = dropped.dropout_mask
    lesson.values.update(
        max_method_difference=float((after["renormalised"] - before).abs().max()),
        perturb_position=position,
        earlier_unchanged=bool(torch.all(row_change[:position] == 0)),
        later_changed=bool(torch.all(row_change[position:] > 0)),
        bug_future_mass=float(buggy.triu(diagonal=1).sum(dim=-1).mean()),
        training=training,
        kept_fraction=None if kept is None else float(kept.float().mean()),
        rescale=1.0 / (1.0 - settings.dropout) if settings.dropout < 1 else float("inf"),
        batch_shapes=[
            ("inputs, one sentence", list(x.shape)),
            ("batch = stack((inputs, inputs))", [2, *x.shape]),
            ("queries / keys / values", [2, num_tokens, settings.d_out]),
            ("attn_scores = queries @ keys.transpose(1, 2)", [2, num_tokens, num_tokens]),
            ("context_vecs", [2, num_tokens, settings.d_out]),
        ],
    )
    lesson.checks.update(weights=_cpu(before), dropped=_cpu(dropped.dropped_weights[0]))
    return lesson


# ----------------------------------------------------------------- 6. multi-head attention
def multihead_lesson(settings: Settings) -> Lesson:
    example, x, device = _inputs(settings)
    tokens = unique_labels(example.tokens)
    num_tokens, d_in = x.shape
    batch = x.unsqueeze(0)
    heads, d_out = settings.num_heads, settings.d_out
    mha = MultiHeadAttention(d_in, d_out, num_tokens, settings.dropout, heads, generator=generator(settings.seed))
    mha = mha.to(device).eval()
    head_dim = d_out // heads
    wrapper = (
        MultiHeadAttentionWrapper(
            d_in, head_dim, num_tokens, settings.dropout, heads, generator=generator(settings.seed)
        )
        .to(device)
        .eval()
    )
    with torch.no_grad():
        trace = mha.trace(batch, scale=settings.scale_factor)
        wrapped = wrapper(batch)
        stacked = multihead_from_wrapper(wrapper).to(device).eval()(batch)
    frames = [matrix_frame(trace.weights[0, h], tokens, tokens).assign(head=f"head {h + 1}") for h in range(heads)]
    lesson = Lesson(tokens)
    lesson.frames["head_weights"] = pd.concat(frames, ignore_index=True)
    lesson.frames["output"] = matrix_frame(trace.output[0], tokens, dims("z", d_out))
    b = 1
    lesson.values.update(
        head_dim=head_dim,
        wrapper_max_diff=float((wrapped - stacked).abs().max()),
        wrapper_width=int(wrapped.shape[-1]),
        params=count_parameters(mha),
        params_wrapper=count_parameters(wrapper),
        gpt2_params=multihead_parameter_count(768, 768),
        shape_steps=[
            ("x", "input batch", [b, num_tokens, d_in]),
            ("queries = W_query(x)", "one projection for all heads", [b, num_tokens, d_out]),
            ("queries.view(b, T, h, hd)", "split the width into heads", [b, num_tokens, heads, head_dim]),
            ("queries.transpose(1, 2)", "heads become a batch axis", [b, heads, num_tokens, head_dim]),
            ("queries @ keys.transpose(2, 3)", "scores per head", [b, heads, num_tokens, num_tokens]),
            ("attn_weights @ values", "context per head", [b, heads, num_tokens, head_dim]),
            ("context.transpose(1, 2)", "tokens first again", [b, num_tokens, heads, head_dim]),
            (".contiguous().view(b, T, d_out)", "heads side by side", [b, num_tokens, d_out]),
            ("out_proj(context)", "mix the heads", [b, num_tokens, d_out]),
        ],
    )
    lesson.checks.update(weights=_cpu(trace.weights[0]), output=_cpu(trace.output[0]))
    return lesson


# ----------------------------------------------------------------- 7. cross-attention
DEFAULT_SECOND_TEXT = "Das Leben ist kurz, iss den Nachtisch zuerst"


def cross_lesson(settings: Settings, second_text: str, d_v: int) -> Lesson:
    example, x, device = _inputs(settings)
    tokens = unique_labels(example.tokens)
    d_in = x.shape[-1]
    g = generator(settings.seed)
    module = CrossAttention(d_in, settings.d_out, int(d_v), generator=g).to(device)
    if settings.preset == "article":
        second = random_second_sequence(8, d_in, generator=g).to(device)  # seed 003: rand(8, 16)
        second_tokens = [f"s{i + 1}" for i in range(8)]
    else:
        other = embed_text(second_text, d_in, settings.seed)
        second, second_tokens = other.embeddings.to(device), unique_labels(other.tokens)
    with torch.no_grad():
        trace = module.trace(x, second, scale=settings.scale_factor)
    lesson = Lesson(tokens)
    lesson.frames["weights"] = matrix_frame(trace.weights, tokens, second_tokens)
    lesson.frames["output"] = matrix_frame(trace.output, tokens, dims("z", int(d_v)))
    lesson.values.update(
        second_tokens=second_tokens,
        shapes={
            "queries": list(trace.queries.shape),
            "keys": list(trace.keys.shape),
            "values": list(trace.values.shape),
            "weights": list(trace.weights.shape),
            "context": list(trace.output.shape),
        },
    )
    lesson.checks.update(weights=_cpu(trace.weights), context=_cpu(trace.output))
    return lesson
