"""The one rule for links (core.app.links.read_link) and inert text (core.app.markup).

What a note says is what happens: a value the rule reads is what the sidebar shows, a value
it ignores gets one note and leaves the sidebar at its default, whatever Streamlit's own
parsing of that spelling would have done (issue 10, item 3). The rule alone, no app run: that the sidebar
shows what the notes say is tests/app/test_link_rule_app.py.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.app.links import read_link
from core.app.markup import code_span, literal, visible
from core.app.settings import Settings
from core.inputs.examples import MAX_TEXT_CHARS
from tests.support import LOOSE_NUMBERS, SIDEBAR_PARAMETERS

DEVICES = ["cpu"]


@pytest.mark.parametrize("value", LOOSE_NUMBERS)
@pytest.mark.parametrize("name", ["d_in", "d_out", "seed", "num_heads", "dropout"])
def test_loose_number_spellings_are_ignored_with_one_note(name: str, value: str) -> None:
    reading = read_link({name: value}, DEVICES)
    if name == "dropout" and value in ("5.5",):
        assert reading.notes  # out of range
    assert [note.parameter for note in reading.notes] == [name]
    assert getattr(reading.settings, name) == getattr(Settings(), name)


def test_plain_spellings_are_read() -> None:
    reading = read_link(
        {"d_in": "7", "d_out": "06", "seed": "42.0", "dropout": ".25", "num_heads": "3", "scale": "false"}, DEVICES
    )
    assert not reading.notes
    assert reading.settings == Settings(d_in=7, d_out=6, seed=42, dropout=0.25, num_heads=3, scale=False)


def test_a_repeated_parameter_gets_a_note() -> None:
    reading = read_link({"d_out": ["4", "8"]}, DEVICES)
    assert [(n.parameter, n.reason) for n in reading.notes] == [("d_out", "is given 2 times")]
    assert reading.settings.d_out == Settings().d_out


def test_an_over_long_text_is_ignored_whole() -> None:
    reading = read_link({"text": "x" * (MAX_TEXT_CHARS + 1)}, DEVICES)
    assert reading.notes and reading.settings.text == Settings().text


def test_unknown_parameters_are_listed_not_noted() -> None:
    reading = read_link({f"p{i}": "1" for i in range(300)}, DEVICES)
    assert not reading.notes and len(reading.unknown) == 300


@given(params=st.dictionaries(st.sampled_from(["d_in", "d_out", "seed", "dropout", "num_heads"]), st.text(max_size=8)))
def test_every_known_value_is_either_read_or_noted(params: dict[str, str]) -> None:
    reading = read_link(params, DEVICES)
    noted = {note.parameter for note in reading.notes}
    assert len(noted) == len(reading.notes)  # at most one note per parameter
    for name, value in params.items():
        shown = getattr(reading.settings, name)
        if name in noted:
            assert shown == getattr(Settings(), name)
        else:
            assert re.fullmatch(r"[0-9.]+", value), value  # only ASCII digits (and a point) are read
            assert shown == float(value)


# ------------------------------------------------------------------ hostile values
# (tests/app/test_hostile_input.py runs one of each kind through the app)
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


def test_the_link_rule_reads_every_nasty_value() -> None:
    for name in SIDEBAR_PARAMETERS:
        for value in NASTY:
            reading = read_link({name: value}, ["cpu"])
            if name == "text" and len(value) <= 400:
                continue  # any sentence is a sentence; the page explains an unusable one
            valid = value in ("true", "false") and name == "scale"
            assert valid or [note for note in reading.notes if note.parameter == name], (name, value[:40])
            assert valid or reading.settings == read_link({}, ["cpu"]).settings, (name, value[:40])


# ------------------------------------------------------------------ inert text
HOSTILE = [
    "[x](http://evil)",
    "![](http://evil/x.png)",
    "$$\\Huge x$$",
    ":red-background[x]",
    "<b>bold</b><img src=x onerror=alert(1)>",
    "__init__ is ok",
    "a`b``c",
    "`",
    "line\n\n# heading",
    "\u202eevil",
    ":material/home: :smile:",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_code_span_keeps_everything_inside_one_span(text: str) -> None:
    span = code_span(text, limit=200)
    fence = re.match("`+", span).group()
    inner = span[len(fence) : -len(fence)]
    assert span.endswith(fence) and fence not in inner  # one span, nothing after it
    assert "\n" not in span and "\u202e" not in span


@pytest.mark.parametrize("text", HOSTILE)
def test_literal_escapes_every_markup_character(text: str) -> None:
    escaped = literal(text)
    unescaped = re.sub(r"\\(.)", "", escaped)  # what markdown reads as syntax
    assert not re.search(r"[\[\]()!$:<>_*`#\\]", unescaped), escaped
    assert re.sub(r"\\(.)", r"\1", escaped) == visible(text)  # and nothing is lost


def test_visible_names_control_characters() -> None:
    assert visible("a\nb\u202ec\x00") == "a\\nb\\u202ec\\x00"
