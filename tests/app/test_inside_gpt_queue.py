"""Lesson 10 (inside a GPT) through the model queue in AppTest (ui/gpt_queue.py): a new student's default example
comes from the shared results even after a class's own prompts, and a student who waits is shown their place."""

from __future__ import annotations

import threading

from core.lessons import inside_gpt as gpt
from core.lessons import inside_gpt_cache as gpt_cache
from core.lessons import inside_gpt_rope as gpt_rope
from core.lessons import inside_gpt_runs as gpt_runs
from tests.support import needs_decoder, open_page
from ui import gpt_queue

SECTIONS = ("The next token", "Induction heads, measured", "Switch a head off")


@needs_decoder
def test_a_new_student_s_default_example_runs_no_model_after_a_class_s_own_prompts(monkeypatch) -> None:
    open_page("inside_gpt")  # the first visitor: the default example's results, computed once
    real = gpt_runs.run_lesson
    # Then a class types its own prompts: more of each kind than its cache keeps (stand-in results, no model).
    monkeypatch.setattr(gpt_runs, "run_lesson", lambda lesson, model, args, keep_going: f"{lesson.name}{args}")
    for student in range(70):
        text = f"Student {student}'s own prompt"
        for lesson, args in (
            (gpt.PROMPT, ()),
            (gpt_rope.ROPE, (0,)),
            (gpt_cache.CACHE_TIMING, (gpt_cache.TIMED_TOKENS,)),
        ):
            gpt_queue.computed(lesson, object(), text, gpt.PromptKind.TEXT, *args)
    runs: list[str] = []

    def counted(lesson, model, args, keep_going):
        runs.append(lesson.name)
        return real(lesson, model, args, keep_going)

    monkeypatch.setattr(gpt_runs, "run_lesson", counted)
    at = open_page("inside_gpt")  # a new student
    assert set(SECTIONS) <= {h.value for h in at.subheader}
    keys = open_page("gpt_keys")  # and lesson 12, which reads the same example's RoPE check and cache timing
    assert "The KV cache, measured" in {h.value for h in keys.subheader}
    assert runs == []  # every number from the shared results: the model ran for nobody


@needs_decoder
def test_a_student_waiting_behind_another_run_is_shown_their_place(monkeypatch) -> None:
    open_page("inside_gpt")  # the default example's results (and the vocabulary) are kept: only the prompt waits
    queue = gpt_queue.gpt_queue()
    gate = threading.Event()
    blocker = gpt_queue.GptRun("another student's run", (id(gate),))
    queue.ask("another student", blocker, lambda keep_going: gate.wait(30), client="elsewhere")
    shown: list[str] = []
    describe = gpt_queue.describe

    def recorded(lesson, status):
        fraction, text = describe(lesson, status)
        shown.append(text)
        if len(shown) == 3:  # the student has waited a few updates: the other run ends
            gate.set()
        return fraction, text

    monkeypatch.setattr(gpt_queue, "describe", recorded)
    try:
        at = open_page("inside_gpt", gpt_prompt="own", gpt_text="A prompt typed while the model is busy")
    finally:
        gate.set()
    assert shown and "(reading the prompt through every head): you are next, ready in about" in shown[0], shown
    assert "A prompt typed while the model is busy" in "\n".join(t.value for t in at.text)  # then the page went on
    assert set(SECTIONS) <= {h.value for h in at.subheader}
