"""Attention Lab: the frame. Navigation, the shared sidebar, and nothing else.

Every sidebar value survives page switches (persist_state="session") and lives in
the URL (bind="query-params"), so a teacher can share a link to exactly this view.
"""

from __future__ import annotations

import gc
import os
import time
from dataclasses import asdict, replace

import streamlit as st
import torch

from core.device import available_devices
from core.examples import MAX_TEXT_CHARS
from core.settings import LIMITS, PRESETS, Settings, check_link_params, load_example, settings_for_preset
from pages import _ui

# Sessions run in threads of one process; one intra-op thread each avoids oversubscribing the
# 1-2 cores of a small container when a class reruns at once (override with the variable).
torch.set_num_threads(int(os.environ.get("ATTENTION_LAB_TORCH_THREADS", "1")))

st.set_page_config(page_title="Attention Lab", page_icon=":material/visibility:", layout="wide")

# The default page is served at "/"; its url_path only reserves a name, so it gets one nobody
# links to, and /overview (the name a student would guess, or an old link has) serves the same
# file as a hidden page. (st.switch_page cannot forward: it clears the query parameters, which
# the bound sidebar widgets forbid.)
OVERVIEW = st.Page("pages/1_overview.py", title="Overview", icon=":material/home:", default=True, url_path="start")

PAGES = {
    "Start": [
        OVERVIEW,
        st.Page("pages/1_overview.py", title="Overview", url_path="overview", visibility="hidden"),
    ],
    "Attention step by step": [
        st.Page(
            "pages/2_without_weights.py",
            title="Attention without weights",
            icon=":material/looks_one:",
            url_path="without_weights",
        ),
        st.Page(
            "pages/3_trainable_weights.py",
            title="Trainable weights",
            icon=":material/looks_two:",
            url_path="trainable_weights",
        ),
        st.Page("pages/4_why_scale.py", title="Why scale by √d_k", icon=":material/looks_3:", url_path="why_scale"),
        st.Page(
            "pages/5_causal_dropout.py",
            title="Causal attention and dropout",
            icon=":material/looks_4:",
            url_path="causal_dropout",
        ),
        st.Page(
            "pages/6_multi_head.py", title="Multi-head attention", icon=":material/looks_5:", url_path="multi_head"
        ),
    ],
    "Going further": [
        st.Page(
            "pages/7_cross_attention.py",
            title="Cross-attention",
            icon=":material/compare_arrows:",
            url_path="cross_attention",
        ),
        st.Page(
            "pages/9_training_lab.py",
            title="Train it yourself",
            icon=":material/model_training:",
            url_path="training_lab",
        ),
    ],
}

# URL paths equal the file names without their number, as Streamlit derives them for a
# pages/ folder, so a first deep link that starts in legacy mode keeps its page (see pages/_ui.py).
# Which controls each page ignores, and the one-line reason shown beside them.
UNUSED: dict[str, dict[str, str]] = {
    "overview": {
        "d_out": "no projections on this page",
        "dropout": "no attention weights here",
        "num_heads": "no heads here",
        "scale": "no scores here",
        "device": "nothing to compute here",
    },
    "without_weights": {
        "d_out": "no weights: inputs are their own queries, keys and values",
        "dropout": "dropout arrives with causal attention",
        "num_heads": "one head only",
        "scale": "raw dot products, as in the sources' first version",
    },
    "trainable_weights": {
        "dropout": "dropout arrives with causal attention",
        "num_heads": "a single head on this page",
    },
    "why_scale": {
        "preset": "this page uses random vectors",
        "text": "this page uses random vectors",
        "d_in": "random vectors of every d_k are drawn",
        "d_out": "d_k is swept from 1 to 512",
        "dropout": "no dropout in these experiments",
        "num_heads": "no heads here",
        "device": "small experiments run on the CPU",
    },
    "causal_dropout": {"num_heads": "a single causal head on this page"},
    "multi_head": {},
    "cross_attention": {"dropout": "no dropout in this example", "num_heads": "a single head on this page"},
    "training_lab": {
        "preset": "the model trains on random token sequences",
        "text": "the model trains on random token sequences",
        "d_in": "the model's width is heads × d_k, set beside Train",
        "d_out": "d_k is set beside Train",
        "dropout": "no dropout while learning to copy",
        "num_heads": "heads are set beside Train",
        "scale": "scaling is switched beside Train, so two runs can differ only in it",
        "device": "training runs on the server's CPU",
    },
}


# Why the sliders stop where they do (caps chosen from bench/ measurements; README "Performance").
CAPS = {
    "d_in": "At most 64: wider embeddings stop fitting on a projector and slow every page for the class.",
    "d_out": "At most 64: wider projections stop fitting on a projector and slow every page for the class.",
    "num_heads": "At most 8 heads: one readable heatmap per head.",
}


def apply_preset() -> None:
    """on_change of the preset box: choosing a preset sets the sidebar to its values."""
    key = st.session_state.get("preset", "book")
    chosen = settings_for_preset(key, Settings(d_in=st.session_state.get("d_in", 3)))
    for name in ("d_in", "d_out", "seed", "dropout", "num_heads", "scale"):
        st.session_state[name] = getattr(chosen, name)


def restore_link() -> None:
    """Put back into the address bar any setting this session holds but the URL has lost.

    A page link clicked before the sidebar has finished painting (a slow laptop, a busy server)
    reaches the server without the query string. persist_state keeps the values, but the link
    would no longer share them, and the box could show its default. Writing a value back through
    session_state makes Streamlit re-send it to the widget and write it into the URL again.
    Only after a page switch: on the same page the URL follows the widgets by itself.
    (Reading the key first returns this run's value, including a change the student just made.)
    """
    for key, default in asdict(Settings()).items():  # the sidebar's keys are Settings' fields
        if key in st.session_state and key not in st.query_params and st.session_state[key] != default:
            st.session_state[key] = st.session_state[key]


def sidebar(page_key: str) -> Settings:
    unused = UNUSED.get(page_key, {})
    devices = available_devices()
    if "link_notes" not in st.session_state:  # first run of this session: check the link once
        problems = check_link_params(st.query_params.to_dict(), devices)
        st.session_state["link_notes"] = [message for _, message in problems]
    if st.session_state.get("page_key", page_key) != page_key:
        restore_link()
    st.session_state["page_key"] = page_key
    common = {"bind": "query-params", "persist_state": "session"}

    def off(name: str) -> dict:
        if name in unused:
            return {"disabled": True, "help": f"Not used here: {unused[name]}."}
        return {"disabled": False, "help": CAPS.get(name)}

    with st.sidebar:
        st.subheader("Settings")
        preset = st.selectbox(
            "Input (a source's worked example, or your own sentence)",
            list(PRESETS),
            key="preset",
            on_change=apply_preset,
            **common,
            **off("preset"),
        )
        st.caption(PRESETS[preset].label)
        custom = preset == "custom"
        text = st.text_input(
            "Your sentence",
            Settings().text,
            max_chars=MAX_TEXT_CHARS,
            key="text",
            **common,
            disabled=not custom or "text" in unused,
            help="Choose 'Your own sentence' above to type one." if not custom else None,
        )
        fixed_d_in = PRESETS[preset].d_in is not None and preset != "blog"
        d_in = st.slider(
            "d_in (embedding width)",
            *map(int, LIMITS["d_in"]),
            3,
            key="d_in",
            **common,
            disabled=fixed_d_in or "d_in" in unused,
            help="Fixed by the source's own embeddings." if fixed_d_in else off("d_in")["help"],
        )
        d_out = st.slider(
            "d_out (query/key/value width)", *map(int, LIMITS["d_out"]), 2, key="d_out", **common, **off("d_out")
        )
        # A float-typed box showing whole numbers: Streamlit's integer box crashes on a link
        # such as ?seed=1e9999 (it tries int(inf)); the float one ignores it, and we round.
        seed = st.number_input(
            "Seed",
            float(LIMITS["seed"][0]),
            float(LIMITS["seed"][1]),
            123.0,
            step=1.0,
            format="%.0f",
            key="seed",
            **common,
            **off("seed"),
        )
        dropout = st.slider(
            "Dropout rate", *LIMITS["dropout"], 0.0, step=0.05, key="dropout", **common, **off("dropout")
        )
        num_heads = st.slider("Heads", *map(int, LIMITS["num_heads"]), 2, key="num_heads", **common, **off("num_heads"))
        scale = st.toggle("Scale scores by 1/√d_k", True, key="scale", **common, **off("scale"))
        device = st.selectbox("Device", devices, key="device", **common, **off("device"))
        if unused:
            st.caption("Greyed out here: " + "; ".join(f"**{k}** ({v})" for k, v in unused.items()))
        for note in st.session_state["link_notes"]:
            st.warning(note, icon=":material/link_off:")
    return Settings(
        preset=preset,
        text=text or "",
        d_in=int(d_in),
        d_out=int(d_out),
        seed=int(round(seed)),
        dropout=float(dropout),
        num_heads=int(num_heads),
        scale=bool(scale),
        device=device,
    )


def usable(settings: Settings) -> Settings:
    """Fall back to the book's example when the student's sentence cannot be used."""
    st.session_state["input_problem"] = None
    try:
        load_example(settings)
    except ValueError as error:
        st.session_state["input_problem"] = f"{error} Showing the book's example instead."
        return replace(settings, preset="book")
    return settings


@st.cache_resource(show_spinner=False)
def freeze_import_time_objects() -> bool:
    """Once per process: move the ~300,000 objects that torch, Altair and Streamlit create at
    import into the garbage collector's permanent generation.

    Streamlit runs a full collection after every script run, holding the GIL; over that heap it
    took ~175 ms, and under a class's load the server stopped answering for a minute at a time
    (bench/load.py). Frozen, a full collection takes ~3 ms.
    """
    gc.collect()
    gc.freeze()
    return True


page = st.navigation(PAGES)
started = time.perf_counter()
st.session_state["settings"] = usable(sidebar(page.url_path or "overview"))  # default page: ""
page.run()
_ui.log_run(page.url_path or "overview", st.session_state["settings"], time.perf_counter() - started)
freeze_import_time_objects()  # after the page, so that its imports are loaded too
