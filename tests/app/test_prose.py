"""Lesson prose: the parser, and every section of every page's text on its page."""

from __future__ import annotations

import re

import pytest

from core.app import prose, registry
from tests.support import answered_page


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


@pytest.mark.parametrize("spec", PAGES)
def test_every_section_is_rendered_on_its_page(spec: registry.PageSpec) -> None:
    # Some sections explain a question's answer and appear only once it is chosen (widgets.predict).
    at = answered_page(spec.slug)
    shown = [m.value.strip() for m in at.markdown]
    for name, body in prose.read_sections(spec.slug).items():
        assert body.strip() in shown, f"{spec.prose_path}: section {name!r} is not on the page"


def test_the_overviews_lesson_list_matches_the_registry() -> None:
    text = prose.section("overview", "model")
    listed = dict(re.findall(r"^(\d+)\. \*\*(.+?)\*\*", text, flags=re.MULTILINE))
    for spec in registry.lessons():  # every registered lesson, under its own number and title
        assert listed.get(str(spec.number)) == spec.title, (spec.number, spec.title, listed)
    # every lesson of the registry, in order (6 and 8 arrived with their pages)
    assert sorted(map(int, listed)) == [spec.number for spec in registry.lessons()]
    assert listed["6"] == "Inside a real model" and listed["8"] == "Train it yourself"
