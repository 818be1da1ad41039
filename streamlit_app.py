"""Attention Lab: the frame. Navigation, the shared sidebar, and nothing else.

Every sidebar value survives page switches (persist_state="session") and lives in
the URL (bind="query-params"), so a teacher can share a link to exactly this view.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import TypeVar

import streamlit as st
import torch
from streamlit.delta_generator import DeltaGenerator

from core.app import registry
from core.app.failure import Remedy, failure_note
from core.app.links import MAX_LINK_CHARS, PAGE_PARAMETERS, LinkReading, read_link, settings_implied_by_link
from core.app.markup import code_span
from core.app.settings import (
    PresetKey,
    Settings,
    load_example,
)
from core.inputs.device import available_devices
from core.inputs.weights import WeightSource
from ui import class_poll, draw, frame, hardening, presentation
from ui import sidebar as shared_sidebar
from ui.link_notes import LINK_OFF, link_warning
from ui.sidebar import apply_preset

T = TypeVar("T")

# Sessions run in threads of one process; one intra-op thread each avoids oversubscribing the
# 1-2 cores of a small container when a class reruns at once (override with the variable).
torch.set_num_threads(int(os.environ.get("ATTENTION_LAB_TORCH_THREADS", "1")))

# ?present=1 (what the README tells a teacher to type) or ?present=true (what the toggle writes).
PRESENT = PAGE_PARAMETERS["present"]
if "present" not in st.session_state and PRESENT.read(st.query_params.get("present", ""))[0] is True:
    st.session_state["present"] = True  # before the bound toggle exists, so "1" counts too
st.set_page_config(
    page_title="Attention Lab",
    page_icon=":material/visibility:",
    layout="wide",
    initial_sidebar_state="collapsed" if st.session_state.get("present") else "auto",
)


def navigation() -> dict[str, list[st.Page]]:
    """st.Page objects for core.app.registry.PAGES, grouped by section.

    The overview is the default page, served at "/"; its url_path only reserves a name, so it
    gets one nobody links to ("start"), and /overview (the name a student would guess, or an
    old link has) serves the same file as a hidden page. (st.switch_page cannot forward: it
    clears the query parameters, which the bound sidebar widgets forbid.)
    """
    sections: dict[str, list[st.Page]] = {}
    for spec in registry.PAGES:
        pages = sections.setdefault(spec.section.value, [])
        if spec is registry.HOME:
            pages.append(st.Page(spec.file, title=spec.title, icon=spec.icon, default=True, url_path="start"))
            pages.append(st.Page(spec.file, title=spec.title, url_path=spec.slug, visibility="hidden"))
        else:
            # The heading, "6 · Inside a real model": the menu shows the numbers the overview refers to.
            pages.append(st.Page(spec.file, title=spec.heading, icon=spec.icon, url_path=spec.slug))
    return sections


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


def sidebar(spec: registry.PageSpec) -> tuple[Settings, LinkReading]:
    """Draw the shared sidebar for this page; (its settings, what the link asked for and what was ignored)."""
    devices = available_devices()
    reading = read_link_once(devices)
    # The Weights control decides which other controls apply, so its value is read before any is drawn
    # (on a session's first run, from the link).
    weights_now = WeightSource(st.session_state.get("weights", reading.settings.weights))
    if "link_implied" not in st.session_state:  # ?preset=article alone opens the article's settings
        st.session_state["link_implied"] = True
        params = {name: st.query_params.get_all(name) for name in st.query_params}
        for name, value in settings_implied_by_link(params, devices).items():
            st.session_state[name] = value
    if st.session_state.get("page_key", spec.slug) != spec.slug:
        restore_link()
    st.session_state["page_key"] = spec.slug
    with st.sidebar:
        values = shared_sidebar.draw_all(spec, weights_now, devices)
        link_notes(reading)
    return shared_sidebar.settings_from(values), reading


def read_link_once(devices: list[str]) -> LinkReading:
    """The session's link, read once by core.app.links' rule; what it ignores leaves the link.

    Streamlit's bound widgets read a link more loosely than our rule (they take "１２", "1e1",
    "1_000", the start of an over-long text) and crash on some values (an integer box on
    "1e999"), so a value the rule ignores must not reach them: it is deleted from the query
    parameters (before any widget binds it) and the script reruns on the cleaned link, where
    each widget starts from its default, as the note says. This covers the sidebar and every
    page's own controls (the page shows their notes).

    A value the rule takes in a spelling its bound widget does not write is rewritten in the widget's,
    which would otherwise drop it without a word: ?present=1 as the toggle's present=true (else the next
    step's link opened the whole lesson), ?multiplier=4 as "4.0", ?scale_longest=1024 as "1,024".
    """
    if "link_reading" not in st.session_state:
        params = {name: st.query_params.get_all(name) for name in st.query_params}
        reading = read_link(params, devices)
        st.session_state["link_reading"] = reading
        ignored = {note.parameter for note in reading.notes}
        kept = {} if reading.too_long_chars else {name: v for name, v in params.items() if name not in ignored}
        respelled = dict(reading.respelled)
        if reading.controls.get("present") is True and st.query_params.get("present") != "true":
            respelled["present"] = "true"
        kept |= respelled
        if reading.too_long_chars or ignored or respelled:
            # One message with the cleaned link (also the rerun's query string): deleting the
            # parameters one by one re-sent the whole remaining link each time (issue 31: a 450 kB
            # link made the server send 10 MB).
            st.query_params.from_dict(kept)
            st.rerun()
    return st.session_state["link_reading"]


def link_notes(reading: LinkReading) -> None:
    """One warning per ignored sidebar parameter, one line for all unknown ones; values as inert code.

    Notes on the frame's and pages' own controls appear on the page (`ui.frame.page_start`).
    """
    if reading.too_long_chars:
        st.warning(
            f"This link is {reading.too_long_chars:,} characters long, more than the {MAX_LINK_CHARS:,} "
            "the app reads; it was ignored, and the page opened with its defaults.",
            icon=LINK_OFF,
        )
    for note in reading.sidebar_notes():
        link_warning(note.parameter, note.value, note.reason)
    if reading.unknown:
        count = len(reading.unknown)
        names = ", ".join(code_span(name, 20) for name in reading.unknown[:5])
        more = f" and {count - 5} more" if count > 5 else ""
        plural = "s" if count > 1 else ""
        st.warning(f"{count} unknown link parameter{plural} ignored: {names}{more}.", icon=LINK_OFF)


def usable(settings: Settings) -> tuple[Settings, str | None]:
    """Fall back to the book's example when the student's sentence cannot be used: (settings, why)."""
    try:
        load_example(settings)
    except ValueError as error:
        return replace(settings, preset=PresetKey.BOOK), f"{error} Showing the book's example instead."
    return settings, None


@st.cache_resource(show_spinner=False)
def freeze_import_time_objects() -> bool:
    """Once per process: move the ~300,000 objects that torch, Altair and Streamlit create at
    import into the garbage collector's permanent generation.

    Streamlit runs a full collection after every script run, holding the GIL; over that heap,
    under a class's load, the server stopped answering for a minute at a time (loadtest/load.py;
    the timings are in bench/NOTES.md).
    """
    gc.collect()
    gc.freeze()
    return True


def back_to_the_book() -> None:
    """on_click of the error message's button: the book's example, whose numbers are tested."""
    st.session_state["preset"] = PresetKey.BOOK
    apply_preset()


def run_page(page: st.Page, settings: Settings, step_bar: DeltaGenerator, link: LinkReading) -> None:
    """Run one lesson and, in presentation mode, its step bar (drawn into `step_bar`, above the
    page, once the page has counted its steps); an unexpected error in either becomes a short
    message, and its traceback a log line.

    Streamlit's own error box says nothing a student can act on (details are hidden from them
    by client.showErrorDetails). What the page drew before the error stays on screen, and the
    sidebar and every other page keep working. st.rerun and st.stop are not Exceptions
    (Streamlit's control flow derives from BaseException), so they pass through.
    """
    failed = False
    bar = None
    if st.session_state.get("present"):
        try:
            with step_bar:  # the step box before the page: the link holds the new step before any chart is sent
                bar = presentation.step_box(spec.slug, following=class_poll.role().following is not None)
        except Exception:
            failed = lesson_failed(page, settings, with_button=True)
    try:
        page.run()  # the same script for every weight source (core/inputs/weights.py)
    except Exception:
        failed = lesson_failed(page, settings, with_button=not failed) or failed
    if bar is not None:
        try:
            with step_bar:
                presentation.step_bar(bar, presentation.steps_drawn(), spec.slug, link=link)
                class_poll.bar_button(bar.poll)
        except Exception:
            lesson_failed(page, settings, with_button=not failed)


def lesson_failed(page: st.Page, settings: Settings, *, with_button: bool) -> bool:
    """The friendly message for an unexpected error and (once a run) its button: words true of this page
    and its settings (core.app.failure): the book's example where the page reads it and the settings
    differ from it, else the page run again."""
    hardening.LOGGER.exception("page %r failed with %r", page.url_path or "overview", settings)
    note = failure_note(spec, settings, st.query_params.keys())
    st.error(note.text, icon=":material/sentiment_dissatisfied:")
    if with_button and note.remedy is Remedy.BOOK:
        st.button(note.button, on_click=back_to_the_book, key="error_back_to_book")
    elif with_button:
        st.button(note.button, key="error_run_again")  # a click reruns the page
    return True


def guarded_sidebar(spec: registry.PageSpec) -> tuple[Settings, LinkReading]:
    """The sidebar inside the same kind of error handler as the page: whatever its widgets raise
    (a forged value no check foresaw) is a short message and the book's example, never
    Streamlit's raw box. st.rerun and st.stop pass through (they are not Exceptions)."""
    try:
        return sidebar(spec)
    except Exception:
        hardening.LOGGER.exception("the sidebar of %r failed", spec.slug)
        st.sidebar.error(
            "The settings could not be read on this run, so the lesson shows the book's example. "
            "Reload the page, or choose the settings again.",
            icon=":material/sentiment_dissatisfied:",
        )
        return Settings(), read_link({}, available_devices())


def guarded(part: Callable[[], T], fallback: T, what: str) -> T:
    """One of the frame's own parts (the class poll's controls and notes) inside an error handler:
    what it raises is logged and it gives `fallback`; the lesson goes on."""
    try:
        return part()
    except Exception:
        hardening.LOGGER.exception("the frame's %s failed", what)
        st.info("The class poll hit a problem on this run; the lesson works as usual.", icon=class_poll.POLL_ICON)
        return fallback


hardening.keep_shared_caches()
hardening.drop_unreadable_widget_values()
# expanded: every lesson listed; with lesson 12 the menu folded the last three under "View 3 more".
page = st.navigation(navigation(), expanded=True)
spec = registry.page(page.url_path or registry.HOME.slug)  # the default page's url_path is ""
# A full run that is cut short and not run again is redrawn by the poll watcher (class_poll.full_run).
with class_poll.full_run():
    started = time.perf_counter()
    chosen, link = guarded_sidebar(spec)
    shown, input_problem = usable(chosen)
    # One style block for every page: the sidebar's lesson titles wrap instead of ending in "Attention without
    # trainable wei…"; a formula's box hides what stands out of it vertically (tall fractions, braces and
    # parentheses lost a pixel or two of ink, the sixth review saw lesson 4's numerator shaved), so it gets room;
    # on a phone a formula wider than the screen scrolls sideways in a smaller font (lesson 2's Q, K, V line and
    # lesson 5's were cut at the screen's edge, the s19 review).
    st.html(
        '<style>[data-testid="stSidebarNavLink"] span {white-space: normal; overflow: visible;}'
        " .katex-display {padding: 0.3em 0;}"
        f" @media (max-width: {draw.NARROW_PX}px) {{.katex-display {{overflow-x: auto; overflow-y: hidden;}}"
        " .katex-display > .katex {font-size: 1em;}}</style>"
    )
    step_bar = st.container(key="al-bar")  # the presentation bar, filled once the page has counted its steps
    present = bool(st.session_state.get("present"))
    with st.sidebar:
        guarded(lambda: class_poll.sidebar_controls(present), None, "poll button")
    with step_bar:  # a class poll's notes stay in view in presentation mode
        guarded(class_poll.read_room_link, None, "poll link")
        room_state = guarded(lambda: class_poll.follow_teacher(spec.slug), None, "poll follower")
    with frame.hand_over(frame.Frame(page=spec, settings=shown, input_problem=input_problem, link=link)):
        run_page(page, shown, step_bar, link)
        if st.session_state.get("present"):
            with step_bar:
                step = int(st.session_state.get("step") or 1)
                guarded(lambda: class_poll.teacher_panel(spec.slug, step), None, "poll panel")
        with step_bar:
            guarded(lambda: class_poll.student_bar(room_state), None, "poll bar")
    hardening.late_unreadable_values_note()
    frame.after_run(spec.slug, shown, time.perf_counter() - started)  # one line on the app's run log
    freeze_import_time_objects()  # after the page, so that its imports are loaded too
