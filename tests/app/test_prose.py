"""Lesson prose: the parser, and every section of every page's text on its page."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.app import prose, registry
from tests.support import restore_pages_manager, use_navigation_mode

APP = str(Path(__file__).resolve().parents[2] / "streamlit_app.py")


def test_first_section_is_found() -> None:
    # The bug: splitting on "\n## " never matched the section at the top of the file.
    parts = prose.sections("## intro\nFirst words.\n\n## next\nMore.\n")
    assert parts == {"intro": "First words.", "next": "More."}


def test_text_before_the_first_heading_is_an_error() -> None:
    with pytest.raises(ValueError):
        prose.sections("stray words\n## intro\nbody\n")


def test_unknown_section_raises_instead_of_rendering_nothing() -> None:
    with pytest.raises(KeyError, match="no section 'nope'"):
        prose.section("overview", "nope")


PAGES = [pytest.param(spec, id=spec.slug) for spec in registry.PAGES]


@pytest.mark.parametrize("spec", PAGES)
def test_every_prose_file_has_non_empty_sections(spec: registry.PageSpec) -> None:
    parts = prose.read_sections(spec.slug)
    assert parts, spec.prose_path
    for name, body in parts.items():
        assert body.strip(), f"{spec.prose_path}: section {name!r} is empty"


@pytest.fixture
def navigation_mode() -> Iterator[None]:
    use_navigation_mode()
    yield
    restore_pages_manager()


@pytest.mark.parametrize("spec", PAGES)
def test_every_section_is_rendered_on_its_page(spec: registry.PageSpec, navigation_mode: None) -> None:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    if spec is not registry.HOME:
        at.switch_page(spec.file).run()
    assert not at.exception, [e.value for e in at.exception]
    # Some sections explain a question's answer and appear only once it is chosen (widgets.predict).
    for key in [r.key for r in at.radio if r.key and r.key.startswith("predict_")]:
        at.radio(key=key).set_value(0).run()
        assert not at.exception, [e.value for e in at.exception]
    shown = [m.value.strip() for m in at.markdown]
    for name, body in prose.read_sections(spec.slug).items():
        assert body.strip() in shown, f"{spec.prose_path}: section {name!r} is not on the page"


def test_the_overviews_lesson_list_matches_the_registry() -> None:
    text = prose.section("overview", "model")
    listed = dict(re.findall(r"^(\d+)\. \*\*(.+?)\*\*", text, flags=re.MULTILINE))
    for spec in registry.lessons():  # every registered lesson, under its own number and title
        assert listed.get(str(spec.number)) == spec.title, (spec.number, spec.title, listed)
    # lessons 1-8; 6 "Inside a real model" and 8 "Train it yourself" arrive with their pages
    assert sorted(map(int, listed)) == list(range(1, 11))
    assert listed["6"] == "Inside a real model" and listed["8"] == "Train it yourself"
