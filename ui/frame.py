"""The frame's hand-over: streamlit_app.py runs each page with one typed `Frame`, read by `frame()`."""

from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner import get_script_run_ctx

from core.app.links import LinkReading
from core.app.registry import FRAME_CONTROLS, PageSpec
from core.app.settings import Settings
from ui import hardening, presentation
from ui.link_notes import LINK_OFF, link_warning


@dataclass(frozen=True)
class Frame:
    """What streamlit_app.py hands every page for one run: one typed object, not loose keys."""

    page: PageSpec  # this page's row of core.app.registry
    settings: Settings  # the sidebar's settings, already made usable (a bad sentence -> the book's)
    input_problem: str | None  # why the student's sentence could not be used, in plain words
    link: LinkReading  # what the link asked for, and what of it was ignored


_FRAME_KEY = "frame"
_RERUN_KEY = "frame_reruns"


@contextmanager
def hand_over(state: Frame) -> Iterator[None]:
    """The frame runs the page inside this: the page sees `state` through `frame()`, and only then."""
    st.session_state[_FRAME_KEY] = state
    st.session_state[_RERUN_KEY] = 0
    presentation.start_counting()
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


def current_slug() -> str:
    """The page this run draws, or "" outside a hand-over; unlike `frame()`, never reruns the script."""
    state = st.session_state.get(_FRAME_KEY)
    return state.page.slug if isinstance(state, Frame) else ""


def sidebar_notes_pointer(link: LinkReading) -> None:
    """One line on the page when the sidebar holds notes on this link: the sidebar's foot is far below
    a laptop's fold, and a phone keeps the sidebar closed, so the notes went unseen."""
    ignored = len(link.sidebar_notes()) + len(link.unknown) + (1 if link.too_long_chars else 0)
    if ignored:
        what = "one value" if ignored == 1 else f"{ignored} values"
        st.warning(
            f"This link held {what} the app could not use; the page opened without {'it' if ignored == 1 else 'them'}. "
            "The sidebar's foot says which, and why.",
            icon=LINK_OFF,
        )


def page_start() -> Frame:
    """Every page's first line: the hand-over, the title, and what of this session's input could
    not be used (the sentence, a link's values for this page's controls, a forged control value)."""
    state = frame()
    with st.container(key="al-title"):  # stays in view on every step of presentation mode
        st.title(state.page.heading)
        if state.input_problem:
            st.error(state.input_problem, icon=":material/error:")
        mine = {*state.page.link_parameters, *FRAME_CONTROLS}
        if st.session_state.get("present"):
            mine.discard("step")  # the step bar's note names this page's own steps (ui.presentation)
        for note in state.link.page_notes():
            if note.parameter in mine:
                link_warning(note.parameter, note.value, note.reason)
        sidebar_notes_pointer(state.link)
        hardening.unreadable_values_note()
    return state


RUN_LOG_FILE = "ATTENTION_LAB_RUN_LOG"  # a file path: where the run log also goes (the load tests read it)


@functools.cache
def run_log() -> logging.Logger:
    """The app's run log, `attention_lab.runs`: one JSON line per finished run (session, page, seed, seconds).

    It propagates to Python's logging like any logger; with ATTENTION_LAB_RUN_LOG set, its lines also go to
    that file (one handler per process, whose lock keeps the lines of many sessions whole), so a load test can
    check what the server computed for each session, not only what its tabs painted.
    """
    logger = logging.getLogger("attention_lab.runs")
    logger.setLevel(logging.INFO)
    if path := os.environ.get(RUN_LOG_FILE):
        logger.addHandler(logging.FileHandler(path, encoding="utf-8"))
    return logger


def after_run(page: str, shown: Settings, seconds: float) -> None:
    """Log one line for a finished run of `page` with the settings it showed (interrupted runs never get here)."""
    context = get_script_run_ctx()
    line = {"session": context.session_id if context else None, "page": page, "seed": shown.seed, "seconds": seconds}
    run_log().info(json.dumps(line))
