"""Lesson prose: the parser, and every section of every page's text on its page."""

from __future__ import annotations

import re

import pytest

from core.app import prose, registry
from tests.support import answered_page, open_page


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
    # Some sections explain a question's answer and appear only once it is chosen (widgets.predict); some belong to
    # another setting of the page (ELSEWHERE), and are looked for there.
    at = answered_page(spec.slug)
    shown = [m.value.strip() for m in at.markdown]
    for name, body in prose.read_sections(spec.slug).items():
        link = ELSEWHERE.get((spec.slug, name))
        where = shown if link is None else [m.value.strip() for m in answered_page(spec.slug, **link).markdown]
        assert body.strip() in where, f"{spec.prose_path}: section {name!r} is not on the page ({link or 'default'})"
        if link is not None:
            assert body.strip() not in shown, f"{spec.prose_path}: section {name!r} is on the default page too"


# Sections for another setting of their page: (page, section) -> the link that shows them.
ELSEWHERE = {("inside_gpt", "prompt_chat"): {"gpt_prompt": "capital"}}  # the chat template, for a chat question


def test_the_overview_lists_every_lesson_from_its_registry_row() -> None:
    """The list is derived (registry.lesson_list): a new row appears under its number, title and summary."""
    at = open_page("overview")
    (shown,) = [m.value for m in at.markdown if m.value.startswith("1. **")]
    listed = re.findall(r"^(\d+)\. \*\*(.+?)\*\*: (.+)$", shown, flags=re.MULTILINE)
    assert listed == [(str(spec.number), spec.title, spec.summary) for spec in registry.lessons()]
    assert all(len(summary) > 20 for _, _, summary in listed)  # a sentence each, not a stub
    assert [int(number) for number, _, _ in listed] == list(range(1, len(registry.lessons()) + 1))
