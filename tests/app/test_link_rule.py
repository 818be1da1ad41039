"""The one rule for links (core.app.links.read_link) and inert text (core.app.markup).

What a note says is what happens: a value the rule reads is what the sidebar shows, a value
it ignores gets one note and leaves the sidebar at its default, whatever Streamlit's own
parsing of that spelling would have done (issue 10, item 3).
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.app.links import read_link
from core.app.markup import code_span, literal, visible
from core.app.settings import Settings
from core.inputs.examples import MAX_TEXT_CHARS

DEVICES = ["cpu"]
# Spellings Python's int()/float() accept but a link must not: Streamlit's widgets took them
# while the old note said "ignored".
LOOSE_NUMBERS = ["1e3", "1e1", "１２", "٣", "1_000", "5.5", "+5", " 7", "7 ", "0x10", "1E1", "٠.٥"]


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


# ------------------------------------------------------------------ in the app, through Streamlit's widgets
def shown(at) -> Settings:
    return Settings(
        preset=at.sidebar.selectbox(key="preset").value,
        text=at.sidebar.text_input(key="text").value,
        d_in=at.sidebar.slider(key="d_in").value,
        d_out=at.sidebar.slider(key="d_out").value,
        seed=int(at.sidebar.number_input(key="seed").value),
        dropout=at.sidebar.slider(key="dropout").value,
        num_heads=at.sidebar.slider(key="num_heads").value,
        scale=at.sidebar.toggle(key="scale").value,
        device=at.sidebar.selectbox(key="device").value,
    )


@pytest.mark.parametrize(
    "params",
    [
        {"d_in": "1e1"},
        {"d_out": "１２"},
        {"d_out": "٣"},
        {"seed": "1_000"},
        {"seed": "1e3"},
        {"d_out": "5.5"},
        {"dropout": "5e-1"},
        {"scale": "FALSE"},
        {"text": "y" * (MAX_TEXT_CHARS + 5), "preset": "custom"},
        {"d_out": ["4", "8"]},
        {"d_out": "6", "num_heads": "0x3", "seed": "77"},
    ],
)
def test_the_sidebar_shows_what_the_notes_say(params: dict) -> None:
    at = app_with(params)
    reading = read_link(params, DEVICES)
    assert not at.exception
    assert shown(at) == reading.settings
    notes = [w.value for w in at.sidebar.warning]
    assert reading.notes and len(notes) == len(reading.notes)  # one note per ignored parameter


def app_with(params: dict):
    """AppTest with query parameters, repeated ones included (AppTest's dict takes lists)."""
    from streamlit.testing.v1 import AppTest

    from tests.support import APP

    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    params=st.dictionaries(
        st.sampled_from(["d_in", "d_out", "seed", "num_heads", "dropout"]),
        st.one_of(st.sampled_from(LOOSE_NUMBERS), st.integers(-5, 70).map(str), st.text("0123456789.e_+", max_size=5)),
        min_size=1,
        max_size=3,
    )
)
def test_random_number_links_show_what_the_notes_say(params: dict[str, str]) -> None:
    at = app_with(params)
    assert not at.exception
    assert shown(at) == read_link(params, DEVICES).settings


def test_three_hundred_unknown_parameters_give_one_line() -> None:
    at = app_with({f"junk{i}": "1" for i in range(300)})
    notes = [w.value for w in at.sidebar.warning]
    assert len(notes) == 1 and notes[0].startswith("300 unknown link parameters ignored"), notes


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
