"""From attention to the answer (issue 42): what the attribution lesson's computations cost on SmolLM2-135M, float32.

    python -m bench.attribution        # one run, one intra-op thread: ~2-4 minutes on 2 busy cores
    python -m bench.attribution --app  # the same on the app's 4-bit model, as lesson 11 runs it (`by_heads`)
    python -m bench.attribution --agreement  # top heads by attribution and by patching on AGREEMENT_PROMPTS

All in Precision.FLOAT32 (the lesson's numbers are float32 ones), on a 64-token story that ends in a name
("... Alice gave the heavy book to"), corrupted by swapping the repeated name (core.models.patching).

lens_dla        trace + residual decomposition + logit lens (60 points) + direct logit attribution of
                " Bob" - " Alice", against one analysis forward (`smollm2.forward` with every head's weights,
                as the other lessons run it); calls interleaved (ABAB...), ratio of medians (target <= 1.5x).
attribution     attribution patching from the two prompts: both runs traced, then one forward and one
                backward for all heads, against the same analysis forward (target <= 3x); and the forward
                and backward alone, given the traced runs (which the page computes once for both runs'
                logit differences, the exact map and direct attribution).
exact           exact patching of all 270 heads (9 heads of a layer in one batch of 9 sequences), once
                (target <= 40 s). The two prompts share their first 58 tokens, which are computed once;
                `exact_no_shared_prefix_s` times a pair that differs from the first token on (the worst case).
agreement       the top heads by direct attribution, exact and attribution patching; r between the two maps.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import torch

from bench.smollm2 import _interleaved  # medians of calls run in turn, as the decoder's benchmark times them

TEXT = (
    "On a rainy Saturday morning the small library on the corner was almost empty. Alice and Bob had come early "
    "to study together for their difficult history exam next Monday, and they quietly sat at the long wooden table "
    "near the window. After an hour of reading about old kingdoms and their many wars, Alice gave the heavy book to"
)
TOKENS = 64


def _timed(call: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def run(repeats: int = 5, app: bool = False) -> dict:
    """app: the app's model (4-bit blocks) with each layer's W_O dequantized for the heads' parts (`by_heads`),
    as lesson 11 runs it; else float32 weights."""
    from core.models import attribution as at
    from core.models import patching as pt
    from core.models import smollm2 as sm

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = sm.load_model() if app else sm.load_model(precision=sm.Precision.FLOAT32)
        corruption = pt.suggest_corruption(model, TEXT)
        assert corruption is not None
        contrast = corruption.contrast(model)
        assert contrast is not None
        clean, corrupted = sm.encode(model, TEXT), sm.encode(model, corruption.corrupted_text)
        assert clean.numel() == TOKENS, clean.numel()
        target = at.LogitTarget(contrast.answer_id, contrast.other_id)

        def lens_dla() -> at.DirectAttribution:
            traced = at.trace(model, clean, by_heads=app)
            at.logit_lens(model, traced)
            return at.direct_attribution(model, at.decompose(model, traced), target)

        def attribution() -> pt.PatchingResult:
            return pt.attribution_patching(model, pt.prepare_runs(model, clean, corrupted, contrast, by_heads=app))

        runs = pt.prepare_runs(model, clean, corrupted, contrast, by_heads=app)
        medians = _interleaved(
            {
                "analysis_forward": lambda: sm.forward(model, clean, return_attentions=True),
                "lens_dla": lens_dla,
                "attribution_patching": attribution,
                "attribution_patching_given_runs": lambda: pt.attribution_patching(model, runs),
            },
            repeats,
        )
        exact_s, exact = _timed(lambda: pt.exact_head_patching(model, runs))
        assert isinstance(exact, pt.PatchingResult)
        # The worst case for the shared prefix: the first token differs too ("On" -> "In").
        early = sm.encode(model, "In" + corruption.corrupted_text.removeprefix("On"))
        worst = pt.prepare_runs(model, clean, early, contrast, by_heads=app)
        worst_s, _ = _timed(lambda: pt.exact_head_patching(model, worst))
        estimate = attribution()
        direct = lens_dla()
    finally:
        torch.set_num_threads(threads)
    base = medians["analysis_forward"]
    pair = torch.stack((exact.restored.flatten(), estimate.restored.flatten()))  # (2, L * H)
    return {
        "threads": 1,
        "tokens": TOKENS,
        "precision": model.precision.name.lower(),
        "contrast": [contrast.answer, contrast.other],
        "median_s": medians,
        "lens_dla_vs_forward": medians["lens_dla"] / base,
        "attribution_patching_vs_forward": medians["attribution_patching"] / base,
        "attribution_patching_given_runs_vs_forward": medians["attribution_patching_given_runs"] / base,
        "exact_patching_s": exact_s,
        "exact_shared_prefix_tokens": runs.first_difference,
        "exact_no_shared_prefix_s": worst_s,
        "exact_no_shared_prefix_first_difference": worst.first_difference,
        "differences": {"clean": runs.clean_difference, "corrupted": runs.corrupted_difference},
        "top_heads": {
            "direct_attribution": direct.contributions.top_heads(3),
            "exact_patching": exact.top_heads(3),
            "attribution_patching": estimate.top_heads(3),
        },
        "exact_vs_attribution_r": float(torch.corrcoef(pair)[0, 1]),
    }


AGREEMENT_PROMPTS = (
    "Alice met Bob. Alice gave the book to",  # lesson 11's opening prompt
    "When Mary and John went to the store, John gave a drink to",
    "Tom and Sarah had lunch in the park. Tom handed the sandwich to",
)


def agreement(prompts: tuple[str, ...] = AGREEMENT_PROMPTS, top: int = 3) -> list[dict]:
    """For each prompt (float32, one thread): the contrast the lesson suggests, both runs' logit differences, the
    top heads by direct logit attribution, by exact patching and by attribution patching, how many of the top
    heads the two patching maps share, and r between them (issue 42's "Done when")."""
    from core.models import attribution as at
    from core.models import patching as pt
    from core.models import smollm2 as sm

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    found = []
    try:
        model = sm.load_model(precision=sm.Precision.FLOAT32)
        for text in prompts:
            corruption = pt.suggest_corruption(model, text)
            assert corruption is not None, text
            contrast = corruption.contrast(model)
            assert contrast is not None, text
            clean, corrupted = sm.encode(model, text), sm.encode(model, corruption.corrupted_text)
            runs = pt.prepare_runs(model, clean, corrupted, contrast)
            exact = pt.exact_head_patching(model, runs)
            estimate = pt.attribution_patching(model, runs)
            traced = at.trace(model, clean)
            target = at.LogitTarget(contrast.answer_id, contrast.other_id)
            direct = at.direct_attribution(model, at.decompose(model, traced), target)
            pair = torch.stack((exact.restored.flatten(), estimate.restored.flatten()))  # (2, L * H)
            tops = {
                "direct_attribution": direct.contributions.top_heads(top),
                "exact_patching": exact.top_heads(top),
                "attribution_patching": estimate.top_heads(top),
            }
            heads = {name: {(layer, head) for layer, head, _ in found_heads} for name, found_heads in tops.items()}
            found.append(
                {
                    "prompt": text,
                    "corrupted": corruption.corrupted_text,
                    "contrast": [contrast.answer, contrast.other],
                    "differences": {"clean": runs.clean_difference, "corrupted": runs.corrupted_difference},
                    "top_heads": tops,
                    "shared_exact_attribution_patching": len(heads["exact_patching"] & heads["attribution_patching"]),
                    "shared_exact_patching_direct": len(heads["exact_patching"] & heads["direct_attribution"]),
                    "exact_vs_attribution_r": float(torch.corrcoef(pair)[0, 1]),
                }
            )
    finally:
        torch.set_num_threads(threads)
    return found


def rows(measured: dict | None, ok) -> list[tuple[str, str, str, str]]:
    """bench/README.md's rows (`python -m bench.run --only attribution`): measured = {"float32": run(),
    "app": run(app=True)}. The targets are judged on the app's model, which lesson 11 runs, and on the whole
    attribution patching (both runs traced), which a student waits for on a new pair of prompts."""
    if not measured:
        return []
    f32, app = measured["float32"], measured["app"]
    both = lambda key: f"{app[key]:.2f}x (float32 weights: {f32[key]:.2f}x)"  # noqa: E731
    return [
        (
            f"Attribution (lesson 11; SmolLM2 4-bit, {app['tokens']} tokens, one thread): trace + decomposition + "
            "logit lens + direct attribution / one analysis forward",
            both("lens_dla_vs_forward"),
            "<= 1.5x",
            ok(app["lens_dla_vs_forward"] <= 1.5),
        ),
        (
            "Attribution: attribution patching (both runs traced, one forward and one backward) / analysis forward",
            f"{both('attribution_patching_vs_forward')}; given the traced runs "
            f"{app['attribution_patching_given_runs_vs_forward']:.2f}x "
            f"({f32['attribution_patching_given_runs_vs_forward']:.2f}x)",
            "<= 3x",
            ok(app["attribution_patching_vs_forward"] <= 3),
        ),
        (
            "Attribution: exact patching of all 270 heads, prompts sharing their first "
            f"{app['exact_shared_prefix_tokens']} tokens (differing from the first)",
            f"{app['exact_patching_s']:.1f} s ({app['exact_no_shared_prefix_s']:.1f} s); float32 weights "
            f"{f32['exact_patching_s']:.1f} s ({f32['exact_no_shared_prefix_s']:.1f} s)",
            "<= 40 s",
            ok(max(app["exact_no_shared_prefix_s"], app["exact_patching_s"]) <= 40),
        ),
        (
            "Attribution: top heads by exact / attribution patching on the 64-token story (4-bit); r between the maps",
            f"{_heads(app['top_heads']['exact_patching'])} / {_heads(app['top_heads']['attribution_patching'])}; "
            f"r = {app['exact_vs_attribution_r']:.3f}",
            "(reported)",
            "",
        ),
    ]


def _heads(found: list) -> str:
    return ", ".join(f"L{layer}H{head}" for layer, head, _ in found)


def main() -> None:
    import sys

    if "--agreement" in sys.argv[1:]:
        print(json.dumps(agreement(), indent=2))
        return
    print(json.dumps(run(app="--app" in sys.argv[1:]), indent=2))


if __name__ == "__main__":
    main()
