"""The link rule in the app (core.app.links.read_link through the frame's sidebar): what a note says is what the
sidebar shows, whatever Streamlit's own parsing of a spelling would have done (issue 10, item 3). The rule alone
is tests/unit/test_link_rule.py."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.app.links import read_link
from core.app.settings import Settings
from core.inputs.examples import MAX_TEXT_CHARS
from tests.support import LOOSE_NUMBERS, app

DEVICES = ["cpu"]


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
    at = app(None, **params)  # a list is a repeated parameter
    reading = read_link(params, DEVICES)
    assert not at.exception
    assert shown(at) == reading.settings
    notes = [w.value for w in at.sidebar.warning]
    assert reading.notes and len(notes) == len(reading.notes)  # one note per ignored parameter


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
    at = app(None, **params)  # a list is a repeated parameter
    assert not at.exception
    assert shown(at) == read_link(params, DEVICES).settings


def test_three_hundred_unknown_parameters_give_one_line() -> None:
    at = app(None, **{f"junk{i}": "1" for i in range(300)})
    notes = [w.value for w in at.sidebar.warning]
    assert len(notes) == 1 and notes[0].startswith("300 unknown link parameters ignored"), notes


