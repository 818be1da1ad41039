"""A page's own controls read from a link (issue 19, item 3), in the app: a bad value gets one note on its page
and the control its default; a valid one is kept. The rule alone (core.app.links) is tests/unit/test_links.py."""

from __future__ import annotations

import pytest

from tests.support import app, open_page


def page_notes(at) -> list[str]:
    return [w.value for w in at.main.warning]


@pytest.mark.parametrize(
    ("slug", "params", "widget", "key", "default"),
    [
        ("training_lab", {"train_steps": "1e999"}, "number_input", "train_steps", 300),
        ("training_lab", {"train_heads": "inf"}, "number_input", "train_heads", 2),
        ("training_lab", {"train_heads": "-1e9999"}, "number_input", "train_heads", 2),
        ("training_lab", {"train_steps": "9" * 10_240}, "number_input", "train_steps", 300),
        ("training_lab", {"train_steps": "１２００"}, "number_input", "train_steps", 300),
        ("training_lab", {"train_steps": "٣٠٠"}, "number_input", "train_steps", 300),
        ("training_lab", {"train_steps": "1_000"}, "number_input", "train_steps", 300),
        ("training_lab", {"train_steps": "1e3"}, "number_input", "train_steps", 300),
        ("training_lab", {"train_steps": " 500 "}, "number_input", "train_steps", 300),
        ("training_lab", {"train_steps": "5000"}, "number_input", "train_steps", 300),
        ("training_lab", {"train_heads": "8"}, "number_input", "train_heads", 2),
        ("cross_attention", {"d_v": "inf"}, "number_input", "d_v", 6),
        ("cross_attention", {"d_in_kv": "1e999"}, "number_input", "d_in_kv", 3),
        ("cross_attention", {"d_v": "1_0"}, "number_input", "d_v", 6),
        ("real_model", {"real_layer": "9"}, "selectbox", "real_layer", None),
        ("real_model", {"real_head": "20"}, "selectbox", "real_head", None),
    ],
)
def test_a_bad_page_control_value_gets_one_note_and_the_default(
    slug: str, params: dict[str, str], widget: str, key: str, default: int | None
) -> None:
    at = open_page(slug, **params)
    (name,) = params
    notes = page_notes(at)
    assert len(notes) == 1 and f"`{name}=" in notes[0], notes
    assert not at.error, [e.value for e in at.error]
    assert name not in at.query_params  # "Back to the book's example" is not needed: the link is clean
    shown = getattr(at, widget)(key=key).value
    if default is not None:
        assert shown == default
    else:  # the real model opens the example's own head (its default), not layer or head 0
        assert open_page(slug).__getattribute__(widget)(key=key).value == shown


def test_the_real_model_keeps_its_opening_head_when_both_are_out_of_range() -> None:
    at = open_page("real_model", real_layer="9", real_head="20")
    default = open_page("real_model")
    assert len(page_notes(at)) == 2
    for key in ("real_layer", "real_head"):
        assert at.selectbox(key=key).value == default.selectbox(key=key).value


def test_out_of_range_training_values_name_each_parameter() -> None:
    at = open_page("training_lab", train_heads="8", train_d_k="64", train_steps="5000")
    notes = " ".join(page_notes(at))
    assert "`train_heads=8`" in notes and "`train_steps=5000`" in notes
    assert at.number_input(key="train_steps").value == 300 and at.number_input(key="train_heads").value == 2
    assert at.selectbox(key="train_d_k").value == 64  # a valid choice is kept


def test_a_bad_step_in_presentation_mode_is_a_note_not_an_error_box() -> None:
    at = open_page("trainable_weights", present="1", step="inf")
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("`step=inf`" in note for note in page_notes(at))
    assert at.number_input(key="step").value == 1


@pytest.mark.parametrize(("step", "lesson"), [("99", "why_scale"), ("-1", "inside_gpt")])
def test_a_bad_step_in_presentation_mode_names_the_pages_own_steps(step: str, lesson: str) -> None:
    # The link's rule allows 1 to 30 (no page has more), and its note said so on a page of 5 steps.
    at = open_page(lesson, present="1", step=step)
    (total,) = [c.value.split()[1] for c in at.caption if c.value.startswith("of ") and c.value.endswith(" steps")]
    (note,) = [note for note in page_notes(at) if f"`step={step}`" in note]
    assert f"which has steps 1 to {total}" in note and "30" not in note, note


def test_a_step_past_the_last_of_the_page_the_link_opened_gets_a_note() -> None:
    # A whole number the rule accepts but the page lacks: the step box dropped it to step 1 without a word.
    # (AppTest opens the overview first: seven steps in presentation mode.)
    at = app(None, present="1", step="9")
    assert at.number_input(key="step").value == 1
    assert any("`step=9` is not a step of this page, which has steps 1 to 7" in note for note in page_notes(at))


def test_page_notes_stay_on_their_page() -> None:
    at = open_page("overview", train_steps="1e999")
    assert not page_notes(at)


# An independent review: ?multiplier=4 got a note that listed 4.0 as allowed, and ?scale_longest=1024 left the
# box at 2,048 without a word (the rule took "1024", the bound box binds only its own label "1,024").
@pytest.mark.parametrize(
    ("slug", "name", "given", "widget", "value", "written"),
    [
        ("why_scale", "multiplier", "4", "select_slider", 4.0, "4.0"),
        ("why_scale", "multiplier", "16", "select_slider", 16.0, "16.0"),
        ("why_scale", "trials", "1,000", "select_slider", 1000, "1000"),
        ("attention_at_scale", "scale_longest", "1024", "selectbox", 1024, "1,024"),
    ],
)
def test_a_boxs_number_in_a_plain_spelling_sets_the_box_without_a_note(
    slug: str, name: str, given: str, widget: str, value: float, written: str
) -> None:
    at = open_page(slug, timeout_s=180, **{name: given})
    assert not page_notes(at), page_notes(at)
    assert getattr(at, widget)(key=name).value == value
    assert at.query_params[name] == written  # the link now says it as the box does, so a shared copy works too


def test_a_gpus_longest_length_on_the_cpu_gets_a_note() -> None:
    # The rule takes every device's lengths; the CPU's box lacks 8,192 and dropped it without a word.
    at = open_page("attention_at_scale", timeout_s=180, scale_longest="8192")
    assert page_notes(at) == ["`scale_longest=8,192` is more than this CPU measures (4,096 tokens); ignored."]
    assert at.selectbox(key="scale_longest").value == 2048
