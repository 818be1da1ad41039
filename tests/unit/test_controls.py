"""The typed control model (core/app/controls.py): one spec per sidebar control, read by the sidebar's loop
(ui/sidebar.py), the link rule (core/app/links.py) and the presets. That the frame draws it (AppTest) is
tests/app/test_controls_app.py."""

from __future__ import annotations

from dataclasses import fields

from core.app import controls, links, registry
from core.app.controls import SIDEBAR, SidebarControl, Widget
from core.app.registry import Control
from core.app.rules import Choice, Flag, Rate, Text, Whole
from core.app.settings import LIMITS, Settings


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


def test_each_spec_turns_its_widgets_value_into_its_settings_fields_type() -> None:
    """settings_from is built from the specs (issue 43 item 4): a new sidebar control needs no line there."""
    import pytest

    from core.app.settings import PresetKey
    from core.inputs.weights import WeightSource
    from ui.sidebar import settings_from

    by_key = {spec.key: spec for spec in SIDEBAR}
    # What the widgets hold: a select's and a radio's code, a slider's int or float, the seed box's float.
    widget_values = {
        "preset": "blog", "text": None, "d_in": 5, "d_out": 4, "seed": 7.0, "dropout": 0.25,
        "num_heads": 3, "scale": False, "device": "cpu", "weights": "decoder",
    }  # fmt: skip
    settings = settings_from(widget_values)
    assert settings == Settings(
        preset=PresetKey.BLOG, text="", d_in=5, d_out=4, seed=7, dropout=0.25, num_heads=3, scale=False,
        device="cpu", weights=WeightSource.DECODER,
    )  # fmt: skip
    assert type(settings.seed) is int and type(settings.dropout) is float
    assert settings_from({spec.key: spec.default for spec in SIDEBAR}) == Settings()  # the defaults round-trip
    with pytest.raises(TypeError, match="d_in"):
        by_key["d_in"].setting("5")  # a number that is not one is refused, not guessed
    with pytest.raises(ValueError):
        by_key["weights"].setting("hidden")  # off the list
