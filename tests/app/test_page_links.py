"""Page controls whose box shows a name keep a short code in the link (`ui.widgets.linked_select`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.app import registry
from core.lessons.real_model import Measure
from tests.support import open_page

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "streamlit_app.py")
QUERY_PAGES = ("without_weights", "trainable_weights")


def query_box(at: AppTest):
    return next(box for box in at.selectbox if box.label == "Query token")


@pytest.mark.parametrize("slug", QUERY_PAGES)
def test_a_link_chooses_the_query_token_counted_from_one(slug: str) -> None:
    at = open_page(slug, query="3")
    assert query_box(at).value == 2
    assert query_box(at).format_func(2) == "3: starts"  # the book's sentence: Your journey starts ...
    assert not at.warning


@pytest.mark.parametrize("slug", QUERY_PAGES)
def test_choosing_a_query_writes_its_number_into_the_link_and_the_default_leaves_it(slug: str) -> None:
    at = open_page(slug)
    assert "query" not in at.query_params  # the book's own query, 'journey', is the default
    query_box(at).set_value(4).run()
    assert at.query_params["query"] == "5"
    query_box(at).set_value(1).run()
    assert "query" not in at.query_params


@pytest.mark.parametrize("value", ["0", "99", "two", "<b>x</b>"])
def test_a_query_no_token_has_is_reported_and_the_default_is_kept(value: str) -> None:
    at = open_page("without_weights", query=value)
    assert query_box(at).value == 1  # 'journey'
    warnings = [w.value for w in at.warning]
    assert any(f"`query={value}`" in w and "is not one of 1, 2, 3, 4, 5, 6" in w for w in warnings), warnings
    assert "<b>" not in "".join(w.replace("`query=<b>x</b>`", "") for w in warnings)


def test_the_preset_box_shows_titles_and_the_link_keeps_the_key() -> None:
    at = open_page("trainable_weights", preset="article")
    box = at.sidebar.selectbox(key="preset")
    assert box.value == "article"
    assert box.format_func("article").startswith("Life is short, eat dessert first")
    assert at.sidebar.slider(key="d_in").value == 16  # the link implied the article's settings
    box.set_value("notebook").run()
    assert at.query_params["preset"] == "notebook"


@pytest.mark.parametrize("slug", ["why_scale", "real_model", "training_lab"])
def test_the_controls_a_page_uses_come_before_the_ones_it_ignores(slug: str) -> None:
    at = open_page(slug)
    spec = registry.page(slug)
    ignored = {control.value for control in spec.ignores_with("random")}  # the Weights control too, where it is off
    keys = [w.key for w in at.sidebar if getattr(w, "key", None) in {c.value for c in registry.Control}]
    assert set(keys) == {c.value for c in registry.Control}
    first_ignored = min(keys.index(k) for k in ignored)
    assert all(keys.index(k) < first_ignored for k in keys if k not in ignored), keys
    assert any(c.value.startswith("Not used on this page") for c in at.sidebar.caption)


def test_a_link_restores_the_real_models_sentence_head_and_measure() -> None:
    at = open_page(
        "real_model", real_example="own", real_sentence="The cat sat on the mat.", real_layer="3", real_head="5",
        real_measure="entropy",
    )  # fmt: skip
    assert at.selectbox(key="real_example").value == "own"
    assert at.text_input(key="real_sentence").value == "The cat sat on the mat."
    assert (at.selectbox(key="real_layer").value, at.selectbox(key="real_head").value) == (3, 5)
    assert at.selectbox(key="real_measure").format_func(at.selectbox(key="real_measure").value) == "entropy (nats)"
    assert any("Layer 3, head 5" in m.value for m in at.markdown)
    assert not at.warning and not at.error


def test_changing_the_real_models_controls_writes_them_into_the_link() -> None:
    at = open_page("real_model")
    at.selectbox(key="real_head").set_value(7).run()
    at.selectbox(key="real_measure").set_value(Measure.ENTROPY).run()
    # Layer, head and sentence are bound widgets: the browser writes them into the link (checked
    # in tests/browser/test_presentation.py); AppTest shows that they are bound.
    assert {at.selectbox(key=k).proto.query_param_key for k in ("real_layer", "real_head")} == {
        "real_layer",
        "real_head",
    }
    assert at.text_input(key="real_sentence").proto.query_param_key == "real_sentence"
    assert at.query_params["real_measure"] == "entropy"


def test_a_link_restores_every_training_control() -> None:
    link = {
        "train_task": "induction", "train_layers": "2", "train_heads": "1", "train_d_k": "32",
        "train_scale": "false", "train_init": "book", "train_lr": "0.001", "train_steps": "400",
    }  # fmt: skip
    at = open_page("training_lab", **link)
    assert at.selectbox(key="train_task").value == "induction"
    assert at.radio(key="train_layers").value == 2
    assert at.number_input(key="train_heads").value == 1
    assert at.selectbox(key="train_d_k").value == 32
    assert at.toggle(key="train_scale").value is False
    assert at.selectbox(key="train_init").value == "book"
    assert at.selectbox(key="train_lr").value == 0.001
    assert at.number_input(key="train_steps").value == 400
    assert not at.warning


def test_a_new_task_still_brings_its_own_depth_and_length_and_the_link_follows() -> None:
    at = open_page("training_lab")
    assert at.number_input(key="train_steps").value == 300  # the previous-token task's length
    at.selectbox(key="train_task").set_value("induction").run()
    assert at.radio(key="train_layers").value == 2
    assert at.query_params["train_task"] == "induction"
    assert at.radio(key="train_layers").proto.query_param_key == "train_layers"
