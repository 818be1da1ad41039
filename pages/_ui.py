"""Helpers the pages share: cached lesson calls, prose loading, charts with click-to-select.

Nothing here computes attention: it calls `core.lessons` through `st.cache_data`
(keyed on the frozen `Settings`, so sessions never share a mutable object).
"""

from __future__ import annotations

from pathlib import Path

import altair as alt
import streamlit as st
from streamlit.runtime.pages_manager import PagesManager

from core import lessons
from core.charts import QUERY_SELECTION
from core.settings import Settings

TEXT_DIR = Path(__file__).parent / "text"


def require_frame() -> None:
    """Run this page inside streamlit_app.py (navigation + shared sidebar), never alone.

    Streamlit sees the pages/ folder when the server starts and, until st.navigation
    has run once in the process, serves a deep link such as /causal as a legacy
    page without the frame. The flag is process-wide and st.navigation clears it
    itself; we clear it one run earlier and rerun, so the first visitor gets the frame.
    """
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


def settings() -> Settings:
    """The sidebar's settings for this rerun (set by streamlit_app.py)."""
    return st.session_state.get("settings", Settings())


@st.cache_data(show_spinner=False)
def _read(name: str) -> str:
    return (TEXT_DIR / f"{name}.md").read_text(encoding="utf-8")


def prose(name: str, section: str | None = None) -> None:
    """Render pages/text/<name>.md, or one '## section' of it."""
    text = _read(name)
    if section is not None:
        parts = text.split("\n## ")
        text = next((p.split("\n", 1)[1] for p in parts if p.startswith(section)), "")
    st.markdown(text)


def show_input_problem() -> None:
    """The inline message when the sidebar's input could not be used as asked."""
    problem = st.session_state.get("input_problem")
    if problem:
        st.error(problem, icon=":material/error:")


def chart(chart_obj: alt.Chart, description: str, key: str | None = None, on_select=None) -> object:
    """Draw an Altair chart the house way: streamlit theme, full width, with alt text."""
    if on_select is None:
        return st.altair_chart(chart_obj, theme="streamlit", width="stretch", alt=description)
    return st.altair_chart(
        chart_obj,
        theme="streamlit",
        width="stretch",
        alt=description,
        key=key,
        on_select=on_select,
    )


def query_picker(tokens: list[str], default: int, key: str = "query_index") -> int:
    """A token selector that heatmap clicks can also set (see `select_query_from_chart`)."""
    if st.session_state.get(key) is None or st.session_state[key] >= len(tokens):
        st.session_state[key] = min(default, len(tokens) - 1)
    return st.selectbox(
        "Query token",
        list(range(len(tokens))),
        format_func=lambda i: f"{i + 1}: {tokens[i]}",
        key=key,
        help="Pick the token whose attention you follow, or click a row in the weights heatmap.",
    )


def select_query_from_chart(chart_key: str, target: str = "query_index") -> None:
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
def simple_lesson(s: Settings, query_index: int, logit_scale: float) -> lessons.Lesson:
    return lessons.simple_lesson(s, query_index, logit_scale)


@st.cache_data(show_spinner=False, max_entries=256)
def trainable_lesson(s: Settings, query_index: int) -> lessons.Lesson:
    return lessons.trainable_lesson(s, query_index)


@st.cache_data(show_spinner=False, max_entries=64)
def scaling_lesson(s: Settings, trials: int, multiplier: float) -> lessons.Lesson:
    return lessons.scaling_lesson(s, trials, multiplier)


@st.cache_data(show_spinner=False, max_entries=256)
def causal_lesson(s: Settings, position: int, training: bool) -> lessons.Lesson:
    return lessons.causal_lesson(s, position, training)


@st.cache_data(show_spinner=False, max_entries=256)
def multihead_lesson(s: Settings) -> lessons.Lesson:
    return lessons.multihead_lesson(s)


@st.cache_data(show_spinner=False, max_entries=256)
def cross_lesson(s: Settings, second_text: str, d_v: int) -> lessons.Lesson:
    return lessons.cross_lesson(s, second_text, d_v)


def matrix_table(frame, digits: int = 4):
    """A long matrix frame back to a readable wide table (rows = tokens)."""
    wide = frame.pivot(index="row", columns="col", values="value")
    wide = wide.loc[list(dict.fromkeys(frame["row"])), list(dict.fromkeys(frame["col"]))]
    st.dataframe(wide.round(digits), width="stretch")
