"""Helpers the pages share: cached lesson calls, prose loading, charts with click-to-select.

Nothing here computes attention: it calls `core.lessons` through `st.cache_data`
(keyed on the frozen `Settings`, so sessions never share a mutable object).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import altair as alt
import pyarrow as pa
import streamlit as st
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner import get_script_run_ctx

from core import charts
from core import prose as core_prose
from core.charts import QUERY_SELECTION
from core.lessons import (
    causal_dropout,
    common,
    cross_attention,
    multi_head,
    overview,
    trainable_weights,
    why_scale,
    without_weights,
)
from core.registry import PageSpec
from core.settings import Settings

# Set by bench/load.py: a file that gets one JSON line per finished script run, so a load test
# can check what the server computed for each session, not only what 40 tabs have painted.
RUN_LOG = os.environ.get("ATTENTION_LAB_RUN_LOG")


@dataclass(frozen=True)
class Frame:
    """What streamlit_app.py hands every page for one run: one typed object, not loose keys."""

    page: PageSpec  # this page's row of core.registry
    settings: Settings  # the sidebar's settings, already made usable (a bad sentence -> the book's)
    input_problem: str | None  # why the student's sentence could not be used, in plain words
    link_notes: tuple[str, ...]  # what the link asked for that was ignored


_FRAME_KEY = "frame"
_RERUN_KEY = "frame_reruns"


@contextmanager
def hand_over(state: Frame) -> Iterator[None]:
    """The frame runs the page inside this: the page sees `state` through `frame()`, and only then."""
    st.session_state[_FRAME_KEY] = state
    st.session_state[_RERUN_KEY] = 0
    try:
        yield
    finally:
        st.session_state.pop(_FRAME_KEY, None)  # a page run alone must never find an old hand-over


def frame() -> Frame:
    """This run's hand-over from the frame. The one workaround for Streamlit's pages/ folder lives here.

    Streamlit sees the pages/ folder when the server starts and, until st.navigation has run
    once in the process, serves a deep link such as /causal_dropout as a legacy page, without
    the frame (PagesManager.uses_pages_directory). Every session whose first run starts in that
    mode lands here without a hand-over: we clear the flag and rerun, and the rerun (with the
    link's query string) goes through the frame. Moving the page scripts into a subfolder of
    pages/ was tried: legacy mode then finds no page for the link and shows a "Page not found"
    dialog on every early deep link, so the scripts stay at the top of pages/.

    A page run alone (a test opening its file directly) gets no hand-over after that rerun
    either, and fails loudly instead of drawing the defaults.
    """
    state = st.session_state.get(_FRAME_KEY)
    if isinstance(state, Frame) and not PagesManager.uses_pages_directory:
        return state
    if st.session_state.get(_RERUN_KEY, 0) >= 1:
        raise RuntimeError("This page runs only inside streamlit_app.py (the frame handed it nothing).")
    st.session_state[_RERUN_KEY] = 1
    PagesManager.uses_pages_directory = False
    st.rerun()


def page_start() -> Frame:
    """Every page's first line: the hand-over, the title, and the input problem if there is one."""
    state = frame()
    st.title(state.page.heading)
    if state.input_problem:
        st.error(state.input_problem, icon=":material/error:")
    return state


@st.cache_resource(show_spinner=False)
def _run_logger(path: str) -> logging.Logger:
    """One logger per process (its handler's lock keeps lines from many sessions whole)."""
    logger = logging.getLogger("attention_lab.runs")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(logging.FileHandler(path, encoding="utf-8"))
    return logger


def log_run(page: str, shown: Settings, seconds: float) -> None:
    """Record a finished run (only when ATTENTION_LAB_RUN_LOG is set; interrupted runs never get here)."""
    if not RUN_LOG:
        return
    ctx = get_script_run_ctx()
    record = {"session": ctx.session_id if ctx else None, "page": page, "seed": shown.seed, "seconds": seconds}
    _run_logger(RUN_LOG).info(json.dumps(record))


@st.cache_data(show_spinner=False, max_entries=64)
def _section(name: str, part: str) -> str:
    return core_prose.section(name, part)


def prose(name: str, part: str) -> None:
    """Render one '## part' section of pages/text/<name>.md (a missing one raises)."""
    st.markdown(_section(name, part))


def chart(chart_obj: alt.Chart, description: str, key: str | None = None, on_select=None) -> object:
    """Draw an Altair chart the house way: streamlit theme, full width, with alt text.

    The spec is serialised without Altair's jsonschema validation (~40 ms a chart on
    a small container); tests/test_charts.py validates every builder's spec instead.
    """
    spec = chart_obj.to_dict(validate=False)
    if on_select is None:
        return st.vega_lite_chart(spec=spec, theme="streamlit", width="stretch", alt=description)
    return st.vega_lite_chart(
        spec=spec, theme="streamlit", width="stretch", alt=description, key=key, on_select=on_select
    )


def spec_chart(spec: dict, description: str) -> object:
    """Draw a ready Vega-Lite spec (from a core.charts *_spec function) the house way."""
    return st.vega_lite_chart(spec=spec, theme="streamlit", width="stretch", alt=description)


def heatmap(frame, title: str, description: str, *, key: str | None = None, on_select=None, **options) -> object:
    """Draw `core.charts.heatmap` through its cached spec (built once per look, values swapped).

    The values go to Streamlit as an Arrow table, which it sends as is (records would be
    turned back into a DataFrame and then into Arrow on every rerun).
    """
    spec = charts.heatmap_template(frame, title, **options)
    columns = charts.heatmap_columns(frame, options.get("signed", False))
    spec["datasets"] = {charts.HEATMAP_DATA: pa.table(columns)}
    if on_select is None:
        return st.vega_lite_chart(spec=spec, theme="streamlit", width="stretch", alt=description)
    return st.vega_lite_chart(
        spec=spec, theme="streamlit", width="stretch", alt=description, key=key, on_select=on_select
    )


def query_picker(tokens: list[str], default: int, key: str) -> int:
    """A token selector that heatmap clicks can also set (see `select_query_from_chart`).

    One key per page: two pages sharing a key left the second page's picker at its first
    option after a switch between them (the book's query 'journey' became 'Your').
    """
    if st.session_state.get(key) is None or st.session_state[key] >= len(tokens):
        st.session_state[key] = min(default, len(tokens) - 1)
    return st.selectbox(
        "Query token",
        list(range(len(tokens))),
        format_func=lambda i: f"{i + 1}: {tokens[i]}",
        key=key,
        help="Pick the token whose attention you follow, or click a row in the weights heatmap.",
    )


def select_query_from_chart(chart_key: str, target: str) -> None:
    """on_select callback: a click on a heatmap row makes that row the query."""
    state = st.session_state.get(chart_key)
    picked = (state or {}).get("selection", {}).get(QUERY_SELECTION) if state else None
    if picked:
        st.session_state[target] = int(picked[0]["row_index"])


def query_weights_heatmap(frame, title: str, description: str, *, chart_key: str, picker_key: str) -> object:
    """The attention weights, whose rows a click makes the query of the picker `picker_key`."""
    return heatmap(
        frame,
        title,
        description,
        value_title="weight",
        select_rows=True,
        key=chart_key,
        on_select=lambda: select_query_from_chart(chart_key, picker_key),
    )


def code_box(code: str, note: str = "Plain PyTorch; paste it into a notebook and compare with this page.") -> None:
    """The lesson's recipe (core/recipes/), filled with this page's settings."""
    with st.expander("Code: reproduce exactly these numbers", icon=":material/code:"):
        st.caption(note)
        st.code(code, language="python")


# ------------------------------------------------------------------ cached lessons
# One wrapper per lesson computation, keyed on the frozen Settings (sessions never share a
# mutable object: st.cache_data hands every caller its own copy).
@st.cache_data(show_spinner=False, max_entries=256)
def token_labels(s: Settings) -> tuple[str, ...]:
    return common.token_labels(s)


@st.cache_data(show_spinner=False, max_entries=256)
def overview_lesson(s: Settings) -> overview.OverviewLesson:
    return overview.overview_lesson(s)


@st.cache_data(show_spinner=False, max_entries=256)
def without_weights_lesson(s: Settings, query_index: int, multiplier: float) -> without_weights.WithoutWeightsLesson:
    return without_weights.without_weights_lesson(s, query_index, multiplier)


@st.cache_data(show_spinner=False, max_entries=256)
def trainable_lesson(s: Settings, query_index: int) -> trainable_weights.TrainableLesson:
    return trainable_weights.trainable_lesson(s, query_index)


@st.cache_data(show_spinner=False, max_entries=64)
def scaling_variance(seed: int, trials: int) -> why_scale.VarianceResult:
    return why_scale.variance(seed, trials)


@st.cache_data(show_spinner=False, max_entries=64)
def scaling_peakiness(seed: int):
    return why_scale.peakiness(seed)


@st.cache_data(show_spinner=False, max_entries=16)
def scaling_sweep(multiplier: float) -> tuple[why_scale.SweepResult, dict, dict]:
    """The seed-independent part of the page, with its two chart specs (built once)."""
    result = why_scale.sweep(multiplier)
    sweep = charts.sweep_chart(result.sweep, multiplier).to_dict(validate=False)
    saturation = charts.saturation_chart(result.saturation).to_dict(validate=False)
    return result, sweep, saturation


@st.cache_data(show_spinner=False, max_entries=256)
def causal_lesson(s: Settings, perturbed: int, training: bool) -> causal_dropout.CausalLesson:
    return causal_dropout.causal_lesson(s, perturbed, training)


@st.cache_data(show_spinner=False, max_entries=256)
def multihead_lesson(s: Settings) -> multi_head.MultiHeadLesson:
    return multi_head.multihead_lesson(s)


@st.cache_data(show_spinner=False, max_entries=256)
def cross_lesson(
    s: Settings, second_text: str, d_v: int, first_text: str | None = None, d_in_kv: int | None = None
) -> cross_attention.CrossLesson:
    return cross_attention.cross_lesson(s, second_text, d_v, first_text, d_in_kv)
