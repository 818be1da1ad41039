"""Values forged into a widget message (not a link) get a note on the page, never Streamlit's error box.

A browser sends each control's value; a script can send anything. Streamlit reads every changed
value before the page runs, so inf in an integer box, an option no box has, or a chart selection
that is not JSON stopped the run with Streamlit's raw error box (issue 19, item 3). AppTest
cannot set such values through its widgets, so `forge` puts the raw message in its place.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import ElementTree

from tests.support import open_page


@pytest.fixture
def forge(monkeypatch: pytest.MonkeyPatch) -> Iterator:
    """forge(at, widget_id, **field): the next run sends this raw value for that widget."""
    forged: dict[str, WidgetState] = {}
    original = ElementTree.get_widget_states

    def with_forged(self: ElementTree):
        states = original(self)
        kept = [state for state in states.widgets if state.id not in forged]
        del states.widgets[:]
        states.widgets.extend([*kept, *forged.values()])
        return states

    monkeypatch.setattr(ElementTree, "get_widget_states", with_forged)

    def send(at: AppTest, widget_id: str, **field: object) -> AppTest:
        forged.clear()
        forged[widget_id] = WidgetState(id=widget_id, **field)
        return at.run()

    yield send


def assert_noted_not_crashed(at: AppTest, name: str) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert at.title, "the page drew nothing"
    notes = [w.value for w in at.warning if "cannot read" in w.value]
    assert notes and name in notes[0], [w.value for w in at.warning]


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), 1e300])
def test_a_non_finite_number_in_an_integer_box(forge, value: float) -> None:
    at = open_page("training_lab")
    at = forge(at, at.number_input(key="train_heads").id, double_value=value)
    if value == 1e300:  # finite: Streamlit reads it; the box's own bounds put it back
        assert not at.exception
        return
    assert_noted_not_crashed(at, "train_heads")
    assert at.number_input(key="train_heads").value == 2


@pytest.mark.parametrize(("key", "slug"), [("train_heads", "training_lab"), ("step", "trainable_weights")])
def test_an_integer_box_value_sent_as_a_browser_sends_it_is_kept(forge, key: str, slug: str) -> None:
    # A browser sends an integer box's value as int_value, while Streamlit registers every number box as
    # double_value: the check dropped it, so after a predict answer (which reruns the whole page) the
    # presentation step box and the training lab's boxes showed "A control sent a value the app cannot read".
    at = open_page(slug, present="true") if key == "step" else open_page(slug)
    at = forge(at, at.number_input(key=key).id, int_value=3)
    assert not at.exception, [e.value for e in at.exception]
    assert not [w.value for w in at.warning if "cannot read" in w.value]
    assert at.number_input(key=key).value == 3


def test_an_option_no_box_has(forge) -> None:
    """The task box's callback runs before the page: an unknown task must not raise there."""
    at = open_page("training_lab")
    at = forge(at, at.selectbox(key="train_task").id, string_value="rm -rf")
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="train_task").value == "previous_token"
    assert at.number_input(key="train_steps").value == 300


@pytest.mark.parametrize("payload", ["{not json", '{"selection": {"query": [{"row_index": "x"}]}}', "[]"])
def test_a_chart_selection_that_is_not_what_the_chart_sends(forge, payload: str) -> None:
    at = open_page("trainable_weights")
    # The weights heatmap (the chart with a selection) answers the page's question: it is drawn once answered.
    next(r for r in at.radio if r.key and r.key.startswith("predict_")).set_value(0).run()
    chart = next(node for node in at._tree if getattr(getattr(node, "proto", None), "selection_mode", None))
    at = forge(at, chart.proto.id, json_value=payload)
    assert not at.exception, [e.value for e in at.exception]
    assert at.title and not at.error, [e.value for e in at.error]
    if payload == "{not json":
        assert any("cannot read" in w.value for w in at.warning)


# Issue 31, item 1: a value of the wrong type, or an option the box does not have, for a selectbox or
# a radio passed the unreadable-value check (it deserialises) and then failed when the widget
# registered (Streamlit re-serialises it by the forged field: TypeError), outside every handler.
WRONG_TYPES = [
    {"double_value": 2.5},
    {"int_value": 7},
    {"bool_value": True},
    {"trigger_value": True},
    {"bytes_value": b"\x00\xff"},
]


@pytest.mark.parametrize("field", WRONG_TYPES, ids=lambda f: next(iter(f)))
@pytest.mark.parametrize("key", ["preset", "device", "weights"])
def test_a_sidebar_choice_of_the_wrong_type(forge, key: str, field: dict) -> None:
    at = open_page("trainable_weights")
    widget = next(node for node in [*at.selectbox, *at.radio] if node.key == key)
    at = forge(at, widget.id, **field)
    assert_noted_not_crashed(at, key)
    assert not at.error, [e.value for e in at.error]


@pytest.mark.parametrize("key", ["preset", "device", "weights"])
def test_a_sidebar_choice_that_is_not_an_option(forge, key: str) -> None:
    at = open_page("trainable_weights")
    widget = next(node for node in [*at.selectbox, *at.radio] if node.key == key)
    before = widget.value
    at = forge(at, widget.id, string_value="nope")
    assert_noted_not_crashed(at, key)
    assert not at.error, [e.value for e in at.error]
    assert next(node for node in [*at.selectbox, *at.radio] if node.key == key).value == before


@pytest.mark.parametrize("field", [*WRONG_TYPES, {"string_value": "nope"}], ids=lambda f: next(iter(f)))
def test_a_predict_radio_sent_what_it_never_sends(forge, field: dict) -> None:
    at = open_page("trainable_weights")
    radio = next(node for node in at.radio if node.key and node.key != "weights")
    at = forge(at, radio.id, **field)
    assert not at.exception, [e.value for e in at.exception]
    assert at.title and not at.error, [e.value for e in at.error]
    assert any("cannot read" in w.value for w in at.warning), [w.value for w in at.warning]


def test_the_sidebar_runs_inside_the_error_handler(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the frame's widgets raise (a value no check foresaw) is the friendly message, not the raw box."""
    import ui.widgets

    at = open_page("trainable_weights")

    def broken(*args: object, **kwargs: object) -> None:
        raise TypeError("a forged value no check foresaw")

    monkeypatch.setattr(ui.widgets, "linked_select", broken)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title, "the page drew nothing"
    assert any("settings" in e.value for e in at.sidebar.error), [e.value for e in at.error]


# Issue 40, item 1: a busy class had 0 of 9 answers counted. Streamlit forgets a control's value field
# (its metadata's value_type becomes None) when it reads an empty value for it, such as an unanswered radio's,
# and it registers the field again only when the control is drawn: on a student's page the poll's watcher
# (a fragment) reruns every 2 s without drawing the predict box, so a choice sent then met value_type None
# and the check dropped it ("Dropped unreadable values", then "A control sent a value the app cannot read").
# A value is judged by what its control accepts: a choice box by its options, others by their deserializer.
def _forget_field(at: AppTest, widget_id: str) -> None:
    """What Streamlit's WStates.__getitem__ leaves after reading an empty value for this control."""
    widgets = at._session_state._state._new_widget_state
    widgets.widget_metadata[widget_id] = replace(widgets.widget_metadata[widget_id], value_type=None)


def _forget_registration(at: AppTest, widget_id: str) -> None:
    """As after a run that ended before this control registered (a page switch): no metadata at all."""
    at._session_state._state._new_widget_state.widget_metadata.pop(widget_id)


def _predict_radio(at: AppTest):
    return next(node for node in at.radio if node.key and node.key.startswith("predict_"))


@pytest.mark.parametrize("forget", [_forget_field, _forget_registration], ids=["field", "registration"])
@pytest.mark.parametrize("slug", ["why_scale", "trainable_weights"])
def test_a_genuine_answer_sent_while_streamlit_forgot_its_box_is_kept(forge, slug: str, forget) -> None:
    at = open_page(slug)
    radio = _predict_radio(at)
    forget(at, radio.id)
    at = forge(at, radio.id, string_value=radio.options[1])
    assert not at.exception, [e.value for e in at.exception]
    assert not [w.value for w in at.warning if "cannot read" in w.value]
    assert not [t.value for t in at.toast if "cannot read" in t.value]
    assert _predict_radio(at).value == 1, "the student's answer was dropped"


@pytest.mark.parametrize("forget", [_forget_field, _forget_registration], ids=["field", "registration"])
@pytest.mark.parametrize("field", [{"string_value": "nope"}, {"int_value": 7}], ids=lambda f: next(iter(f)))
def test_a_forged_answer_sent_while_streamlit_forgot_its_box_is_still_noted(forge, field: dict, forget) -> None:
    at = open_page("why_scale")
    radio = _predict_radio(at)
    forget(at, radio.id)
    at = forge(at, radio.id, **field)
    assert not at.exception, [e.value for e in at.exception]
    assert at.title and not at.error, [e.value for e in at.error]
    notes = [n.value for n in [*at.warning, *at.toast] if "cannot read" in n.value]
    assert notes, "the forged value was neither noted nor dropped"
    assert _predict_radio(at).value is None


@pytest.mark.parametrize("key", ["preset", "device"])
def test_a_sidebar_choice_of_the_wrong_type_is_dropped_while_its_field_is_forgotten(forge, key: str) -> None:
    at = open_page("trainable_weights")
    widget = next(node for node in [*at.selectbox, *at.radio] if node.key == key)
    _forget_field(at, widget.id)
    at = forge(at, widget.id, int_value=7)
    assert_noted_not_crashed(at, key)


# Lesson 3's "Measure" is a segmented control: a browser sends its choice as a list of labels (string_array_value).
# Judged as a radio's (one string_value), every click on it was dropped ("Dropped unreadable values of
# ['peak_metric']" in a lecture's server log, and the chart never changed).
def _peak_metric(at: AppTest) -> str:
    radio = _predict_radio(at)
    radio.set_value(radio.options[0]).run()  # answered: the chart and its Measure control appear
    metadata = at._session_state._state._new_widget_state.widget_metadata
    return next(widget_id for widget_id in metadata if widget_id.endswith("peak_metric"))


@pytest.mark.parametrize("forget", [None, _forget_field], ids=["registered", "field"])
def test_a_segmented_control_s_choice_sent_as_a_browser_sends_it_is_kept(forge, forget) -> None:
    from core.charts.why_scale import PeakMetric, peakiness_label

    at = open_page("why_scale")
    widget_id = _peak_metric(at)
    if forget is not None:
        forget(at, widget_id)
    at = forge(at, widget_id, string_array_value={"data": [peakiness_label(PeakMetric.ENTROPY)]})
    assert not at.exception, [e.value for e in at.exception]
    assert not [n.value for n in [*at.warning, *at.toast] if "cannot read" in n.value]
    assert at.session_state["peak_metric"] == PeakMetric.ENTROPY, "the student's choice was dropped"


@pytest.mark.parametrize(
    "field", [{"string_array_value": {"data": ["nope"]}}, {"string_value": "entropy"}, {"int_value": 1}],
    ids=["no option", "one string", "a number"],
)  # fmt: skip
def test_a_segmented_control_sent_what_it_never_sends_is_noted(forge, field: dict) -> None:
    at = open_page("why_scale")
    widget_id = _peak_metric(at)
    at = forge(at, widget_id, **field)
    assert_noted_not_crashed(at, "peak_metric")
