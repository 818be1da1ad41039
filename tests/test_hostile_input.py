"""Hostile input: random and malicious values for every link parameter and text box.

Each must leave the app running (no exception element), inject nothing (every markdown
element keeps HTML disabled), and say what happened (a note or an error message).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.settings import LIMITS
from tests.test_app import PAGES, app, navigation_not_pages_directory  # noqa: F401 - autouse fixture

PARAMS = [*LIMITS, "preset", "text", "scale", "device"]
NASTY = [
    "",
    " ",
    "-1",
    "-999999999999",
    "1e308",
    "1e9999",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "0x10",
    "3.5",
    "１２",
    "٣",
    "true; DROP TABLE students",
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "{{7*7}}",
    "../../etc/passwd",
    "\u202eevil",
    "😀" * 50,
    "x" * 10_000,
    "%00",
    "\n\t",
    "null",
    "[]",
    "{}",
]


def assert_safe(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert all(not m.proto.allow_html for m in at.markdown), "a markdown element allows raw HTML"
    assert at.sidebar.slider, "the sidebar is gone"


@pytest.mark.parametrize("name", PARAMS)
def test_every_link_parameter_with_nasty_values(name: str) -> None:
    for value in NASTY:
        at = app(None, **{name: value})
        assert_safe(at)
        if name != "text" or len(value) > 400:
            valid = value in ("true", "false") and name == "scale"
            notes = [w.value for w in at.sidebar.warning]
            assert valid or notes, (name, value[:40])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(params=st.dictionaries(st.sampled_from(PARAMS), st.text(max_size=60), max_size=4))
def test_random_link_parameters(params: dict[str, str]) -> None:
    at = app(None, **params)
    assert_safe(at)


@pytest.mark.parametrize(
    "text", ["<script>alert('x')</script> hi", "😀 émoji ünïcode", "a" * 399, "   ", "!!!", "x " * 30]
)
@pytest.mark.parametrize("page", [PAGES[1], PAGES[2], PAGES[6]])
def test_nasty_sentences(page: str, text: str) -> None:
    at = app(page, preset="custom")
    at.sidebar.text_input(key="text").input(text).run()
    assert_safe(at)
    if not text.strip() or text == "x " * 30:  # empty, or 30 tokens (the cap is 24)
        assert at.error, "an unusable sentence must be explained"


@pytest.mark.parametrize("text", ["<b>bold</b><script>x</script>", "", "w " * 40, "ß" * 400])
def test_nasty_second_sequence(text: str) -> None:
    at = app(PAGES[6])
    at.text_input(key="second_text").input(text).run()
    assert_safe(at)
    if not text.strip() or text.startswith("w "):
        assert any("Second sequence" in e.value for e in at.error)
