"""Lesson 10's model runs through the queue (ui/gpt_queue.py, core/lessons/inside_gpt_runs.py `shared_by_everyone`
and `run_lesson`): a new student's default example from the shared results, at most K runs at once across
sessions, a prompt the model cannot take, and what a waiting student reads.

The model is a stand-in here (`run_lesson` is replaced): these tests are about who runs what, and when.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from core.app import choices
from core.app.registry import LessonSpec
from core.lessons import inside_gpt as gpt
from core.lessons import inside_gpt_cache as gpt_cache
from core.lessons import inside_gpt_induction as gpt_induction
from core.lessons import inside_gpt_rope as gpt_rope
from core.lessons import inside_gpt_runs as gpt_runs
from core.lessons import to_the_answer as answer
from core.models import smollm2
from services.model_queue import State, Status
from ui import gpt_queue, sessions

EXAMPLE = gpt.EXAMPLES[0]
NO_MODEL = object()  # what the page would pass; the stand-in below never reads it


class StandIn:
    """`gpt_runs.run_lesson` replaced: counts the runs (and the most at once), returns a marker, can be slow."""

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds
        self.runs: list[tuple[str, tuple]] = []
        self.running = 0
        self.peak = 0
        self._lock = threading.Lock()

    def __call__(self, lesson, model, args, keep_going):
        with self._lock:
            self.runs.append((lesson.name, args))
            self.running += 1
            self.peak = max(self.peak, self.running)
        try:
            time.sleep(self.seconds)
            if args and args[0] == "too short":
                raise smollm2.TextError("Give at least three tokens.")
            return f"{lesson.name}{args}"
        finally:
            with self._lock:
                self.running -= 1


@pytest.fixture
def queue(monkeypatch) -> Iterator:
    """A fresh queue in place of the process's one, and each thread its own session."""
    made = gpt_queue.new_queue(slots=1)
    monkeypatch.setattr(gpt_queue, "gpt_queue", lambda: made)
    monkeypatch.setattr(sessions, "session_id", lambda: threading.current_thread().name)
    yield made
    made.close()


def own(student: int) -> tuple[str, gpt.PromptKind]:
    return f"Student {student} types a prompt of their own", gpt.PromptKind.TEXT


def test_a_new_student_reads_the_default_example_from_the_shared_results(queue, monkeypatch) -> None:
    stand_in = StandIn()
    monkeypatch.setattr(gpt_runs, "run_lesson", stand_in)
    first = gpt_queue.computed(gpt.PROMPT, NO_MODEL, EXAMPLE.text, EXAMPLE.kind)  # the first visitor computes it
    for student in range(20):  # a class's own prompts: more than the analyses' cache keeps (max_entries)
        assert gpt_queue.computed(gpt.PROMPT, NO_MODEL, *own(student)) == f"analyse_prompt{own(student)}"
    assert gpt.PROMPT.max_entries < 20
    runs = len(stand_in.runs)
    newcomer = gpt_queue.computed(gpt.PROMPT, NO_MODEL, EXAMPLE.text, EXAMPLE.kind)
    assert newcomer is first  # the same object, shared: no copy, no run
    assert len(stand_in.runs) == runs == 21
    assert queue.kept(gpt_queue.GptRun(gpt.PROMPT.name, own(0))) is None  # own prompts do go out


def test_at_most_k_model_runs_at_once_across_sessions(monkeypatch) -> None:
    made = gpt_queue.new_queue(slots=2)
    monkeypatch.setattr(gpt_queue, "gpt_queue", lambda: made)
    monkeypatch.setattr(sessions, "session_id", lambda: threading.current_thread().name)
    stand_in = StandIn(seconds=0.2)
    monkeypatch.setattr(gpt_runs, "run_lesson", stand_in)
    results: dict[int, str] = {}

    def student(number: int) -> None:
        results[number] = gpt_queue.computed(gpt.PROMPT, NO_MODEL, *own(number))

    threads = [threading.Thread(target=student, args=(n,), name=f"student-{n}") for n in range(6)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    finally:
        made.close()
    assert len(results) == 6 and len(stand_in.runs) == 6
    assert stand_in.peak == made.peak_running == 2  # six students asked at once; two ran at a time


def test_a_prompt_the_model_cannot_take_raises_its_own_error(queue, monkeypatch) -> None:
    monkeypatch.setattr(gpt_runs, "run_lesson", StandIn())
    with pytest.raises(smollm2.TextError, match="three tokens"):
        gpt_queue.computed(gpt.PROMPT, NO_MODEL, "too short", gpt.PromptKind.TEXT)


def test_a_waiting_student_reads_their_place_and_an_estimate() -> None:
    _, text = gpt_queue.describe(gpt.PROMPT, Status(State.QUEUED, place=3, wait_s=12.4))
    assert "place 3 in the queue" in text and "about 12 s" in text and "reading the prompt" in text
    assert "you are next" in gpt_queue.describe(gpt.GENERATION, Status(State.QUEUED, place=1, wait_s=2))[1]
    fraction, text = gpt_queue.describe(gpt_cache.CACHE_TIMING, Status(State.RUNNING, wait_s=3, progress=0.4))
    assert fraction == 0.4 and "timing the KV cache for you" in text
    assert "40 requests are waiting" in gpt_queue.describe(gpt.PROMPT, Status(State.FULL, place=40))[1]
    assert set(gpt_queue.WHAT) == {lesson.name for lesson in gpt_queue.QUEUED}


def test_the_results_everyone_shares_are_the_page_s_defaults_and_a_finite_set() -> None:
    example = (EXAMPLE.text, EXAMPLE.kind)
    defaults = gpt.sampling_settings(gpt.DEFAULT_TEMPERATURE, 0, 1.0)
    assert gpt_runs.shared_by_everyone(gpt.PROMPT, example)
    assert not gpt_runs.shared_by_everyone(gpt.PROMPT, own(0))
    assert gpt_runs.shared_by_everyone(gpt_cache.CACHE_TIMING, (*example, gpt_cache.TIMED_TOKENS))
    assert gpt_runs.shared_by_everyone(gpt.GENERATION, (*example, defaults, gpt.DEFAULT_SEED, gpt.DEFAULT_NEW_TOKENS))
    assert not gpt_runs.shared_by_everyone(gpt.GENERATION, (*example, defaults, 7, gpt.DEFAULT_NEW_TOKENS))
    assert gpt_runs.shared_by_everyone(gpt_induction.INDUCTION, (gpt.DEFAULT_REPEAT, gpt.DEFAULT_SEED))
    assert not gpt_runs.shared_by_everyone(gpt_induction.INDUCTION, (gpt.DEFAULT_REPEAT, 1))
    assert gpt_runs.shared_by_everyone(gpt.VOCABULARY, ())
    # Every value a student can choose: the shared ones are bounded by the examples, the heads and the defaults.
    heads = [(layer, head) for layer in range(30) for head in range(9)]
    inputs = [*gpt_runs.EXAMPLE_INPUTS, *(own(n) for n in range(50))]
    shared = (
        sum(gpt_runs.shared_by_everyone(gpt.PROMPT, i) for i in inputs)
        + sum(gpt_runs.shared_by_everyone(gpt_rope.ROPE, (*i, head)) for i in inputs for head in range(9))
        + sum(
            gpt_runs.shared_by_everyone(gpt_induction.ABLATION, (length, seed, *h, choice))
            for length in range(choices.MIN_REPEAT, choices.MAX_REPEAT + 1)
            for seed in range(3)
            for h in heads
            for choice in choices.AblationChoice
        )
    )
    assert shared == len(gpt.EXAMPLES) + 9 * len(gpt.EXAMPLES) + len(heads)


def test_run_lesson_records_no_autograd_graph_and_hands_the_stop_check_on() -> None:
    seen: dict[str, object] = {}

    def compute(model, *args):
        seen["inference_mode"] = torch.is_inference_mode_enabled()
        seen["args"] = args
        return "done"

    lesson = LessonSpec(compute, uses=None, max_entries=1)
    assert gpt_runs.run_lesson(lesson, NO_MODEL, (1, 2), lambda: True) == "done"
    assert seen == {"inference_mode": True, "args": (1, 2)}
    assert not torch.is_inference_mode_enabled()  # only inside the run
    assert gpt.GENERATION in gpt_runs.STOPPABLE and gpt_cache.CACHE_TIMING in gpt_runs.STOPPABLE


def test_the_warm_up_computes_the_first_example_s_default_view_for_everyone(queue, monkeypatch) -> None:
    previous = np.zeros((30, 9))
    previous[4, 7] = 0.9  # the clearest previous-token head: layer 4, head 7 (the page's first head)

    def stand_in(lesson, model, args, keep_going):
        return SimpleNamespace(previous=previous) if lesson is gpt.PROMPT else f"{lesson.name}{args}"

    monkeypatch.setattr(gpt_runs, "run_lesson", stand_in)
    monkeypatch.setattr(answer, "run_lesson", stand_in)  # lesson 11's opening view is warmed up too
    gpt_queue._warm_up(queue, NO_MODEL)
    for student in range(40):  # a class's own prompts afterwards
        gpt_queue.computed(gpt.PROMPT, NO_MODEL, *own(student))
        gpt_queue.computed(gpt_rope.ROPE, NO_MODEL, *own(student), 7)
    first = (EXAMPLE.text, EXAMPLE.kind)
    for lesson, args in (
        (gpt.VOCABULARY, ()),
        (gpt.PROMPT, first),
        (gpt_induction.INDUCTION, (gpt.DEFAULT_REPEAT, gpt.DEFAULT_SEED)),
        (gpt_cache.CACHE_SIZES, ()),
        (gpt_rope.ROPE, (*first, 7)),
        (gpt_cache.CACHE_TIMING, (*first, gpt_cache.TIMED_TOKENS)),
        (answer.ANSWER, (answer.DEFAULT_TEXT, answer.Explain.CONTRAST, "")),
    ):
        assert queue.kept(gpt_queue.GptRun(lesson.name, args)) is not None, lesson.name


@pytest.mark.parametrize("variable", ["1", "0"])
def test_the_overview_starts_what_a_class_opens_next_unless_told_not_to(monkeypatch, variable: str) -> None:
    # Issue 40: on a cold server the first student waited for lesson 10's default view (94 s under load) and for
    # lesson 7's translator (51 s). The teacher's overview now starts both in the background, once per process.
    from tests.support import app
    from ui import cache, cross_trained

    started: list[str] = []
    monkeypatch.setenv(cache.WARM_UP_VARIABLE, variable)
    monkeypatch.setattr(gpt_queue, "warm_up", lambda model: started.append("gpt"))
    monkeypatch.setattr(cross_trained, "warm_up", lambda: started.append("translator"))
    at = app(None)
    assert not at.exception
    assert started == (["gpt", "translator"] if variable == "1" else [])


def test_the_translators_warm_up_asks_the_queue_for_the_lessons_run_as_a_session_that_stays(monkeypatch) -> None:
    from core.lessons import cross_attention_trained as ct
    from ui import cross_trained

    asked: list[tuple[str, tuple]] = []
    queue = SimpleNamespace(request=lambda session, keys: asked.append((session, tuple(keys))))
    monkeypatch.setattr(cross_trained, "training_queue", lambda: queue)
    cross_trained.warm_up.clear()
    assert cross_trained.warm_up() and cross_trained.warm_up()  # the second call is the cached first
    assert asked == [(cross_trained.WARM_UP, (ct.DEFAULT_CONFIG,))]
    assert cross_trained._alive(cross_trained.WARM_UP)  # the queue never drops it as a closed tab
    cross_trained.warm_up.clear()
