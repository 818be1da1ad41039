"""Helpers the pages share: cached lesson calls, prose loading, charts with click-to-select.

Nothing here computes attention: it calls `core.lessons` through `st.cache_data`
(keyed on the frozen `Settings`, so sessions never share a mutable object).
"""

from __future__ import annotations

import json
import logging
import os

import altair as alt
import pyarrow as pa
import streamlit as st
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner import get_script_run_ctx

from core import charts, lessons
from core import prose as core_prose
from core.charts import QUERY_SELECTION
from core.settings import Settings

# Set by bench/load.py: a file that gets one JSON line per finished script run, so a load test
# can check what the server computed for each session, not only what 40 tabs have painted.
RUN_LOG = os.environ.get("ATTENTION_LAB_RUN_LOG")


def require_frame() -> None:
    """Run this page inside streamlit_app.py (navigation + shared sidebar), never alone.

    Streamlit sees the pages/ folder when the server starts and, until st.navigation
    has run once in the process, serves a deep link such as /causal_dropout as a legacy
    page without the frame. The flag is process-wide and st.navigation clears it itself;
    we clear it one run earlier and rerun, so the first visitor gets the frame.

    The flag alone is not enough: every session whose first run *started* in legacy mode
    lands here, and under a class's arrival all but the first find the flag already cleared.
    The frame stores "settings" before it runs any page, so a session without them has not
    been through the frame and must rerun too (the rerun keeps the link's query string).
    """
    legacy_run = PagesManager.uses_pages_directory or "settings" not in st.session_state
    if legacy_run:
        PagesManager.uses_pages_directory = False
        st.rerun()


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


def settings() -> Settings:
    """The sidebar's settings for this rerun (set by streamlit_app.py)."""
    return st.session_state.get("settings", Settings())


@st.cache_data(show_spinner=False, max_entries=64)
def _section(name: str, part: str) -> str:
    return core_prose.section(name, part)


def prose(name: str, part: str) -> None:
    """Render one '## part' section of pages/text/<name>.md (a missing one raises)."""
    st.markdown(_section(name, part))


def show_input_problem() -> None:
    """The inline message when the sidebar's input could not be used as asked."""
    problem = st.session_state.get("input_problem")
    if problem:
        st.error(problem, icon=":material/error:")


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
    """Draw a ready Vega-Lite spec (from a core.charts *_spec function) the house way.

    Its named datasets go to Streamlit as Arrow tables: records would be turned into a DataFrame
    and then into Arrow on every rerun (~4 ms a dataset; bench/capacity.py's profile).
    """
    datasets = {
        name: pa.Table.from_pylist(rows) if isinstance(rows, list) else rows
        for name, rows in spec.get("datasets", {}).items()
    }
    if datasets:
        spec = {**spec, "datasets": datasets}  # a new dict: the caller's spec is left as it was
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


def code_expander(code: str) -> None:
    with st.expander("Code: reproduce exactly these numbers", icon=":material/code:"):
        st.caption("Plain PyTorch; paste it into a notebook and compare with this page.")
        st.code(code, language="python")


@st.cache_data(show_spinner=False, max_entries=256)
def token_labels(s: Settings) -> list[str]:
    return lessons.token_labels(s)


@st.cache_data(show_spinner=False, max_entries=256)
def simple_lesson(s: Settings, query_index: int, logit_scale: float) -> lessons.Lesson:
    return lessons.simple_lesson(s, query_index, logit_scale)


@st.cache_data(show_spinner=False, max_entries=256)
def trainable_lesson(s: Settings, query_index: int) -> lessons.Lesson:
    return lessons.trainable_lesson(s, query_index)


@st.cache_data(show_spinner=False, max_entries=64)
def scaling_variance(seed: int, trials: int) -> lessons.Lesson:
    return lessons.scaling_variance(seed, trials)


@st.cache_data(show_spinner=False, max_entries=64)
def scaling_peakiness(seed: int):
    return lessons.scaling_peakiness(seed)


@st.cache_data(show_spinner=False, max_entries=16)
def scaling_sweep(multiplier: float) -> tuple[lessons.Lesson, dict, dict]:
    """The seed-independent part of the page, with its two chart specs (built once)."""
    lesson = lessons.scaling_sweep(multiplier)
    sweep = charts.sweep_chart(lesson.frames["sweep"], multiplier).to_dict(validate=False)
    saturation = charts.saturation_chart(lesson.frames["saturation"]).to_dict(validate=False)
    return lesson, sweep, saturation


@st.cache_data(show_spinner=False, max_entries=256)
def causal_lesson(s: Settings, position: int, training: bool) -> lessons.Lesson:
    return lessons.causal_lesson(s, position, training)


@st.cache_data(show_spinner=False, max_entries=256)
def multihead_lesson(s: Settings) -> lessons.Lesson:
    return lessons.multihead_lesson(s)


@st.cache_data(show_spinner=False, max_entries=256)
def cross_lesson(s: Settings, second_text: str, d_v: int) -> lessons.Lesson:
    return lessons.cross_lesson(s, second_text, d_v)
