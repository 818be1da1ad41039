"""An unexpected error in a lesson: a short message in plain words, the traceback in the server's
log, and the rest of the app still working (issue 10, item 6)."""

from __future__ import annotations

import logging

import pytest

from core.lessons import trainable_weights
from tests.support import PAGE_FILES as PAGES
from tests.support import app, assert_clean
from ui import cache


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
