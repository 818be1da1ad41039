"""Widgets the pages share: predict-then-reveal, prose, code boxes, number tables, link-bound choices."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from types import MappingProxyType
from typing import Literal, TypeVar

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from core.app import prose as core_prose
from core.app.markup import literal
from core.app.registry import PageControl
from core.lessons.common import Prediction, WeightColours
from core.lessons.common import weight_colours as lesson_colours
from services.class_poll import PollError
from ui import class_poll, presentation
from ui.frame import frame
from ui.link_notes import link_warning

T = TypeVar("T")


def predict(prediction: Prediction, key: str) -> bool:
    """Predict, then reveal: the answer and why appear only once the student has chosen.

    Returns whether the answer is out: the student has chosen (outside a class poll), or the teacher has
    revealed it (a student in a poll). Whatever would give the answer away on the page (a chart, a caption,
    a metric) is drawn only when this is True, and `answer_first(...)` stands in its place until then, so a
    student working alone at home meets the question before the numbers that answer it.

    In a class poll (ui/class_poll.py) a student's answer waits for the teacher's Reveal, and
    the teacher's box shows the class's answers live under the question.

    The options appear in `prediction.display_order()`, so the answer's place gives nothing away. The
    widget key carries the prediction's fingerprint: when a setting changes the question, its answer or
    its numbers, the radio starts unanswered again instead of revealing the new answer at once.
    """
    page = frame().page.slug  # read here: a fragment's own reruns happen outside the frame's hand-over
    presentation.question_drawn(key, page)
    with st.container(border=True):
        if class_poll.role().teacher is not None and presentation.presenting():
            # The class's live count beside the options on the projected screen: under them it ended below the
            # fold whenever the sidebar stayed open after "Start a class poll" (the s26 review, lesson 1's six
            # options). Stacked, in this order, on a narrow screen.
            question, tally = st.columns([3, 2], gap="medium")
            with question:
                _predict_box(prediction, key, page)
            with tally:
                class_poll.teacher_tally(page, key, prediction, beside=True)
        else:
            _predict_box(prediction, key, page)
            class_poll.teacher_tally(page, key, prediction)
    return bool(st.session_state.get(_answer_out_key(prediction, key), False))


def answer_first(what_appears: str, question: str | None = None) -> None:
    """Stands where a predict question's give-away will appear: `what_appears` is a clause such as
    "The bars and their weights appear" (it is followed by "once you have answered ...", or for a class poll's
    student "once the teacher reveals the answer to ...").

    `question` is the key of the question it waits for, when that is not the latest one drawn; in
    presentation mode the line names that question's step when it is on another one.
    """
    if class_poll.role().following is not None:  # a poll's student: their answer unlocks nothing, the Reveal does
        # The s28 review: a student who had answered still read "once you have answered the question above".
        when = f"once the teacher reveals the answer to {presentation.the_question(question)}"
    else:
        when = f"once you have answered {presentation.the_question(question)}"
    st.caption(f":material/lock: {literal(what_appears)} {when}.")


def _answer_out_key(prediction: Prediction, key: str) -> str:
    return f"{key}_{prediction.fingerprint()}_answer_out"


def _record_answer_out(prediction: Prediction, key: str, out: bool) -> None:
    """Remember whether this question's answer is out; when that changes in the box's own rerun
    (a fragment), rerun the page so that what the answer unlocks is drawn (or hidden) at once."""
    state_key = _answer_out_key(prediction, key)
    if st.session_state.get(state_key, False) == out:
        return
    st.session_state[state_key] = out
    if in_fragment_rerun():
        st.rerun(scope="app")


def in_fragment_rerun() -> bool:
    """Whether this run reruns a fragment alone (a choice in a predict box), not the whole page."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    context = get_script_run_ctx()
    return bool(context is not None and context.fragment_ids_this_run)


def _teacher_revealed(page: str, key: str) -> bool:
    """Whether this session is a poll's teacher who pressed Reveal for this question: on the projected
    screen, what the answer unlocks must appear then, without the teacher also choosing an answer."""
    room = class_poll.role().teacher
    if room is None:
        return False
    try:
        return class_poll.question_id(page, key) in class_poll.store().room(room.code).revealed
    except PollError:  # the store away: the teacher's own choice still unlocks it
        return False


@st.fragment
def _predict_box(prediction: Prediction, key: str, page: str) -> None:
    """The question and its verdict. A fragment: choosing an answer reruns this box, then the page once
    more only if the answer unlocks something on it (a class answering at once costs the server little)."""
    st.markdown(f"**Predict first.** {literal(prediction.question)}")
    radio_key = f"{key}_{prediction.fingerprint()}"
    chosen = st.session_state.get(radio_key) is not None  # the radio below reads this same value
    revealed = not chosen and _teacher_revealed(page, key)  # one store read per run, used twice
    options, verdict = _options_and_verdict(chosen or revealed, max(map(len, prediction.options)))
    order = prediction.display_order()
    shown_option = options.radio(
        "Your prediction",
        range(len(order)),
        index=None,
        format_func=lambda i: literal(prediction.options[order[i]]),  # radio labels are markdown
        key=radio_key,
        label_visibility="collapsed",
        horizontal=_side_by_side(prediction.options),
        # Kept while the session lasts: a run that does not draw the radio (another lesson, another setting)
        # dropped the answer, and coming back found the question unanswered and its charts locked (s27 review).
        # The key holds the question's fingerprint, so only the same question at the same numbers finds it again.
        persist_state="session",
    )
    choice = None if shown_option is None else order[shown_option]  # an index into prediction.options
    shown = class_poll.predict_in_poll(page, key, prediction, choice)
    out = bool(shown) if shown is not None else choice is not None or revealed
    _record_answer_out(prediction, key, out)
    if shown is False:  # in a poll, before the Reveal
        return
    if choice is None and shown:
        right = _quoted(prediction.options[prediction.answer])
        verdict.info(f"The teacher revealed: {right}. {literal(prediction.explanation)}", icon=":material/school:")
    elif choice is None:
        st.caption("Choose an answer to see what the numbers say.")
    elif prediction.is_right(choice):
        verdict.success(f"Right. {literal(prediction.explanation)}", icon=":material/check_circle:")
    else:
        right = _quoted(prediction.options[prediction.answer])
        verdict.warning(
            f"Not quite: it is {right}. {literal(prediction.explanation)}",
            icon=":material/lightbulb:",
        )


SHORT_OPTION_CHARS = 40  # options this short keep one line in a third of a projector's width
MANY_OPTIONS = 6  # more options than this, all as short as a word, flow side by side
WORD_CHARS = 14


def _side_by_side(options: tuple[str, ...]) -> bool:
    """Whether the options flow across the line: many single words (lesson 7 offers each piece of a sentence), one
    under another, pushed the verdict below a projector's fold (13 options, the s30 review)."""
    return len(options) > MANY_OPTIONS and max(map(len, options)) <= WORD_CHARS


def _options_and_verdict(answer_out: bool, longest_option: int) -> tuple[DeltaGenerator, DeltaGenerator]:
    """Where the options and the verdict go: the verdict under the options, except in presentation mode once
    the answer is out (chosen, or revealed on the poll's teacher's screen), where it stands beside them.

    On a projector the verdict under the options fell below the fold on five lessons; between the question and
    the options it pushed lesson 9's options to 762 px (the s21 note). Beside them, neither moves down. Before
    the answer the options keep the full width, so long ones do not wrap into a taller box. Short options leave
    the verdict two thirds of the width, long ones three fifths.
    """
    if answer_out and st.session_state.get("present"):
        shares = [1, 2] if longest_option <= SHORT_OPTION_CHARS else [2, 3]
        options, verdict = st.columns(shares, gap="medium")  # stacked, in this order, on a phone's width
        return options, verdict
    options = st.container()
    return options, st.container()  # created second: under the options


QUOTE_MARKS = "'\"‘’“”"


def _quoted(option: str) -> str:
    """The option as markdown-safe text in curly quotes, unless it is a quoted token ('The') already:
    “'The'” read as a typo."""
    if len(option) >= 2 and option[0] in QUOTE_MARKS and option[-1] in QUOTE_MARKS:
        return literal(option)
    return f"“{literal(option)}”"


@functools.lru_cache(maxsize=256)
def _section(name: str, part: str) -> str:
    """A prose section, read once per process. Not st.cache_data: the keys are the pages' own
    constants (about 90 sections, never user input) and the value an immutable str, so
    st.cache_data's hashing and unpickling on every call would buy nothing."""
    return core_prose.section(name, part)


def prose(name: str, part: str) -> None:
    """Render one '## part' section of pages/text/<name>.md (a missing one raises)."""
    st.markdown(_section(name, part))


EXACT_CODE_TITLE = "reproduce exactly these numbers"  # a Code box's title where it prints the page's digits


def code_box(
    code: str,
    note: str = "Plain PyTorch; paste it into a notebook and compare with this page.",
    *,
    title: str = EXACT_CODE_TITLE,
) -> None:
    """A recipe (core/recipes/), filled with this page's settings, under "Code: <title>".

    A page with several boxes gives each its own title: two closed boxes with one label look
    like the same code twice.
    """
    with st.expander(f"Code: {title}", icon=":material/code:"):
        st.caption(note)
        st.code(code, language="python")


# Tables up to this many rows show every row; Streamlit's default height scrolls inside after about ten, which hid
# heads 10 and 11 of 12 in lesson 5's pattern table, on a projector and in every screenshot (review s23, D8).
FULL_TABLE_ROWS = 16


def table_height(rows: int) -> Literal["content", "auto"]:
    """Every row for a short table; a longer one keeps Streamlit's scrolling height."""
    return "content" if rows <= FULL_TABLE_ROWS else "auto"


def number_table(frame: pd.DataFrame, *, decimals: int = 4, hide_index: bool = False, where=None) -> object:
    """st.dataframe with every float column at the same decimals (never 0.15 beside 0.2264).

    The browser formats the numbers (column_config): a pandas Styler, the other way, renders
    every cell in Python on every rerun, which a class's load cannot afford (bench/NOTES.md).
    `where` is a column or container to draw in (default: the page).
    """
    formats = {
        str(name): st.column_config.NumberColumn(format=f"%.{decimals}f")
        for name in frame.columns
        if pd.api.types.is_float_dtype(frame[name])
    }
    return (where or st).dataframe(
        frame, column_config=formats, width="stretch", height=table_height(len(frame)), hide_index=hide_index
    )


# A widget in the link and kept across page switches: the sidebar's and the pages' own controls.
LINKED = MappingProxyType({"bind": "query-params", "persist_state": "session"})  # read-only: shared


def weight_colours(weights: pd.DataFrame) -> WeightColours:
    """The "Stretch the colours to these weights" toggle (lessons 1 and 7, in the link as ?stretch=true) and the
    colours it asks for: the fixed 0–1 scale, or the weights' own range."""
    stretch = st.toggle(
        "Stretch the colours to these weights",
        False,
        key=PageControl.STRETCH,
        bind="query-params",
        help="On the fixed 0–1 scale, weights a few hundredths apart look alike; stretched, the colours run "
        "from the smallest weight to the largest (the legend says so).",
    )
    return lesson_colours(weights, bool(stretch))


def linked_select(
    label: str,
    options: Sequence[T],
    *,
    key: str,
    param: str,
    code: Callable[[T], str],
    name: Callable[[T], str],
    default: T,
    where=None,
    **widget,
) -> T:
    """A selectbox that shows each option's name and keeps its short code in the link (?param=code).

    Why not bind="query-params": a bound selectbox writes the *shown* name into the link
    (?preset=Life+is+short%2C+eat+dessert+first+...), and a name that holds a token of the
    sentence ("2: journey") stops matching as soon as the sentence changes. So this box keeps
    its link parameter itself, through st.query_params: the session takes the link's code the
    first time it draws the box, and the box's code is written back after every change (the
    default leaves the link, as it does for a bound widget). A code that names no option gets
    one warning and the default. persist_state keeps the choice across page switches.
    """
    by_code = {code(option): option for option in options}
    if key not in st.session_state:  # the first time this session draws the box: the link decides
        given = st.query_params.get_all(param)
        if len(given) == 1 and given[0] in by_code:
            st.session_state[key] = by_code[given[0]]
        elif given:
            link_warning(param, " & ".join(given), f"is not one of {', '.join(by_code)}")
    if st.session_state.get(key) not in options:  # not drawn yet, or a value the options lost
        st.session_state[key] = default
    value = (where or st).selectbox(label, options, format_func=name, key=key, persist_state="session", **widget)
    wanted = None if value == default else code(value)
    if st.query_params.get(param) != wanted:
        if wanted is None:
            del st.query_params[param]
        else:
            st.query_params[param] = wanted
    return value


def query_picker(tokens: Sequence[str], default: int, key: str, example: str | None = None) -> int:
    """The query token, also set by a click on a row of the weights heatmap (`draw.select_query_from_chart`).

    In the link as ?query=N, counted from 1 as the box shows it. One widget key per page: two
    pages sharing a key left the second page's picker at its first option after a switch
    between them (the book's query 'journey' became 'Your').

    The browser keeps a selectbox's value as its label ("2: journey") and sends it back on the
    next rerun. After the input changes, that label names no option of the new token list, and
    Streamlit then stores the label string itself as the widget's value (a str, not an index):
    anything that is not an index into these tokens goes back to the lesson's default.

    `example` (the preset's key) ties the choice to the example it was made on: a newly chosen
    example brings its own focus token (the attention notebook's x³, whose z³ it works out), while a
    token the student picks afterwards stays theirs until the example changes again.
    """
    default = min(default, len(tokens) - 1)
    if key in st.session_state and not is_index(st.session_state[key], len(tokens)):
        st.session_state[key] = default
    if example is not None:
        owner = f"{key}__example"  # the example the current choice belongs to
        if key in st.session_state and st.session_state.get(owner, example) != example:
            st.session_state[key] = default
        st.session_state[owner] = example
    return linked_select(
        "Query token",
        list(range(len(tokens))),
        key=key,
        param="query",
        code=lambda i: str(i + 1),
        name=lambda i: f"{i + 1}: {tokens[i]}",
        default=default,
        help="Pick the token whose attention you follow, or click a row in the weights heatmap.",
    )


def is_index(value: object, length: int) -> bool:
    """True for a plain int that indexes a list of `length` items (bool and str are not indexes)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < length
