"""Helpers the pages share: cached lesson calls, prose loading, charts with click-to-select.

Nothing here computes attention: it calls `core.lessons` through `st.cache_data`
(keyed on the frozen `Settings`, so sessions never share a mutable object).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os

import altair as alt
import pyarrow as pa
import streamlit as st
from streamlit.runtime.app_session import AppSession
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner import get_script_run_ctx

from core import charts, lessons
from core import prose as core_prose
from core.charts import QUERY_SELECTION
from core.lessons import DEFAULT_SECOND_TEXT
from core.settings import Settings, cache_key

# Set by bench/load.py: a file that gets one JSON line per finished script run, so a load test
# can check what the server computed for each session, not only what 40 tabs have painted.
RUN_LOG = os.environ.get("ATTENTION_LAB_RUN_LOG")
LOGGER = logging.getLogger("attention_lab")

# Every cache is bounded by time and by bytes. Streamlit bounds a cache by entries (max_entries)
# and age (ttl), so each max_entries below is a byte budget divided by the largest value that
# cache can hold (pickled, at the largest settings: 24 tokens, d_in = d_out = 64, 8 heads).
# tests/test_cache_budget.py measures those sizes and holds the sum under CACHE_BUDGET_MIB.
CACHE_BUDGET_MIB = 150
TTL_S = 60 * 60  # a lesson: a class's settings are not needed the next hour


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


@st.cache_data(show_spinner=False, max_entries=64, ttl=TTL_S)
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

    The browser keeps a selectbox's value as its label ("2: journey") and sends it back on the
    next rerun. After the input changes, that label names no option of the new token list, and
    Streamlit then stores the label string itself as the widget's value (a str, not an index):
    anything that is not an index into these tokens goes back to the lesson's default.
    """
    if not is_index(st.session_state.get(key), len(tokens)):
        st.session_state[key] = min(default, len(tokens) - 1)
    return st.selectbox(
        "Query token",
        list(range(len(tokens))),
        format_func=lambda i: f"{i + 1}: {tokens[i]}",
        key=key,
        help="Pick the token whose attention you follow, or click a row in the weights heatmap.",
    )


def whole_number_slider(label: str, low: int, high: int, value: int, key: str, container=st, **options) -> int:
    """A slider over low..high, or, when that range holds one number, a caption saying which.

    Streamlit refuses a slider whose minimum equals its maximum; a student's one- or two-word
    sentence leaves some position sliders with a single choice.
    """
    if high <= low:
        container.caption(f"{label}: {low} (the only choice for this input)")
        return low
    return container.slider(label, low, high, min(max(value, low), high), key=key, **options)


def is_index(value: object, length: int) -> bool:
    """True for a plain int that indexes a list of `length` items (bool and str are not indexes)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < length


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


# What each lesson reads besides its input (core.settings.cache_key resets the rest, so a
# control the page ignores does not create a new cache entry).
USES: dict[str, frozenset[str]] = {
    "token_labels": frozenset(),
    "simple_lesson": frozenset({"device"}),
    "trainable_lesson": frozenset({"d_out", "seed", "scale", "device"}),
    "causal_lesson": frozenset({"d_out", "seed", "scale", "dropout", "device"}),
    "multihead_lesson": frozenset({"d_out", "seed", "scale", "dropout", "num_heads", "device"}),
    "cross_lesson": frozenset({"d_out", "seed", "scale", "device"}),
}
# Entries per cache: budget / largest value (MiB measured: trainable 0.94, multihead 0.33,
# simple 0.19, causal 0.18, cross 0.15; the scaling page's values are a few KiB).
MAX_ENTRIES = {
    "token_labels": 256,
    "simple_lesson": 64,
    "trainable_lesson": 48,
    "causal_lesson": 96,
    "multihead_lesson": 64,
    "cross_lesson": 64,
    "scaling_variance": 64,
    "scaling_peakiness": 64,
    "scaling_sweep": 8,
}


def drawn(lesson: lessons.Lesson) -> lessons.Lesson:
    """Only what a page draws: the frames and values, not the tensors the tests check."""
    return dataclasses.replace(lesson, checks={})


def token_labels(s: Settings) -> list[str]:
    return _token_labels(cache_key(s, USES["token_labels"]))


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES["token_labels"], ttl=TTL_S)
def _token_labels(s: Settings) -> list[str]:
    return lessons.token_labels(s)


def simple_lesson(s: Settings, query_index: int, logit_scale: float) -> lessons.Lesson:
    return _simple_lesson(cache_key(s, USES["simple_lesson"]), query_index, logit_scale)


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES["simple_lesson"], ttl=TTL_S)
def _simple_lesson(s: Settings, query_index: int, logit_scale: float) -> lessons.Lesson:
    return drawn(lessons.simple_lesson(s, query_index, logit_scale))


def trainable_lesson(s: Settings, query_index: int) -> lessons.Lesson:
    return _trainable_lesson(cache_key(s, USES["trainable_lesson"]), query_index)


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES["trainable_lesson"], ttl=TTL_S)
def _trainable_lesson(s: Settings, query_index: int) -> lessons.Lesson:
    return drawn(lessons.trainable_lesson(s, query_index))


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES["scaling_variance"], ttl=TTL_S)
def scaling_variance(seed: int, trials: int) -> lessons.Lesson:
    return drawn(lessons.scaling_variance(seed, trials))


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES["scaling_peakiness"], ttl=TTL_S)
def scaling_peakiness(seed: int):
    return lessons.scaling_peakiness(seed)


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES["scaling_sweep"], ttl=TTL_S)
def scaling_sweep(multiplier: float) -> tuple[lessons.Lesson, dict, dict]:
    """The seed-independent part of the page, with its two chart specs (built once)."""
    lesson = lessons.scaling_sweep(multiplier)
    sweep = charts.sweep_chart(lesson.frames["sweep"], multiplier).to_dict(validate=False)
    saturation = charts.saturation_chart(lesson.frames["saturation"]).to_dict(validate=False)
    return drawn(lesson), sweep, saturation


def causal_lesson(s: Settings, position: int, training: bool) -> lessons.Lesson:
    return _causal_lesson(cache_key(s, USES["causal_lesson"]), position, training)


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES["causal_lesson"], ttl=TTL_S)
def _causal_lesson(s: Settings, position: int, training: bool) -> lessons.Lesson:
    return drawn(lessons.causal_lesson(s, position, training))


def multihead_lesson(s: Settings) -> lessons.Lesson:
    return _multihead_lesson(cache_key(s, USES["multihead_lesson"]))


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES["multihead_lesson"], ttl=TTL_S)
def _multihead_lesson(s: Settings) -> lessons.Lesson:
    return drawn(lessons.multihead_lesson(s))


def cross_lesson(s: Settings, second_text: str, d_v: int) -> lessons.Lesson:
    # The article's second sequence is torch.rand(8, 16): the text box is ignored there.
    second_text = DEFAULT_SECOND_TEXT if s.preset == "article" else second_text
    return _cross_lesson(cache_key(s, USES["cross_lesson"]), second_text, d_v)


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES["cross_lesson"], ttl=TTL_S)
def _cross_lesson(s: Settings, second_text: str, d_v: int) -> lessons.Lesson:
    return drawn(lessons.cross_lesson(s, second_text, d_v))


# ------------------------------------------------------------------ one client must not reset everyone
def keep_shared_caches() -> None:
    """Make a client's "clear cache" message clear only that client's own session state.

    Any websocket client can send Streamlit's clear_cache BackMsg (the browser's menu item is
    hidden by client.toolbarMode = "viewer", the message is not), and Streamlit then empties
    st.cache_data and st.cache_resource for every session in the process: one student, or a
    script, resets the whole class's caches. No configuration option turns it off (Streamlit
    1.67), so the handler is replaced, once per process. bench/hostile_probe.py measures it on
    a real server; tests/test_public_link.py checks the patch is in place.
    """
    if getattr(AppSession._handle_clear_cache_request, "_attention_lab", False):
        return

    def clear_own_session_state_only(session: AppSession) -> None:
        LOGGER.warning("A client asked to clear every cache; only its own session state was cleared.")
        session._session_state.clear()

    clear_own_session_state_only._attention_lab = True  # type: ignore[attr-defined]
    AppSession._handle_clear_cache_request = clear_own_session_state_only  # type: ignore[method-assign]
