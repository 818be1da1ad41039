"""An unexpected error in a lesson: a short message in plain words, the traceback in the server's
log, and the rest of the app still working (issue 10, item 6)."""

from __future__ import annotations

import logging

import pytest

from core.app import registry
from core.app.failure import Remedy, failure_note
from core.app.registry import Control
from core.app.settings import Settings
from core.inputs.weights import WeightSource
from core.lessons import attention_at_scale, inside_gpt, trainable_weights
from tests.support import PAGE_FILES as PAGES
from tests.support import app, assert_clean
from ui import cache, gpt_queue


def break_trainable_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the trainable-weights lesson raise; every other lesson computes as usual."""
    computed = cache.computed

    def broken(spec, *args):
        if spec is trainable_weights.LESSON:
            raise RuntimeError("injected failure")
        return computed(spec, *args)

    monkeypatch.setattr(cache, "computed", broken)


def test_a_failing_lesson_shows_a_message_and_logs_the_traceback(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    break_trainable_weights(monkeypatch)
    with caplog.at_level(logging.ERROR, logger="attention_lab"):
        at = app(PAGES[2], seed="4321")
    assert not at.exception, [e.value for e in at.exception]  # no Streamlit error box
    assert any("hit a problem with these settings" in e.value for e in at.error)
    assert at.sidebar.slider, "the sidebar must keep working"
    assert at.title, "what the page drew before the error stays"
    logged = [r for r in caplog.records if r.name == "attention_lab"]
    assert logged and "injected failure" in str(logged[0].exc_info[1])
    assert "trainable_weights" in logged[0].getMessage()

    at.switch_page(PAGES[1]).run()  # another lesson still works
    assert_clean(at)
    assert not any("hit a problem" in e.value for e in at.error)


def test_the_message_offers_the_books_example(monkeypatch: pytest.MonkeyPatch) -> None:
    break_trainable_weights(monkeypatch)
    at = app(PAGES[2], preset="custom", text="one two", seed="77")
    at.button(key="error_back_to_book").click().run()
    assert at.sidebar.selectbox(key="preset").value == "book"
    assert at.sidebar.number_input(key="seed").value == 123


def break_lesson(monkeypatch: pytest.MonkeyPatch, spec: object) -> None:
    """Make one computation raise, whether the page asks the cache or lesson 10's model queue (ui/gpt_queue.py);
    every other computes as usual."""
    for module in (cache, gpt_queue):
        computed = module.computed

        def broken(asked, *args, computed=computed):
            if asked is spec:
                raise RuntimeError("injected failure")
            return computed(asked, *args)

        monkeypatch.setattr(module, "computed", broken)


def error_texts(at) -> list[str]:
    return [e.value for e in at.error]


@pytest.mark.parametrize(
    ("slug", "spec"),
    [("attention_at_scale", attention_at_scale.COST), ("inside_gpt", inside_gpt.VOCABULARY)],
)
def test_at_the_defaults_the_message_blames_no_settings_and_offers_no_book(
    monkeypatch: pytest.MonkeyPatch, slug: str, spec: object
) -> None:
    # Review #3: both pages said "hit a problem with these settings" at their defaults, and offered "the book's
    # example", which neither page reads (the button changed nothing there).
    break_lesson(monkeypatch, spec)
    at = app(registry.page(slug).file)
    assert not at.exception, [e.value for e in at.exception]
    (message,) = [text for text in error_texts(at) if "unexpected problem" in text]
    assert "not on anything you chose" in message and "these settings" not in message and "book" not in message
    assert not [b for b in at.button if b.key == "error_back_to_book"]
    again = at.button(key="error_run_again")
    assert again.label == "Run it again"
    monkeypatch.undo()  # the problem has gone: the same page, run again, draws in full
    again.click().run()
    assert_clean(at)
    assert not any("unexpected problem" in text for text in error_texts(at))


def test_a_page_without_the_books_example_blames_changed_settings_but_offers_no_book(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    break_lesson(monkeypatch, attention_at_scale.COST)
    at = app(registry.page("attention_at_scale").file, seed="77")  # the seed draws its online-softmax row
    (message,) = [text for text in error_texts(at) if "hit a problem" in text]
    assert "with these settings" in message and "book" not in message and "change one" in message
    assert not [b for b in at.button if b.key == "error_back_to_book"]
    assert at.button(key="error_run_again").label == "Run it again"


def test_no_pages_note_at_its_defaults_blames_settings_or_offers_a_book_it_ignores() -> None:
    for spec in registry.PAGES:
        for weights in spec.weight_sources:
            note = failure_note(spec, Settings(weights=weights), linked=())
            if weights is WeightSource.RANDOM:  # the defaults
                assert note.remedy is Remedy.AGAIN and "these settings" not in note.text, spec.slug
            else:  # a model's head is a choice; the book's example is one click away where the page reads it
                book = Control.PRESET not in spec.ignores_with(weights)
                assert note.remedy is (Remedy.BOOK if book else Remedy.AGAIN), (spec.slug, weights)
        changed = failure_note(spec, Settings(), linked=spec.controls[:1])  # one own control off its default
        assert ("these settings" in changed.text) == bool(spec.controls), spec.slug
        assert changed.remedy is Remedy.AGAIN, spec.slug  # the book's example would not reset the page's own control
