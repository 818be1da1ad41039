"""The typed control model (core/app/controls.py): one spec per sidebar control, read by the sidebar's loop
(ui/sidebar.py), the link rule (core/app/links.py) and the presets; AppTest proves the frame draws it."""

from __future__ import annotations

from dataclasses import fields

import pytest
from streamlit.testing.v1 import AppTest

from core.app import controls, links, registry
from core.app.controls import SIDEBAR, Greyed, SidebarControl, Widget
from core.app.registry import Control
from core.app.rules import Choice, Flag, Rate, Text, Whole
from core.app.settings import LIMITS, Settings
from tests.support import APP


def test_one_spec_per_settings_field_and_control_in_the_sidebars_order() -> None:
    controls.check()
    keys = [spec.key for spec in SIDEBAR]
    assert len(keys) == len(set(keys)) and set(keys) == {field.name for field in fields(Settings)}
    assert SIDEBAR[0].control is Control.PRESET  # the preset is drawn before the boxes it fills
    assert all(spec.default == getattr(Settings(), spec.key) for spec in SIDEBAR)


def test_each_controls_link_rule_follows_from_its_widget_and_range() -> None:
    rules = links.rules(["cpu"])
    assert rules["d_in"] == Whole(1, int(LIMITS[Control.D_IN][1]))
    assert rules["seed"] == Whole(0, 2**31 - 1, point_zero=True)  # the float-typed box writes "7.0"
    assert rules["dropout"] == Rate(0.0, 0.9)
    assert rules["scale"] == Flag()
    assert rules["text"] == Text()
    assert rules["weights"] == Choice(("random", "pretrained", "decoder"))
    assert rules["device"] == Choice(("cpu",))  # the machine's choices, added when a link is read
    # A new control is one entry: its rule comes from its widget.
    new = SidebarControl(control=Control.D_OUT, widget=Widget.SLIDER, label="x", low=2, high=9)
    assert new.rule() == Whole(2, 9)


def test_the_preset_sets_exactly_the_controls_whose_spec_says_so() -> None:
    assert list(controls.PRESET_CONTROLS) == [
        Control.D_IN,
        Control.D_OUT,
        Control.SEED,
        Control.DROPOUT,
        Control.NUM_HEADS,
        Control.SCALE,
    ]
    implied = links.settings_implied_by_link({"preset": "article"}, ["cpu"])
    assert implied == {"d_in": 16, "d_out": 24, "seed": 123.0, "dropout": 0.0, "num_heads": 3, "scale": True}


def test_the_pages_that_use_a_control_are_the_registrys_inverse() -> None:
    heads = controls.BY_CONTROL[Control.NUM_HEADS]
    assert heads.pages() == ("multi_head",)
    assert controls.BY_CONTROL[Control.DROPOUT].pages() == ("causal_dropout",)
    for spec in SIDEBAR:
        for slug in spec.pages():
            assert spec.control not in registry.page(slug).ignores_with("random")


@pytest.mark.parametrize("slug", ["overview", "multi_head", "causal_dropout"])
def test_the_sidebar_draws_every_spec_once_with_its_label_and_reason(slug: str) -> None:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    spec = registry.page(slug)
    if spec is not registry.HOME:
        at.switch_page(spec.file).run()
    assert not at.exception, [e.value for e in at.exception]
    keyed = {widget.key: widget for widget in at.sidebar if getattr(widget, "key", None)}
    ignored = spec.ignores_with("random")
    for control in SIDEBAR:
        widget = keyed[control.key]
        assert widget.label == control.label
        if control.control in ignored:
            assert widget.disabled and widget.help == f"Not used here: {ignored[control.control]}."
        elif control.greyed is Greyed.NEVER:
            assert not widget.disabled, control.key


def test_a_control_greyed_by_another_controls_value_says_why() -> None:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(registry.page("trainable_weights").file).run()
    text = at.sidebar.text_input(key="text")
    assert text.disabled and text.help == "Choose 'Your own sentence' above to type one."  # the book's preset
    assert at.sidebar.slider(key="d_in").disabled  # the book's embeddings are 3 wide
    at.sidebar.selectbox(key="preset").set_value("custom").run()
    assert not at.sidebar.text_input(key="text").disabled and not at.sidebar.slider(key="d_in").disabled
