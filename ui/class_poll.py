"""The class poll in presentation mode: the teacher's room, the students who follow it, live counts.

The store (rooms, answers, counts) is `services.class_poll`; this module only draws. Three roles:
- the teacher: in presentation mode, "Start a class poll" (the sidebar, or "Poll" in the step bar) makes a
  room; the session keeps
  its secret (session state only, never the link); the step bar shows the students' link as text and
  as a QR code; each predict question shows "N answers", a bar chart that refreshes itself
  (`st.fragment(run_every=...)`, on the teacher's page only) and a Reveal button;
- a student: a link with ?room=<code> follows the teacher's page and step; their answer to the
  predict question is sent once (changeable until the reveal); the right answer shows when the
  teacher reveals it;
- anyone else: the lesson as usual.
Every failure (a bad or expired code, a full room, Redis away) is one plain note, and the lesson
goes on as usual. In a poll the right answer fails closed: while the store does not answer, a
student sees it only once the teacher's reveal reaches them; a student who opened the link during
an outage is retried every REFRESH_S and joins when the store is back (issue 31, items 4 and 5).
The student's anonymous id lives in session state and survives the session's own "clear cache"
(ui/hardening.KEPT_ON_CLEAR); a reload is a new session, and so a new student, within the
store's per-address bounds.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit, urlunsplit

import segno
import streamlit as st
from streamlit.delta_generator import DeltaGenerator
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.scriptrunner_utils.exceptions import RerunException

from core.app import registry
from core.app.markup import code_span, literal
from core.charts.poll import Tally, tally_chart
from core.lessons.common import Prediction
from services import class_poll
from services.class_poll import (
    Answered,
    JoinsTooFast,
    PollError,
    PollStore,
    PollUnavailable,
    Room,
    RoomGone,
    RoomState,
)
from services.poll_memory import MemoryPollStore
from services.poll_redis import RedisPollStore
from ui import draw, hardening, presentation

PARAM = "room"  # ?room=<code>: the one link parameter of the poll, read here only
REFRESH_S = 2.0  # the teacher's counts and the students' "where is the teacher" check
HEARTBEAT_S = 30.0  # the teacher's page tells the store it is there (a room lives 10 minutes past the last)
_TEACHER = "class_poll_room"  # Room(code, secret) of the poll this session started
_STUDENT = "class_poll_student"  # this session's anonymous id (random, never shown)
_PROBLEM = "class_poll_problem"  # (where, why): a room refused, said beside the button that asked for it
_FOLLOWING = "class_poll_following"  # the code from the link, once read and found valid
_LINK_NOTE = "class_poll_link_note"  # what reading ?room= found: "" or the note to show
_SENT = "class_poll_sent"  # question id -> the option this session last sent
_FULL_RUN_DRAWN = "class_poll_full_run_drawn"  # False from a full run's start until it ends (see `full_run`)
_TELL_AGAIN = "class_poll_tell_again"  # a box's own run sent an answer: the watcher's next tick redraws the page
_WAITING = "class_poll_waiting"  # the link's code while the store cannot take this student yet (retried)
POLL_ICON = ":material/how_to_vote:"


@st.cache_resource(show_spinner=False)
def store() -> PollStore:
    """One store per process: Redis when ATTENTION_LAB_REDIS_URL is set, else this process's memory."""
    return store_from_environment()


def store_from_environment() -> PollStore:
    """Redis when ATTENTION_LAB_REDIS_URL is set (several replicas), else this process's memory."""
    url = os.environ.get(class_poll.REDIS_URL_VARIABLE, "").strip()
    return RedisPollStore(url) if url else MemoryPollStore()


@dataclass(frozen=True)
class Role:
    """This session's part in a poll: a teacher's room, a student's code, or neither."""

    teacher: Room | None
    following: str | None
    waiting: str | None = None  # a link's room this student joins once the store answers

    @property
    def code(self) -> str | None:
        return self.teacher.code if self.teacher else self.following


def role() -> Role:
    return Role(st.session_state.get(_TEACHER), st.session_state.get(_FOLLOWING), st.session_state.get(_WAITING))


def question_id(page: str, key: str) -> str:
    """A question is its page and its predict box's key (both the app's own constants)."""
    return f"{page}:{key}"


def _student_id() -> str:
    if _STUDENT not in st.session_state:
        st.session_state[_STUDENT] = secrets.token_hex(16)
    return st.session_state[_STUDENT]


# ------------------------------------------------------------------ the teacher
def _start(where: str) -> None:
    try:  # the owner is this session: a second room replaces its first (also after a "clear cache")
        st.session_state[_TEACHER] = store().create_room(owner=_student_id(), address=hardening.client_address())
    except PollError as error:
        st.session_state[_PROBLEM] = (where, str(error))


def _problem_from(where: str) -> None:
    """The note of a room the button at `where` asked for and did not get, beside that button."""
    problem = st.session_state.get(_PROBLEM)
    if problem and problem[0] == where:
        del st.session_state[_PROBLEM]
        st.info(problem[1], icon=POLL_ICON)


def _end() -> None:
    room: Room | None = st.session_state.pop(_TEACHER, None)
    if room is not None:
        with contextlib.suppress(PollError):  # gone already, or Redis away: it expires by itself
            store().close(room.code, room.secret)


def sidebar_controls(present: bool) -> None:
    """The sidebar's button (in presentation mode): start a class poll, or end the one running."""
    if not present:
        return
    if role().teacher is None:
        st.button(
            "Start a class poll",
            icon=POLL_ICON,
            on_click=_start,
            args=("sidebar",),
            key="class_poll_start",
            help="The students open a link or scan a QR code, answer each step's question on their own "
            "device, and you see the class's answers live before you reveal the right one.",
        )
    else:
        st.button("End the class poll", icon=":material/stop_circle:", on_click=_end, key="class_poll_end")
    _problem_from("sidebar")


def bar_button(where: DeltaGenerator | None) -> None:
    """ "Poll" in the step bar (presentation mode, not a student following a poll), before a poll runs.

    On a projector the teacher need not open the sidebar to start one: a sidebar opened by hand stays open
    (Streamlit keeps the reader's choice over the page's), and squeezed the options and pushed the live
    tally and the reveal below the fold (the s28 review).
    """
    if where is None or role().teacher is not None:
        return
    with where:
        st.button(
            "Poll",
            icon=POLL_ICON,
            on_click=_start,
            args=("bar",),
            key="class_poll_start_bar",
            width="stretch",
            help="Start a class poll: the students open a link or scan a QR code and answer each step's question "
            "on their own device; you see their answers live before you reveal the right one.",
        )
    _problem_from("bar")


def students_link(code: str) -> str:
    """This page with this session's link parameters, presentation mode on and ?room=<code>."""
    parts = urlsplit(st.context.url or "")
    params = {name: st.query_params[name] for name in st.query_params if name != PARAM}
    params.update({"present": "true", PARAM: code})
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(params), ""))


@functools.lru_cache(maxsize=64)  # bytes (immutable); the teacher's every rerun draws the same link
def qr_png(text: str) -> bytes:
    """The link as a QR code: 12-pixel modules, readable across a lecture hall once projected."""
    buffer = io.BytesIO()
    segno.make(text, error="m").save(buffer, kind="png", scale=12, border=2)
    return buffer.getvalue()


def teacher_panel(page: str, step: int) -> None:
    """In the step bar (always in view): the room's code, the link as text and as a QR code.

    Also records where the teacher is, so the students follow. A room that is gone (expired,
    Redis restarted empty) ends the poll with a note; Redis away leaves it, with a note.
    """
    room = role().teacher
    if room is None:
        return
    try:
        store().move(room.code, room.secret, page, step)
    except class_poll.RoomGone as error:
        st.session_state.pop(_TEACHER, None)
        st.info(f"{error} Start a new one from the sidebar.", icon=POLL_ICON)
        return
    except PollError as error:
        st.info(str(error), icon=POLL_ICON)
        return
    link = students_link(room.code)
    # Open on the lesson's first step, when the class joins; folded after it, and on a first step that holds a
    # question, so that it does not push the step's content (the question and its live count) below a
    # projector's fold (the s25 review, lesson 3's step 1). The teacher can open it again.
    joining = step <= 1 and not presentation.has_question(page, step)
    with st.expander(f"Class poll {class_poll.spoken(room.code)}: the students' link and QR code", expanded=joining):
        text, code = st.columns([1, 1], vertical_alignment="center")  # half the width: 300+ px on a projector
        with text:
            st.markdown(f"Code **{class_poll.spoken(room.code)}**. Students open this link or scan the code:")
            st.code(link, language=None, wrap_lines=True)
            st.caption("They follow your lesson and step; their answers are anonymous.")
        code.image(qr_png(link), caption="Scan to join the class poll", width="stretch")  # never wider than its column
    if not presentation.has_question(page, step):
        # A poll started on a step without a question gave the class nothing to answer, and nothing said so
        # (the s29 and s29b reviews): the first question's step, one click away, on the steps before it only
        # (after it, on a projector, the line would only take room from the step).
        ahead = presentation.next_question_step(page, step)
        if ahead is not None and presentation.next_question_step(page, 0) == ahead:
            st.button(
                f"No question on this step: go to step {ahead}, the next question",
                icon=":material/arrow_forward:",
                on_click=presentation.go_to_step,
                args=(ahead,),
                key="class_poll_next_question",
                type="tertiary",
            )
    _heartbeat(room, page, step)


@st.fragment(run_every=HEARTBEAT_S)
def _heartbeat(room: Room, page: str, step: int) -> None:
    """The teacher is still here: a room without this expires within minutes (services.class_poll.DEFAULT_TTL_S)."""
    try:
        store().move(room.code, room.secret, page, step)
    except RoomGone:
        st.rerun(scope="app")  # teacher_panel says so and ends the poll
    except PollError:
        pass  # Redis away: the next beat tries again; the panel's note says it on the next run


def teacher_tally(page: str, key: str, prediction: Prediction, *, beside: bool = False) -> None:
    """Under the question (`beside`: in a column beside its options), on the teacher's screen only: the class's
    answers, live."""
    room = role().teacher
    if room is not None:
        _live_tally(room, question_id(page, key), prediction, beside)


@st.fragment(run_every=REFRESH_S)
def _live_tally(room: Room, question: str, prediction: Prediction, beside: bool) -> None:
    """The teacher's live counts for one question: redrawn every REFRESH_S seconds, this part only."""
    try:
        counts = store().counts(room.code, question, len(prediction.options))
        state = store().room(room.code)
    except PollError as error:
        st.info(str(error), icon=POLL_ICON)
        return
    revealed = question in state.revealed
    # In the order the radio shows them, on this screen and the students': "option 2" means one thing.
    order = prediction.display_order()
    tally = Tally(tuple(counts[i] for i in order), tuple(prediction.options[i] for i in order))
    # Under the options, the count and its Reveal button on one line: a button below the count ended past a
    # projector's fold (the s25 review). Beside them, in a column two fifths wide, the button keeps its label on
    # a line of its own (on one line it shrank to its icon).
    headline, button = (st.container(), st.container()) if beside else st.columns([3, 1], vertical_alignment="center")
    headline.markdown(f"**Class poll: {tally.headline()}** from {state.joined} joined")
    if getattr(counts, "damaged", False) or state.damaged:
        st.caption("Some of the poll's stored values could not be read; they count as 0 (the server logged them).")
    if revealed:  # above the bars: under them it started at a projector's fold (the s30 review)
        right = literal(prediction.options[prediction.answer])
        st.success(f"Revealed to the class: “{right}”. {literal(prediction.explanation)}", icon=POLL_ICON)
    if tally.total > 0:  # at 0 answers an empty axis says nothing: the headline already reads "0 answers"
        draw.draw(
            tally_chart(tally, order.index(prediction.answer) if revealed else None),
            f"The class's answers: {tally.headline()}; "
            + "; ".join(f"{text}: {count}" for text, count in zip(tally.options, tally.counts, strict=True)),
        )
    if not revealed and button.button(
        "Reveal", icon=":material/visibility:", key=f"class_poll_reveal_{question}", type="primary"
    ):
        try:
            store().reveal(room.code, room.secret, question)
        except PollError as error:
            st.info(str(error), icon=POLL_ICON)
            return
        st.rerun(scope="app")


# ------------------------------------------------------------------ the students
def read_room_link() -> None:
    """Read ?room= once per session: a valid code of a live room makes this session join and follow it.

    A value that cannot be a code, or a room that is gone, is a note (kept, and shown on every
    run like the sidebar's link notes); the lesson goes on. While the store does not answer (or
    too many students join from this network at once), the session waits and retries every
    REFRESH_S, and says so.
    """
    if _LINK_NOTE not in st.session_state:
        st.session_state[_LINK_NOTE] = _room_from_link()
    note = st.session_state[_LINK_NOTE]
    if note:
        st.info(note, icon=POLL_ICON)
    waiting = role().waiting
    if waiting is not None and role().following is None:
        _retry_join(waiting)


def _room_from_link() -> str:
    """Follow the link's room if it is live; else the note that says why not ("" when no room is asked)."""
    given = st.query_params.get_all(PARAM)
    if not given or role().teacher is not None:
        return ""
    code = class_poll.parse_code(given[0]) if len(given) == 1 else None
    if code is None:
        return f"{code_span(PARAM + '=' + ' & '.join(given), 40)} is not a class poll code; the lesson works as usual."
    return _join(code)


def _join(code: str) -> str:
    """Join the room: "" once joined (or while waiting to: _WAITING holds the code), else the note."""
    try:
        store().room(code)
        store().join(code, _student_id(), hardening.client_address())
    except (PollUnavailable, JoinsTooFast):
        st.session_state[_WAITING] = code
        return ""
    except PollError as error:
        st.session_state.pop(_WAITING, None)
        return f"{error} The lesson works as usual."
    st.session_state.pop(_WAITING, None)
    st.session_state[_FOLLOWING] = code
    return ""


@st.fragment(run_every=REFRESH_S)
def _retry_join(code: str) -> None:
    """A student whose link came while the store could not take them: try again, every REFRESH_S."""
    note = _join(code)
    if note or role().following == code:
        st.session_state[_LINK_NOTE] = note
        st.rerun(scope="app")  # joined (or the room is gone): the page follows the teacher from here
    st.info(
        f"Joining class poll {class_poll.spoken(code)}: it cannot take you yet (its store does not answer, or "
        f"many students are joining from this network). This page tries again every {REFRESH_S:.0f} s and "
        "joins by itself; the answers stay hidden until the teacher reveals them.",
        icon=POLL_ICON,
    )


def follow_teacher(current_page: str) -> RoomState | None:
    """Before the page runs: put this student on the teacher's page and step. Returns the room's state.

    The step goes into session state before the step box is drawn; another page is opened with
    this session's link parameters (its settings), so the student's numbers stay the teacher's.
    """
    code = role().following
    if code is None:
        return None
    try:
        state = store().room(code)
    except PollError as error:
        st.info(str(error), icon=POLL_ICON)
        if isinstance(error, class_poll.RoomGone):
            st.session_state.pop(_FOLLOWING, None)
        return None
    if state.page and state.page != current_page and state.page in {spec.slug for spec in registry.PAGES}:
        # Only the poll's own parameter: the bound widgets' parameters may not be set here, and the
        # frame writes them back after a page switch (streamlit_app.restore_link).
        st.switch_page(registry.page(state.page).file, query_params={PARAM: code})
    if state.page == current_page and st.session_state.get("step") != state.step:
        st.session_state["step"] = state.step  # before the step box is drawn: it shows this step
    return state


@contextlib.contextmanager
def full_run() -> Iterator[None]:
    """Around the app's full run: whether it reached its end (or stopped on purpose, st.stop) or was cut short.

    On a busy server one student's full run, after following the teacher, drew the sidebar and the lesson's
    opening and then gave way to a run of the poll watcher alone (its websocket record: the full run never
    finished, a fragment run started); nothing redrew the page, which stayed half drawn for 90 s (issue 40,
    item 6). The watcher reads this flag: a full run cut short and not run again reruns the whole app.
    """
    st.session_state[_FULL_RUN_DRAWN] = False
    st.session_state[_TELL_AGAIN] = False  # this run draws every box, with what each answer is now
    try:
        yield
    except RerunException:
        raise  # cut short for another run: if that run is only the watcher's, the watcher reruns the app
    except BaseException:  # st.stop (a message drawn), or an error Streamlit shows: ended as it will, no retry
        st.session_state[_FULL_RUN_DRAWN] = True
        raise
    st.session_state[_FULL_RUN_DRAWN] = True


def _fragment_run() -> bool:
    """Whether this run is a fragment's alone: in a full run the watcher is drawn inside it, mid-run."""
    ctx = get_script_run_ctx()
    return bool(ctx is not None and ctx.fragment_ids_this_run)


def _page_id() -> str:
    """The page this run draws, as the browser asked for it (Streamlit's page script hash)."""
    ctx = get_script_run_ctx()
    return ctx.page_script_hash if ctx is not None else ""


@st.fragment(run_every=REFRESH_S)
def _watch_room(code: str, seen: RoomState | None, page: str) -> None:
    """A student's check, every REFRESH_S seconds: the teacher moved or revealed -> rerun the page.

    `page`: the page of the full run that drew this watcher. On a busy server the browser queues several of
    the watcher's ticks; the first one follows the teacher to another lesson (a page switch), and the others
    then run with the old lesson's page. Told that page, the browser cleared the new lesson and redrew only
    this line: a student's screen stayed blank under the step bar for good (issue 40, item 6; the websocket
    record of tests/browser/test_classroom.py showed it). Such a tick reruns the whole app instead, as does a
    tick after a full run that was cut short (`full_run`), and the first tick after a predict box's own run sent
    an answer (`predict_in_poll`): that run's last messages can fail to reach the browser (below).
    """
    if _page_id() != page or (_fragment_run() and _page_may_be_stale()):
        st.rerun(scope="app")
    try:
        now = store().room(code)
    except PollError:
        now = None
    if now != seen:
        st.rerun(scope="app")
    st.caption(f"Class poll {class_poll.spoken(code)}: you follow the teacher's lesson and step.")


def _page_may_be_stale() -> bool:
    """Whether what the browser shows may lag what this session's runs drew: a full run cut short, or a predict
    box that sent an answer in a run of its own (a fragment's).

    Why the second: on a busy server a student's answer was counted while the box still read "choose an answer"
    for good (1 student in 45 under load, tests/browser/test_classroom.py). The websocket record showed the box's
    run sending its first three messages and then nothing, not even its end, and the watcher's next run starting.
    Streamlit hands a run's messages to the browser from its event loop, after the run; a watcher tick that
    reaches the server in between, once the box's run is over, starts a new script runner, and the event loop
    then drops the old runner's remaining messages as coming from a runner no longer current
    (streamlit/runtime/app_session.py, 1.67). Nothing on the server can see that loss, so the page is redrawn
    once after every answer sent from a box's own run: a full run costs a little, and the answer is always told.
    """
    return st.session_state.get(_FULL_RUN_DRAWN) is False or bool(st.session_state.get(_TELL_AGAIN))


def student_bar(state: RoomState | None) -> None:
    """In the step bar: the line that says this session follows a poll, and the fragment that watches it."""
    code = role().following
    if code is not None:  # also while the store is away (state None): its return reruns the page
        _watch_room(code, state, _page_id())


# ------------------------------------------------------------------ the predict box
def predict_in_poll(page: str, key: str, prediction: Prediction, choice: int | None) -> bool | None:
    """The poll's part of a predict box. Returns whether to show the right answer now:
    True/False in a poll (after / before the reveal), None outside one (the box decides as usual).

    Fails closed: when the store cannot say whether the teacher revealed the answer, it stays hidden.
    """
    current = role()
    if current.teacher is not None:
        return None  # the teacher, whose box shows the counts: teacher_tally
    if current.code is None:
        if current.waiting is None:
            return None  # no poll
        st.caption("Class poll: the answer shows once you have joined and the teacher reveals it.")
        return False
    question = question_id(page, key)
    try:
        if choice is not None and st.session_state.get(_SENT, {}).get(question) != choice:
            outcome = store().answer(
                current.code,
                question,
                _student_id(),
                choice,
                len(prediction.options),
                address=hardening.client_address(),
            )
            if outcome is not Answered.CLOSED:
                st.session_state[_SENT] = {**st.session_state.get(_SENT, {}), question: choice}
                if _fragment_run():  # the box's own run: its "answer is in" may not reach the browser
                    st.session_state[_TELL_AGAIN] = True
    except RoomGone as error:
        st.info(str(error), icon=POLL_ICON)
        st.session_state.pop(_FOLLOWING, None)
        return None  # the poll is over: the lesson as usual
    except PollError as error:
        st.info(f"{error} Your answer is not in yet.", icon=POLL_ICON)
    try:
        state = store().room(current.code)
    except RoomGone as error:
        st.info(str(error), icon=POLL_ICON)
        st.session_state.pop(_FOLLOWING, None)
        return None
    except PollError as error:
        st.info(f"{error} The right answer stays hidden until the teacher's reveal reaches you.", icon=POLL_ICON)
        return False
    if question in state.revealed:
        return True
    if choice is None:
        st.caption("Class poll: choose an answer; the teacher reveals the right one when the class has voted.")
    elif st.session_state.get(_SENT, {}).get(question) == choice:
        st.info(
            "Your answer is in (anonymous). You may change it until the teacher reveals the right one.",
            icon=POLL_ICON,
        )
    return False
