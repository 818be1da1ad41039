"""A lecture hall without browsers: simulated students that speak Streamlit's own websocket protocol.

Each student is one asyncio task (hundreds fit in one process on one core):
1. it fetches the page of its link over HTTP (as a browser does; through a load balancer this is
   where the affinity cookie is set), opens the websocket `/_stcore/stream` and sends the rerun a
   browser sends on arrival: `BackMsg.rerun_script` with the link's query string (`seed=...`) and
   the page's URL path;
2. then, until the class ends, it thinks for a random time and acts. While the page shows a
   predict-then-reveal question the student has not answered (a radio keyed `predict_...` in a
   bordered box, ui/widgets.py `_predict_box`), it answers it, first question first: it chooses an
   option, which the browser sends as a rerun of the box's st.fragment; the box then reruns the
   page, which draws what the answer unlocks. Otherwise it usually steps its seed up by one (the
   sidebar's "+": a rerun carrying every widget's state, the seed box's new value among them), and
   sometimes (PAGE_SWITCH_P) opens another lesson through the sidebar (a rerun with that page's
   script hash). A question whose key changes with the settings (its fingerprint) starts unanswered
   again after a seed step, and a lesson opened again asks its questions again, as in a browser;
3. each action is timed from sending it to the `ForwardMsg.script_finished` that says the run
   ended (FINISHED_SUCCESSFULLY, or FINISHED_FRAGMENT_RUN_SUCCESSFULLY for an answer that reran its
   box alone; a run cut short for a newer one is not the end);
4. every run's elements are checked against the student's own settings: the page is the one asked
   for, every seed in a Code box is the student's (seed, or seed + 1 for the dropout draw), and on
   the trainable-weights page a context vector z shown equals what `core` computes for that seed.
   What must be on the page (the student's seed in a Code box, z) is required only once the whole
   page ran with every question on it answered (`RunView.complete`): a page may hold anything back
   until its question is answered (lesson 9's cost Code box does), so the student answers first and
   the check follows on the answer's run. Wrong numbers are flagged on every run, answered or not.
   Seed ranges never overlap (student i starts at 1000·(i+1)), so a wrong number says whose it is.

Think time: lognormal with a median of THINK_MEDIAN_S = 5 s and sigma THINK_SIGMA = 0.6 (90% of
pauses between 1.9 s and 13.4 s, mean 6.0 s): a student reads what changed before the next click.
The think time starts when the run has finished, so a slow server also slows its students down
(a closed loop, as in a real class). If the connection drops (a replica dies), the student opens
its link again, with its current settings in the query string, and carries on.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import math
import random
import re
import time
from dataclasses import dataclass, field, replace
from functools import lru_cache
from urllib.parse import urlsplit

import websockets
from streamlit.proto.Alert_pb2 import Alert
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

from testkit.harness import NO_SEED_PAGES, PAGE_URLS, percentile

THINK_MEDIAN_S = 5.0  # median pause between two actions of one student
THINK_SIGMA = 0.6  # lognormal shape: 90% of pauses within median · e^(±1.645·0.6) = 1.9 .. 13.4 s
PAGE_SWITCH_P = 0.25  # of the actions that answer no question: one in four opens another lesson, the rest step the seed
SEEDS_PER_STUDENT = 1000  # student i's seeds: 1000·(i+1) and up, one per seed step
RUN_TIMEOUT_S = 30.0  # a run that has not finished by then counts as an error
WARM_UP_TIMEOUT_S = 300.0  # a fresh server's first run (its imports) on a busy machine took over 30 s
# Pages whose Code box holds the seed: not those that grey the seed out (the registry says which).
# (The training lab's box, once drawn only after a student trained, is on the page from the start.)
SEED_PAGES = frozenset(PAGE_URLS) - NO_SEED_PAGES
QUESTION_PREFIX = "predict_"  # a predict-then-reveal radio's key: predict_<name>_<fingerprint> (ui/widgets.py)
CODE_SEED = re.compile(r"manual_seed\((\d+)\)|^seed = (\d+)$", re.MULTILINE)
# Seeds a page's Code box fixes whatever the sidebar says: lesson 9 times random tensors drawn from
# seed 0. Simulated students' seeds start far above (1000 and up), so these are never another student's.
FIXED_CODE_SEEDS: dict[str, frozenset[int]] = {
    # ... and its KV-cache box rebuilds the page's trained tiny model, trained from the training lab's seed 123.
    "attention_at_scale": frozenset({0, 123}),
    "cross_attention": frozenset({123}),  # the trained cross-attention's own run (tiny_seq2seq's default seed)
    "inside_gpt": frozenset({0}),  # lesson 10's own sampling seed box (default 0), not the sidebar's
}
Z_SHOWN = re.compile(r"context vector z for “[^”]*” = \*\*(\[[^\]]*\])\*\*")  # pages/3_trainable_weights.py
FINISHED = ForwardMsg.ScriptFinishedStatus


class Action(enum.StrEnum):
    OPEN = "open"  # open the link (first arrival, or again after a lost connection)
    SEED = "seed"  # step the seed up by one
    PAGE = "page"  # open another lesson through the sidebar
    POLL = "poll"  # start a class poll, or answer its question (loadtest/class_poll.py)
    ANSWER = "answer"  # choose an option in a predict question the page shows unanswered


@dataclass(frozen=True)
class Interaction:
    """One timed action of one student (seconds: from sending it to script_finished)."""

    student: int
    action: Action
    page: str
    seed: int
    at_s: float  # when it was sent, seconds since the class started
    seconds: float


@dataclass(frozen=True)
class Session:
    """One websocket session of one student: the server's session id and the replica cookie it had."""

    student: int
    session_id: str
    replica: str  # the affinity cookie's value ("" without a load balancer)


@dataclass(frozen=True)
class ClassResult:
    """What a simulated class saw. errors: transport failures and timeouts; mismatches: wrong numbers."""

    students: int
    seconds: float
    interactions: tuple[Interaction, ...]
    errors: tuple[str, ...]
    mismatches: tuple[str, ...]
    sessions: tuple[Session, ...]
    reconnects: int
    checked: int = 0  # runs checked whole: every question on the page answered (RunView.complete)

    def changes(self, after_s: float = 0.0) -> list[float]:
        """Durations of the seed steps, page switches and answers (not the arrivals) sent after `after_s`."""
        return [i.seconds for i in self.interactions if i.action != Action.OPEN and i.at_s >= after_s]

    def summary(self, after_s: float = 0.0) -> dict[str, float | int]:
        changes = self.changes(after_s)
        opens = [i.seconds for i in self.interactions if i.action == Action.OPEN]
        quantile = lambda values, q: round(percentile(values, q), 3) if values else math.nan  # noqa: E731
        return {
            "students": self.students,
            "changes": len(changes),
            "changes_per_s": round(len(changes) / max(self.seconds - after_s, 1e-9), 2),
            "p50_s": quantile(changes, 0.5),
            "p95_s": quantile(changes, 0.95),
            "max_s": round(max(changes), 3) if changes else math.nan,
            "open_p95_s": quantile(opens, 0.95),
            "errors": len(self.errors),
            "mismatches": len(self.mismatches),
            "checked": self.checked,
            "answers": sum(i.action == Action.ANSWER and i.at_s >= after_s for i in self.interactions),
            "reconnects": self.reconnects,
        }


@lru_cache(maxsize=4096)
def expected_z(seed: int) -> str:
    """What the trainable-weights page must show for the book's example at `seed` (query 'journey')."""
    from core.app.settings import settings_for_preset
    from core.lessons import trainable_weights

    lesson = trainable_weights.trainable_lesson(replace(settings_for_preset("book"), seed=seed), 1)
    return "[" + ", ".join(f"{v:.4f}" for v in lesson.query_context) + "]"


def think_time(rng: random.Random) -> float:
    """A student's pause before the next action (lognormal, median THINK_MEDIAN_S)."""
    return rng.lognormvariate(math.log(THINK_MEDIAN_S), THINK_SIGMA)


@dataclass
class RunView:
    """What one script run sent back, as far as the checks need it."""

    session_id: str = ""
    page_hash: str = ""
    pages: dict[str, str] = field(default_factory=dict)  # URL path -> page script hash (navigation)
    page_names: dict[str, str] = field(default_factory=dict)  # page script hash -> URL path (hidden aliases too)
    widgets: dict[str, WidgetState] = field(default_factory=dict)
    buttons: dict[str, str] = field(default_factory=dict)  # button label -> widget id (loadtest/training_queue.py)
    code_seeds: list[int] = field(default_factory=list)
    z: str | None = None
    problems: list[str] = field(default_factory=list)
    widget_ids: dict[str, str] = field(default_factory=dict)  # a widget's key -> its id (every widget)
    texts: list[str] = field(default_factory=list)  # markdown, notes and chart descriptions, in order
    radio_options: dict[str, list[str]] = field(default_factory=dict)  # a radio's id -> its option labels
    fragments: dict[str, str] = field(default_factory=dict)  # a widget's key -> the st.fragment it is in
    kinds: dict[str, str] = field(default_factory=dict)  # a widget's id -> its element type (loadtest/hostile_probe.py)
    drawn: set[str] = field(default_factory=set)  # the ids of the widgets this run drew
    questions: list[str] = field(default_factory=list)  # the predict radios' ids this run drew, in page order
    whole: bool = False  # the whole page ran (FINISHED_SUCCESSFULLY), not only a fragment

    @property
    def unanswered(self) -> list[str]:
        """The predict questions this run drew that the student has not answered (no value of its own)."""
        return [q for q in self.questions if q not in self.widgets]

    @property
    def complete(self) -> bool:
        """The whole page ran with every question on it answered: what answers unlock must be there."""
        return self.whole and not self.unanswered


def widget_state(element_type: str, proto, previous: WidgetState | None) -> WidgetState | None:
    """The value a browser would hold for this widget after the run (None: not a widget we track).

    A widget proto carries a value only when the server sets one (`set_value`, e.g. from the link);
    otherwise the browser keeps what it had, or the widget's default on first sight.
    """
    state = WidgetState(id=proto.id)
    if previous is not None and not getattr(proto, "set_value", False):
        return previous
    if element_type == "number_input":  # the browser sends an integer box's value as int_value
        value = proto.value if proto.set_value else proto.default
        if proto.data_type == proto.DataType.INT:
            state.int_value = int(value)
        else:
            state.double_value = value
    elif element_type == "slider" and proto.options:  # a select_slider: its options' labels
        if proto.set_value:
            return None  # never set by the server on our pages; the server keeps its own value
        state.string_array_value.data.extend(proto.options[int(i)] for i in proto.default)
    elif element_type == "slider":
        state.double_array_value.data.extend(proto.value if proto.set_value else proto.default)
    elif element_type == "checkbox":
        state.bool_value = proto.value if proto.set_value else proto.default
    elif element_type == "selectbox":
        if proto.set_value:
            state.string_value = proto.raw_value
        elif 0 <= proto.default < len(proto.options):
            state.string_value = proto.options[proto.default]
        else:
            return None
    elif element_type == "text_input":
        state.string_value = proto.value if proto.set_value else proto.default
    else:
        return None  # other widgets (segmented controls, chart selections): the server keeps their values
    return state


def read_message(message: ForwardMsg, view: RunView) -> None:
    """Fold one ForwardMsg into the view of the current run."""
    kind = message.WhichOneof("type")
    if kind == "new_session":
        view.session_id = message.new_session.initialize.session_id or view.session_id
    elif kind == "navigation":  # the lessons, and which one this run shows
        view.page_hash = message.navigation.page_script_hash
        view.page_names = {p.page_script_hash: p.url_pathname or "overview" for p in message.navigation.app_pages}
        view.pages = {}
        for p in message.navigation.app_pages:  # the first entry of a path wins: "/" for the overview
            view.pages.setdefault(p.url_pathname or "overview", p.page_script_hash)
    elif kind == "delta" and message.delta.WhichOneof("type") == "new_element":
        element = message.delta.new_element
        element_type = element.WhichOneof("type")
        proto = getattr(element, element_type)
        if element_type == "button":
            view.buttons[proto.label] = proto.id
        if element_type == "vega_lite_chart" and proto.alt:
            view.texts.append(proto.alt)
        if getattr(proto, "id", ""):
            key = proto.id.rsplit("-", 1)[-1]  # "$$ID-<hash>-<key>"
            view.widget_ids[key] = proto.id
            if message.delta.fragment_id:
                view.fragments[key] = message.delta.fragment_id
            view.kinds[proto.id] = element_type
            view.drawn.add(proto.id)
            if element_type == "radio":
                view.radio_options[proto.id] = list(proto.options)
                if key.startswith(QUESTION_PREFIX) and proto.id not in view.questions:
                    view.questions.append(proto.id)
            state = widget_state(element_type, proto, view.widgets.get(proto.id))
            if state is not None:
                view.widgets[proto.id] = state
        elif element_type == "code":
            view.code_seeds += [int(a or b) for a, b in CODE_SEED.findall(proto.code_text)]
        elif element_type == "markdown" and (match := Z_SHOWN.search(proto.body)):
            view.z = match.group(1)
        elif element_type in ("markdown", "alert"):
            view.texts.append(proto.body)
            if element_type == "alert" and proto.format == Alert.ERROR:  # (an elif after this one never ran)
                view.problems.append(f"error box: {proto.body[:200]}")
        elif element_type == "exception":
            view.problems.append(f"exception: {proto.type}: {proto.message[:200]}")


def check(view: RunView, page: str, seed: int) -> list[str]:
    """Whatever in this run does not belong to this student's page and seed.

    A wrong number is wrong on any run. A missing one only on a complete run (`RunView.complete`): before
    the student has answered every question on the page, the page may still hold back what they unlock.
    """
    wrong = list(view.problems)
    if view.page_names.get(view.page_hash) != page:
        wrong.append(f"asked for page {page}, got {view.page_names.get(view.page_hash, view.page_hash or 'none')}")
    allowed = {seed, seed + 1} | FIXED_CODE_SEEDS.get(page, frozenset())
    foreign = sorted({s for s in view.code_seeds if s not in allowed})
    if foreign:
        wrong.append(f"Code box seeds {foreign}, expected {seed}")
    if page == "trainable_weights" and (view.z is not None or view.complete) and view.z != expected_z(seed):
        wrong.append(f"z = {view.z}, expected {expected_z(seed)} for seed {seed}")
    if not view.complete:
        return wrong
    if page in SEED_PAGES and seed not in view.code_seeds:
        wrong.append(f"Code box without seed {seed} on {page}")
    return wrong


class ConnectionLost(Exception):
    """The websocket closed under a student (its replica went away)."""


@dataclass
class Student:
    """One simulated student: its link, its current settings and its connection."""

    index: int
    base_url: str  # http://host:port
    started: float  # the class's start (time.monotonic)
    rng: random.Random
    page: str
    seed: int
    cookie: str = ""  # the load balancer's affinity cookie, "name=value"
    view: RunView = field(default_factory=RunView)
    socket: websockets.ClientConnection | None = None

    @property
    def query_string(self) -> str:
        return f"seed={self.seed}"

    async def fetch_page(self) -> None:
        """GET the link's page as a browser does first; keep the affinity cookie the balancer sets."""
        parts = urlsplit(self.base_url)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        path = "/" if self.page == "overview" else f"/{self.page}"
        cookie = f"Cookie: {self.cookie}\r\n" if self.cookie else ""
        host = f"Host: {parts.netloc}\r\n"
        request = f"GET {path}?{self.query_string} HTTP/1.1\r\n{host}{cookie}Connection: close\r\n\r\n"
        writer.write(request.encode())
        await writer.drain()
        head = (await asyncio.wait_for(reader.read(), RUN_TIMEOUT_S)).split(b"\r\n\r\n", 1)[0].decode("latin-1")
        writer.close()
        if not head.startswith("HTTP/1.1 200"):
            raise ConnectionLost(f"GET {path}: {head.splitlines()[0] if head else 'no answer'}")
        for line in head.split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "set-cookie":
                self.cookie = value.strip().split(";", 1)[0]

    async def connect(self) -> None:
        await self.fetch_page()
        ws_url = self.base_url.replace("http://", "ws://", 1) + "/_stcore/stream"
        headers = {"Cookie": self.cookie} if self.cookie else None
        self.socket = await websockets.connect(
            ws_url, subprotocols=["streamlit"], additional_headers=headers, max_size=None, open_timeout=RUN_TIMEOUT_S
        )
        self.view = RunView()

    async def rerun(
        self, action: Action, page_hash: str = "", fragment_id: str = "", timeout_s: float | None = None
    ) -> tuple[float, RunView]:
        """Send one rerun as the browser would and wait for its end; returns (seconds, what it sent).

        `fragment_id`: rerun only that st.fragment (as the browser does for a widget inside one).
        `timeout_s`: the longest wait for the next message (default RUN_TIMEOUT_S).
        """
        timeout_s = RUN_TIMEOUT_S if timeout_s is None else timeout_s
        message = BackMsg()
        state = message.rerun_script
        state.query_string = self.query_string
        state.page_name = "" if self.page == "overview" else self.page
        state.page_script_hash = (page_hash or self.view.page_hash) if fragment_id else page_hash
        state.fragment_id = fragment_id
        if action != Action.OPEN:
            state.widget_states.widgets.extend(self.view.widgets.values())
        view = RunView(
            session_id=self.view.session_id,
            pages=self.view.pages,
            page_names=self.view.page_names,
            widgets=dict(self.view.widgets),
            widget_ids=dict(self.view.widget_ids),
            radio_options=dict(self.view.radio_options),
            fragments=dict(self.view.fragments),
            kinds=dict(self.view.kinds),
            page_hash=self.view.page_hash if fragment_id else "",
        )
        sent = time.monotonic()
        try:
            await self.socket.send(message.SerializeToString())
            while True:
                reply = ForwardMsg()
                reply.ParseFromString(await asyncio.wait_for(self.socket.recv(), timeout_s))
                read_message(reply, view)
                if reply.WhichOneof("type") == "script_finished" and reply.script_finished in (
                    FINISHED.FINISHED_SUCCESSFULLY,
                    FINISHED.FINISHED_WITH_COMPILE_ERROR,
                    FINISHED.FINISHED_FRAGMENT_RUN_SUCCESSFULLY,
                ):
                    if reply.script_finished == FINISHED.FINISHED_WITH_COMPILE_ERROR:
                        view.problems.append("script finished with a compile error")
                    view.whole = reply.script_finished == FINISHED.FINISHED_SUCCESSFULLY
                    break
        except websockets.ConnectionClosed as closed:
            raise ConnectionLost(str(closed)) from closed
        if view.whole:  # as a browser does, forget the choices of radios this page no longer draws
            view.widgets = {i: s for i, s in view.widgets.items() if view.kinds.get(i) != "radio" or i in view.drawn}
        self.view = view
        return time.monotonic() - sent, view

    def question(self) -> str | None:
        """The first predict question on the page the student has not answered (its radio's id), if any."""
        return next(iter(self.view.unanswered), None)

    async def answer(self) -> tuple[float, RunView]:
        """Choose an option in the first unanswered question, as a browser does: the radio's new value and a
        rerun of its st.fragment (ui/widgets.py `_predict_box`), which reruns the page when the answer is out.

        The option: the student's seed modulo their number (no draw from `rng`, whose think times the
        reference class shares). The fragment's id is the latest run's: it moves when an answer above it
        unlocks more of the page, and a rerun of a fragment the page no longer has gets no answer.
        """
        widget = self.question()
        if widget is None:
            raise ValueError("no unanswered question on this page")
        options = self.view.radio_options[widget]
        self.view.widgets[widget] = WidgetState(id=widget, string_value=options[self.seed % len(options)])
        return await self.rerun(Action.ANSWER, fragment_id=self.view.fragments.get(widget.rsplit("-", 1)[-1], ""))

    def set_seed(self, seed: int) -> None:
        """Put the new seed into the seed box's widget state, as a click on its '+' does."""
        self.seed = seed
        for widget_id, state in self.view.widgets.items():
            if widget_id.endswith("-seed"):
                state.double_value = float(seed)

    def problems(self, view: RunView) -> list[str]:
        """Whatever in this run does not belong to this student's page and seed."""
        return check(view, self.page, self.seed)

    @staticmethod
    def first_page(drawn: str) -> str:
        """The page this student's link opens, given the one drawn for it."""
        return drawn


class ReferenceStudent(Student):
    """A student of the reference page (loadtest/reference_page.py): one slider, one heatmap, no pages.

    Same arrivals and think times as a lesson student (the same random draws); each change moves the
    slider to a new value (the seed modulo 101), where a lesson student steps the seed or switches
    page. The page shows no seed, so only errors and exceptions are checked.
    """

    @property
    def query_string(self) -> str:
        return ""

    def set_seed(self, seed: int) -> None:
        self.seed = seed
        for widget_id, state in self.view.widgets.items():
            if widget_id.endswith("-value"):
                del state.double_array_value.data[:]
                state.double_array_value.data.append(float(seed % 101))

    def problems(self, view: RunView) -> list[str]:
        return list(view.problems)

    @staticmethod
    def first_page(drawn: str) -> str:
        return "overview"  # the reference app's one page, at "/"


@dataclass
class Recorder:
    """Everything the class saw (one per class; asyncio tasks share it in one thread)."""

    started: float
    interactions: list[Interaction] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    sessions: dict[str, Session] = field(default_factory=dict)
    reconnects: int = 0
    checked: int = 0  # runs checked whole (RunView.complete)

    def record(self, student: Student, action: Action, sent_at: float, seconds: float, view: RunView) -> None:
        self.interactions.append(
            Interaction(student.index, action, student.page, student.seed, sent_at - self.started, seconds)
        )
        replica = student.cookie.partition("=")[2]
        if view.session_id:
            self.sessions[view.session_id] = Session(student.index, view.session_id, replica)
        self.checked += view.complete
        for problem in student.problems(view):
            self.mismatches.append(f"student {student.index} ({action}, {student.page}): {problem}")


async def attend(student: Student, recorder: Recorder, ends_at: float) -> None:
    """One student's class: open the link, then think and act until `ends_at` (time.monotonic)."""
    action = Action.OPEN
    page_hash = ""
    while time.monotonic() < ends_at:
        try:
            if action == Action.OPEN:
                await student.connect()
            sent_at = time.monotonic()
            if action == Action.ANSWER:
                seconds, view = await student.answer()
            else:
                seconds, view = await student.rerun(action, page_hash)
            recorder.record(student, action, sent_at, seconds, view)
        except TimeoutError:  # before OSError, of which it is a subclass
            recorder.errors.append(f"student {student.index} ({action}, {student.page}): no script_finished")
            await close(student)
            action, page_hash = Action.OPEN, ""
            continue
        except (ConnectionLost, OSError, websockets.InvalidHandshake, websockets.InvalidStatus) as lost:
            # Through a balancer, a lost replica closes the socket: open the link again elsewhere.
            recorder.errors.append(f"student {student.index} ({action}, {student.page}): {type(lost).__name__}: {lost}")
            recorder.reconnects += 1
            await close(student)
            action, page_hash = Action.OPEN, ""
            await asyncio.sleep(1.0 + student.rng.random())  # a browser's reconnect back-off
            continue
        await asyncio.sleep(min(think_time(student.rng), max(0.0, ends_at - time.monotonic())))
        if time.monotonic() >= ends_at:
            break
        switch = student.rng.random() < PAGE_SWITCH_P  # drawn by every student: the same think times follow
        if student.question() is not None:  # a question first: what it unlocks is checked on the answer's run
            action, page_hash = Action.ANSWER, ""
        elif switch and student.view.pages and not isinstance(student, ReferenceStudent):
            student.page = student.rng.choice([p for p in PAGE_URLS if p != student.page])
            action, page_hash = Action.PAGE, student.view.pages.get(student.page, "")
        else:
            student.set_seed(student.seed + 1)
            action, page_hash = Action.SEED, ""
    await close(student)


async def close(student: Student) -> None:
    if student.socket is not None:
        socket, student.socket = student.socket, None
        with contextlib.suppress(Exception):  # a socket that is already gone has nothing left to close
            await socket.close()


async def run_class(
    base_url: str,
    students: int,
    seconds: float,
    *,
    arrival_s: float | None = None,
    random_seed: int = 0,
    first_student: int = 0,
    on_started=None,
    student_class: type[Student] = Student,
) -> ClassResult:
    """Simulate `students` students for `seconds` against the app at `base_url` (http://host:port).

    Arrivals are spread evenly over `arrival_s` (default: 0.1 s per student, at most 20 s), as a
    class opens a shared link. `first_student` offsets the seed ranges (two classes, no overlap).
    `on_started(recorder)` is awaited once the class has started (the replica test kills a server then).
    `student_class`: ReferenceStudent for a class on the reference page (loadtest/reference_page.py).
    """
    arrival_s = min(0.1 * students, 20.0) if arrival_s is None else arrival_s
    started = time.monotonic()
    ends_at = started + seconds
    recorder = Recorder(started)
    rng = random.Random(random_seed)
    tasks = []
    for i in range(students):
        index = first_student + i
        student = student_class(
            index=index,
            base_url=base_url,
            started=started,
            rng=random.Random(rng.getrandbits(64)),
            page=student_class.first_page(rng.choice(PAGE_URLS)),  # drawn for every class: same random streams
            seed=SEEDS_PER_STUDENT * (index + 1),
        )
        delay = arrival_s * i / max(students, 1)
        tasks.append(asyncio.create_task(arrive(student, recorder, ends_at, delay)))
    if on_started is not None:
        await on_started(recorder)
    await asyncio.gather(*tasks)
    return ClassResult(
        students=students,
        seconds=time.monotonic() - started,
        interactions=tuple(recorder.interactions),
        errors=tuple(recorder.errors),
        mismatches=tuple(recorder.mismatches),
        sessions=tuple(recorder.sessions.values()),
        reconnects=recorder.reconnects,
        checked=recorder.checked,
    )


async def arrive(student: Student, recorder: Recorder, ends_at: float, delay: float) -> None:
    await asyncio.sleep(delay)
    await attend(student, recorder, ends_at)


async def warm_up(
    base_url: str, pages: tuple[str, ...] = ("trainable_weights",), student_class: type[Student] = Student
) -> None:
    """Open `pages` once on a fresh server, so that its imports and first runs are done before a class."""
    for page in pages:
        student = student_class(-1, base_url, time.monotonic(), random.Random(0), page, seed=123)
        try:
            await student.connect()
            await student.rerun(Action.OPEN, timeout_s=WARM_UP_TIMEOUT_S)
        finally:
            await close(student)


def main() -> None:
    import argparse
    import json

    parser = argparse.ArgumentParser(description="Simulated students against a running Attention Lab.")
    parser.add_argument("url", help="the app's base URL, e.g. http://127.0.0.1:8501")
    parser.add_argument("--students", type=int, default=25)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--arrival-s", type=float, default=None)
    args = parser.parse_args()
    result = asyncio.run(run_class(args.url, args.students, args.seconds, arrival_s=args.arrival_s))
    print(json.dumps(result.summary(), indent=2))
    for line in (result.errors + result.mismatches)[:20]:
        print(line)


if __name__ == "__main__":
    main()
