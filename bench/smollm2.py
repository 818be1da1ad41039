"""The GPT (SmolLM2-135M): our forward pass and generation vs transformers' GGUF model, memory, load time,
and what the heads do.

    python -m bench.smollm2            # one run: every ratio below from the same process, ~3-5 minutes

analysis    a 64-token text with every head's weights (30 x 9 maps): ours (the reference path) in the
            CPU default (Q4_BLOCKS) and in BFLOAT16 vs transformers' eager forward with
            output_attentions=True (float32); one intra-op thread, calls interleaved (ABAB...) so drift
            hits all alike; ratios of medians (target <= 1.5x).
generation  seconds per new token, greedy, 24 tokens after a chat prompt: ours (Q4_BLOCKS) with the KV
            cache, ours without it (the whole sequence each step), transformers' `generate` (its own
            cache) (target: ours with the cache <= 1.5x transformers, and faster than ours without).
memory      a fresh subprocess per precision: RSS after importing torch and the model code, after
            loading (cold load time), and after one 64-token analysis and one induction measurement
            (target <= 300 MiB).
precision   Q4_BLOCKS and BFLOAT16 against FLOAT32 on the 64-token text: the largest gap in next-token
            probability, attention weight, sink share, previous-token and induction score; top-1 agreement.
findings    the top induction heads on 30 seeded random tokens repeated twice, the loss on each copy,
            the sink share and the top previous-token heads on the 64-token text.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
TEXT = (
    "Attention lets every token look back at the tokens before it and decide which of them matter. "
    "In a decoder, a causal mask hides the future, so the model can be trained to predict each next "
    "token of a long text at once, and later generate new text one token at a time, reusing the keys "
    "and values it already computed."
)
TOKENS = 64
NEW_TOKENS = 24


def _rss_mib(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc")


def _interleaved(calls: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median seconds of each call, run in turn (ABAB...) after one warm-up each."""
    for call in calls.values():
        call()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def speed(repeats: int = 10) -> dict:
    from transformers import AutoModelForCausalLM  # the reference: benchmarks and tests only

    from core.models import smollm2 as sm
    from core.models.sampling import SamplingSettings

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = sm.load_model()
        model16 = sm.load_model(precision=sm.Precision.BFLOAT16)
        path = sm.default_path()
        start = time.perf_counter()
        reference = AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager"
        ).eval()
        transformers_load_s = time.perf_counter() - start
        ids = sm.encode(model, TEXT)[:TOKENS]
        assert ids.numel() == TOKENS, ids.numel()

        def theirs() -> object:
            with torch.inference_mode():
                return reference(ids[None], output_attentions=True).attentions

        analysis = _interleaved(
            {
                "ours_q4_blocks": lambda: sm.forward(model, ids, return_attentions=True),
                "ours_bfloat16": lambda: sm.forward(model16, ids, return_attentions=True),
                "transformers": theirs,
            },
            repeats,
        )
        prompt = sm.encode(model, sm.chat_prompt(model, [sm.ChatMessage(sm.Role.USER, "Tell me about the sea.")]))
        greedy = SamplingSettings(temperature=0.0)

        def ours(use_cache: bool) -> Callable[[], object]:
            return lambda: sm.generate(
                model,
                prompt,
                max_new_tokens=NEW_TOKENS,
                settings=greedy,
                generator=torch.Generator(),
                use_cache=use_cache,
                stop_at_eos=False,
            )

        def their_generate() -> object:
            with torch.inference_mode():
                return reference.generate(
                    prompt[None],
                    attention_mask=torch.ones(1, prompt.numel(), dtype=torch.long),
                    max_new_tokens=NEW_TOKENS,
                    min_new_tokens=NEW_TOKENS,
                    do_sample=False,
                    use_cache=True,
                    pad_token_id=model.config.eos_token_id,
                )

        generation = _interleaved(
            {"ours_cache": ours(True), "ours_no_cache": ours(False), "transformers_generate": their_generate},
            max(3, repeats // 3),
        )
    finally:
        torch.set_num_threads(threads)
    per_token = {name: seconds / NEW_TOKENS for name, seconds in generation.items()}
    return {
        "threads": 1,
        "analysis_tokens": TOKENS,
        "analysis_median_s": analysis,
        "analysis_q4_blocks_vs_transformers": analysis["ours_q4_blocks"] / analysis["transformers"],
        "analysis_bfloat16_vs_transformers": analysis["ours_bfloat16"] / analysis["transformers"],
        "prompt_tokens": int(prompt.numel()),
        "generation_s_per_token": per_token,
        "generation_cache_vs_transformers": per_token["ours_cache"] / per_token["transformers_generate"],
        "generation_cache_vs_no_cache": per_token["ours_cache"] / per_token["ours_no_cache"],
        "transformers_load_s": transformers_load_s,
    }


_MEMORY_PROBE = """
import gc, json, sys, time
sys.path.insert(0, ".")
import torch
from bench.smollm2 import TEXT, TOKENS, _rss_mib
from core.models import smollm2 as sm, decoder_measures as dm
gc.collect()
before = _rss_mib()
start = time.perf_counter()
model = sm.load_model(precision=sm.Precision[sys.argv[1]])
load_s = time.perf_counter() - start
gc.collect()
loaded = _rss_mib()
out = sm.forward(model, sm.encode(model, TEXT)[:TOKENS], return_attentions=True)
report = dm.induction_report(model, 30, torch.Generator().manual_seed(0))
del out, report
gc.collect()
print(json.dumps({"before_mib": before, "after_load_mib": loaded, "after_use_mib": _rss_mib(), "load_s": load_s}))
"""


def memory(precision: str) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", _MEMORY_PROBE, precision], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["extra_mib"] = result["after_use_mib"] - result["before_mib"]
    return result


def precision() -> dict:
    from core.models import decoder_measures as dm
    from core.models import smollm2 as sm

    reference = sm.load_model(precision=sm.Precision.FLOAT32)
    ids = sm.encode(reference, TEXT)[:TOKENS]
    induction_ids = dm.random_repeated_tokens(30, torch.Generator().manual_seed(0), reference.config.vocab_size)

    def measured(model: sm.SmolLM2) -> dict[str, torch.Tensor]:
        out = sm.forward(model, ids, return_attentions=True)
        repeated = sm.forward(model, induction_ids, return_attentions=True).attentions
        return {
            "probabilities": out.logits.softmax(-1),
            "attentions": out.attentions,
            "top1": out.logits.argmax(-1),
            "sink": dm.sink_share(out.attentions),
            "previous": dm.previous_token_score(out.attentions),
            "induction": dm.induction_score(repeated, 30),
        }

    exact = measured(reference)
    del reference
    result = {}
    for name in ("Q4_BLOCKS", "BFLOAT16"):
        ours = measured(sm.load_model(precision=sm.Precision[name]))
        gaps = {key: float((ours[key] - exact[key]).abs().max()) for key in exact if key != "top1"}
        gaps["top1_agreement"] = float((ours["top1"] == exact["top1"]).float().mean())
        result[name] = gaps
    return result


def findings(seed: int = 0, length: int = 30) -> dict:
    from core.models import decoder_measures as dm
    from core.models import smollm2 as sm

    model = sm.load_model()
    report = dm.induction_report(model, length, torch.Generator().manual_seed(seed))
    top = report.top_heads(5)
    heads = frozenset((layer, head) for layer, head, _ in top)
    ablation = dm.ablation_effect(model, report.token_ids, length, sm.Ablation(heads))
    out = sm.forward(model, sm.encode(model, TEXT)[:TOKENS], return_attentions=True)
    sink = dm.sink_share(out.attentions)
    previous = dm.previous_token_score(out.attentions)
    values, flat = previous.flatten().topk(5)
    return {
        "induction_top5": [{"layer": layer, "head": head, "score": round(s, 3)} for layer, head, s in top],
        "induction_median": float(report.scores.median()),
        "copy_loss": report.loss.__dict__,
        "ablating_top5_second_copy_loss": [ablation.loss_before, ablation.loss_after],
        "sink_share_mean": float(sink.mean()),
        "heads_over_half_on_sink": int((sink > 0.5).sum()),
        "previous_token_top5": [
            {"layer": int(i) // 9, "head": int(i) % 9, "score": round(float(v), 3)}
            for v, i in zip(values, flat, strict=True)
        ],
    }


def run(repeats: int = 10) -> dict:
    return {
        "memory": {name: memory(name) for name in ("Q4_BLOCKS", "BFLOAT16")},
        "speed": speed(repeats),
        "precision": precision(),
        "findings": findings(),
    }


def rows(measured: dict | None, ok) -> list[tuple[str, str, str, str]]:
    """bench/README.md's rows for the GPT (none until `bench.run --only gpt` has run once)."""
    if not measured:
        return []
    speed, memory, found = measured["speed"], measured["memory"]["Q4_BLOCKS"], measured["findings"]
    per_token = speed["generation_s_per_token"]
    top = ", ".join(f"L{h['layer']}H{h['head']} {h['score']:.2f}" for h in found["induction_top5"])
    return [
        (
            f"GPT (SmolLM2-135M): a {speed['analysis_tokens']}-token analysis with all 270 heads' weights, "
            "ours (4-bit) / transformers' eager forward (one thread)",
            f"{speed['analysis_q4_blocks_vs_transformers']:.2f}x",
            "<= 1.5x",
            ok(speed["analysis_q4_blocks_vs_transformers"] <= 1.5),
        ),
        (
            "GPT: time per generated token, ours with the KV cache / transformers' generate",
            f"{speed['generation_cache_vs_transformers']:.2f}x ({per_token['ours_cache'] * 1000:.0f} ms vs "
            f"{per_token['transformers_generate'] * 1000:.0f} ms)",
            "<= 1.5x",
            ok(speed["generation_cache_vs_transformers"] <= 1.5),
        ),
        (
            "GPT: ours with the KV cache / ours without it",
            f"{speed['generation_cache_vs_no_cache']:.2f}x ({per_token['ours_no_cache'] * 1000:.0f} ms without)",
            "< 1x",
            ok(speed["generation_cache_vs_no_cache"] < 1),
        ),
        (
            "GPT: resident memory the model adds once loaded and used (4-bit); cold load",
            f"+{memory['extra_mib']:.0f} MiB; {memory['load_s']:.1f} s "
            f"(transformers: {speed['transformers_load_s']:.0f} s)",
            "<= 300 MiB; a few seconds",
            ok(memory["extra_mib"] <= 300 and memory["load_s"] <= 10),
        ),
        (
            "GPT: top induction heads on 30 random tokens repeated (seed 0); loss on the first / second copy",
            f"{top}; {found['copy_loss']['first_loss']:.1f} / {found['copy_loss']['second_loss']:.1f} nats",
            "(reported)",
            "",
        ),
    ]


def main() -> None:
    print(json.dumps(run(), indent=2))


if __name__ == "__main__":
    main()
