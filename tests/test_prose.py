"""Lesson prose: the parser, and every section of every page's text on its page."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from bench.harness import PAGE_FILES, restore_pages_manager, use_navigation_mode
from core import prose

APP = str(Path(__file__).resolve().parent.parent / "streamlit_app.py")


def text_name(page_file: str) -> str:
    """pages/2_without_weights.py -> without_weights (the page's prose file)."""
    return Path(page_file).stem.split("_", 1)[1]


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


@pytest.mark.parametrize("page_file", PAGE_FILES)
def test_every_prose_file_has_non_empty_sections(page_file: str) -> None:
    parts = prose.read_sections(text_name(page_file))
    assert parts, page_file
    for name, body in parts.items():
        assert body.strip(), f"{page_file}: section {name!r} is empty"


@pytest.fixture
def navigation_mode() -> Iterator[None]:
    use_navigation_mode()
    yield
    restore_pages_manager()


@pytest.mark.parametrize("page_file", PAGE_FILES)
def test_every_section_is_rendered_on_its_page(page_file: str, navigation_mode: None) -> None:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    if page_file != PAGE_FILES[0]:
        at.switch_page(page_file).run()
    assert not at.exception, [e.value for e in at.exception]
    shown = [m.value.strip() for m in at.markdown]
    for name, body in prose.read_sections(text_name(page_file)).items():
        assert body.strip() in shown, f"{page_file}: section {name!r} is not on the page"
