"""Thread safety of seeded computations, and the messages students see for bad input."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

import core
from tests.conftest import gen


def seeded_run(seed: int) -> torch.Tensor:
    """What one dashboard session computes: modules, dropout and Monte Carlo, all seeded."""
    x = core.embed_text("the cat sat on the mat", 6, seed=seed).embeddings.unsqueeze(0)
    mha = core.MultiHeadAttention(6, 6, 8, 0.3, 3, generator=gen(seed)).train()
    trace = mha.trace(x, generator=gen(seed + 1))
    variance = core.dot_product_variance([4, 16], 2_000, gen(seed + 2))
    v1 = core.SelfAttention_v1(6, 4, generator=gen(seed))(x[0])
    return torch.cat(
        [
            trace.output.flatten(),
            trace.dropout_mask.float().flatten(),
            torch.tensor(variance.unscaled_var.values, dtype=torch.float32),
            v1.flatten(),
        ]
    ).detach()


def test_eight_threads_while_global_rng_is_reseeded() -> None:
    seeds = list(range(8))
    expected = {s: seeded_run(s) for s in seeds}
    stop = threading.Event()

    def vandal() -> None:  # keeps disturbing torch's global RNG
        i = 0
        while not stop.is_set():
            torch.manual_seed(i)
            torch.rand(50)
            i += 1

    spoiler = threading.Thread(target=vandal, daemon=True)
    spoiler.start()
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(seeded_run, seeds * 4))
    finally:
        stop.set()
        spoiler.join()
    for seed, result in zip(seeds * 4, results, strict=True):
        assert torch.equal(result, expected[seed])


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: core.MultiHeadAttention(3, 5, 6, 0.0, 2), "divisible by the number of heads"),
        (lambda: core.CausalAttention(3, 2, 6, 1.0), "dropout rate"),
        (lambda: core.CausalAttention(3, 2, 6, -0.1), "dropout rate"),
        (lambda: core.MultiHeadAttention(3, 4, 6, float("nan"), 2), "dropout rate"),
        (lambda: core.SelfAttention_v1(0, 2), "at least 1"),
        (lambda: core.embed_text("", 3, 1), "empty"),
        (lambda: core.embed_text("   ", 3, 1), "empty"),
        (lambda: core.embed_text("word " * 40, 3, 1), "limit is 24"),
        (lambda: core.embed_text("x" * 10_000, 3, 1), "characters"),
        (lambda: core.embed_text("hi", 0, 1), "d_in"),
        (lambda: core.resolve_device("tpu"), "Unknown device"),
        (lambda: core.dot_product_variance([4], 10**9), "trials"),
        (lambda: core.draw_qkv_weights(3, 2, distribution="cauchy"), "distribution"),
    ],
)
def test_bad_input_raises_clear_value_error(build, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


def test_too_many_tokens_for_context_length() -> None:
    ca = core.CausalAttention(3, 2, 4, 0.0, generator=gen(0))
    with pytest.raises(ValueError, match="context_length=4"):
        ca(torch.rand(1, 6, 3))


def test_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="same width d_k"):
        core.scaled_dot_product_attention(torch.rand(3, 4), torch.rand(3, 5), torch.rand(3, 5))
    with pytest.raises(ValueError, match="Every key needs a value"):
        core.scaled_dot_product_attention(torch.rand(3, 4), torch.rand(3, 4), torch.rand(2, 4))
    with pytest.raises(ValueError, match="width d_in=3"):
        core.SelfAttention_v2(3, 2, generator=gen(0))(torch.rand(6, 4))
    with pytest.raises(ValueError, match="between 0 and 5"):
        core.dot_scores_for_query(torch.rand(6, 3), 6)


def test_resolve_device() -> None:
    assert core.resolve_device("cpu") == torch.device("cpu")
    assert core.resolve_device("auto").type in {"cpu", "cuda"}
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no usable NVIDIA GPU"):
            core.resolve_device("cuda")
    else:
        assert core.resolve_device("cuda").type == "cuda"
    assert core.available_devices()[0] == "cpu"


FIRST_USE_AT_ONCE = """
import importlib, threading
import torch

uses = {
    "core.models.tiny_transformer": lambda m: m.make_embedding(10, 4, torch.Generator().manual_seed(0)),
    "core.models.tiny_seq2seq": lambda m: m.make_embedding(10, 4, torch.Generator().manual_seed(0)),
    "core.attention.long_context": lambda m: m.peak_bytes(lambda: torch.ones(64), torch.device("cpu")),
}
start = threading.Barrier(2 * len(uses))
errors = []

def first_use(name, use):
    start.wait()
    try:
        use(importlib.import_module(name))
    except BaseException as error:
        errors.append(f"{name}: {error!r}"[:300])

threads = [threading.Thread(target=first_use, args=item) for item in list(uses.items()) * 2]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(errors)
raise SystemExit(1 if errors else 0)
"""


@pytest.mark.slow  # a fresh interpreter: the first use must be the first in the process
def test_sessions_first_using_the_tiny_models_and_the_profiler_at_once() -> None:
    """A class opening lessons 7, 8 and 9 on a fresh server: sessions' threads import those lessons' modules
    and use them at once. PyTorch imported torch._dynamo lazily there (a layer built on the meta device, the
    CPU profiler), and two threads doing that import at once got an ImportError (the lesson's error box);
    two profiling at once crashed the process. Issue 40's load runs found both."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", FIRST_USE_AT_ONCE], cwd=root, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
