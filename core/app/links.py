"""Every URL parameter the app reads, and the one rule a link's value must pass.

A link carries the sidebar's settings, the frame's presentation mode and step, and each page's
own controls. Each parameter has one entry in `PARAMETERS`: what spellings it takes and the range
or choices it allows. `read` applies the rule: a value is used exactly as written, or it is
ignored with one note that names the parameter, and the control then keeps its default. A number
a box offers is used in any plain spelling of exactly that number ("4" for 4.0, "1024" for 1,024),
respelled as the box binds it.

Streamlit's bound widgets parse a link more loosely than this (int("１２"), int("1_000"),
float("1e3"), float(" 500 "), the start of an over-long text) and crash on some values
(int("1e999") raises OverflowError inside the number box), so the frame reads the link with this
rule first and removes what it ignores before any widget binds it (streamlit_app.py).

To give a new control a link: give it a spec with its rule (core/app/page_controls.py for a page's own,
core/app/controls.py for the sidebar's); tests/unit/test_links.py checks that every control has one.
Pure Python (no streamlit).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from core.app import registry
from core.app.controls import PRESET_CONTROLS, SIDEBAR_RULES
from core.app.page_controls import LINKED, model_head_rules
from core.app.registry import PageControl
from core.app.rules import (  # noqa: F401
    CheckedByItsControl,
    Choice,
    Flag,
    NumberChoice,
    Rate,
    Reading,
    Rule,
    Text,
    Whole,
)
from core.app.settings import PRESETS, PresetKey, Settings, settings_for_preset
from core.inputs.weights import WeightSource

# Lesson 6's names for a model's head. Lessons 2, 4 and 5 take them too (their own boxes write layer/head):
# a teacher who carries `real_layer=16&real_head=0` over from lesson 6 onto `?weights=decoder` means that head.
MODEL_HEAD_PARAMETERS = (PageControl.REAL_LAYER, PageControl.REAL_HEAD)

# The sidebar's settings (the fields of core.app.settings.Settings), each by its control's spec
# (core/app/controls.py); the device's choices are the machine's, so `rules` adds that rule when it reads a link.
SIDEBAR_PARAMETERS: Mapping[str, Rule] = SIDEBAR_RULES

# Every other parameter a link can carry: the frame's and each page's own controls, each by its spec
# (core/app/page_controls.py).
PAGE_PARAMETERS: Mapping[str, Rule] = MappingProxyType({spec.key: spec.rule for spec in LINKED})


@dataclass(frozen=True)
class LinkNote:
    """One link value the app ignores: the parameter, the value as given, and why."""

    parameter: str
    value: str
    reason: str  # plain words that complete "'name=value' ..."


def read(rule: Rule, name: str, values: list[str]) -> tuple[object, LinkNote | None]:
    """One parameter by the rule: (its value, None), or (None, the note that says why it is ignored)."""
    if len(values) != 1:
        return None, LinkNote(name, " & ".join(map(str, values)), f"is given {len(values)} times")
    value, problem = rule.read(str(values[0]))
    return (None, LinkNote(name, str(values[0]), problem)) if problem else (value, None)


def model_head_for(controls: Mapping[str, object], source: WeightSource) -> tuple[dict[str, int], tuple[LinkNote, ...]]:
    """A link's accepted `real_layer`/`real_head` held to the model of `source`: (those in its range, a note
    for each other). For a page that shows one model whatever the link's Weights say (lesson 6, the encoder):
    the link's rule let `real_layer=16` through for `weights=decoder`, and lesson 6's box fell silently to 0."""
    rules = model_head_rules(source)
    kept: dict[str, int] = {}
    notes: list[LinkNote] = []
    for control in MODEL_HEAD_PARAMETERS:
        if (name := control.value) in controls:
            value, note = read(rules[control], name, [str(controls[name])])
            if note:
                notes.append(note)
            else:
                kept[name] = int(str(value))
    return kept, tuple(notes)


@dataclass(frozen=True)
class LinkReading:
    """What a link asks for, after the rule: the settings to show, the page controls' values, what was ignored."""

    settings: Settings  # the link's accepted sidebar values over the defaults
    notes: tuple[LinkNote, ...]  # at most one per known parameter
    unknown: tuple[str, ...]  # names of parameters the app does not know, in link order
    controls: Mapping[str, object] = field(default_factory=dict)  # accepted values of the frame's and pages' controls
    too_long_chars: int = 0  # the link's size when it was over MAX_LINK_CHARS and ignored whole (else 0)
    # Accepted values the link spells otherwise than their bound widget does ("4" for the multiplier's "4.0"):
    # the widget's spelling, which the frame writes into the link before the widget binds it.
    respelled: Mapping[str, str] = field(default_factory=dict)

    def sidebar_notes(self) -> tuple[LinkNote, ...]:
        return tuple(note for note in self.notes if note.parameter in Settings.__dataclass_fields__)

    def page_notes(self) -> tuple[LinkNote, ...]:
        return tuple(note for note in self.notes if note.parameter not in Settings.__dataclass_fields__)


# The longest link the app writes is about 1,500 characters (a 400-character sentence and every
# control of a page); a link over this bound is ignored whole, with one note. Under it, each ignored
# value gets its own note (a 10 kB number included), and the cleaned link goes back in one message:
# what the server sends never grows with what a link holds beyond its valid values.
MAX_LINK_CHARS = 16_000


def link_chars(params: Mapping[str, str | list[str]]) -> int:
    """A link's size as "name=value&" per value, in characters of its decoded query parameters."""
    return sum(
        len(name) + len(value) + 2
        for name, raw in params.items()
        for value in (raw if isinstance(raw, list) else [raw])
    )


def rules(devices: list[str], weights: WeightSource = WeightSource.RANDOM) -> Mapping[str, Rule]:
    """The rule of every parameter a link can carry, on a machine with these devices, for a link whose
    Weights control says `weights` (a model's head is bounded by that model)."""
    model_head = {control.value: rule for control, rule in model_head_rules(weights).items()}
    return {**SIDEBAR_PARAMETERS, "device": Choice(tuple(devices)), **PAGE_PARAMETERS, **model_head}


def link_weights(params: Mapping[str, str | list[str]]) -> WeightSource:
    """The weight source a link chooses, by the Weights control's own rule (the default where it chooses none)."""
    raw = params.get("weights")
    if raw is None:
        return Settings().weights
    value, note = read(SIDEBAR_PARAMETERS["weights"], "weights", raw if isinstance(raw, list) else [raw])
    return Settings().weights if note else WeightSource(str(value))


def read_link(params: Mapping[str, str | list[str]], devices: list[str]) -> LinkReading:
    """Read a link's query parameters by the one rule (see the module docstring).

    `params` maps each name to its value, or to all its values when it was repeated. A link over
    MAX_LINK_CHARS gives the defaults, with its size in `too_long_chars`.
    """
    if (size := link_chars(params)) > MAX_LINK_CHARS:
        return LinkReading(Settings(), (), (), too_long_chars=size)
    by_name = rules(devices, link_weights(params))
    accepted: dict[str, object] = {}
    notes: list[LinkNote] = []
    unknown: list[str] = []
    respelled: dict[str, str] = {}
    for name, raw in params.items():
        rule = by_name.get(name)
        if rule is None:
            unknown.append(name)
            continue
        given = raw if isinstance(raw, list) else [raw]
        value, note = read(rule, name, given)
        if note:
            notes.append(note)
            continue
        accepted[name] = value
        if isinstance(rule, NumberChoice) and value != given[0]:
            respelled[name] = str(value)
    # Any: each sidebar rule returns its Settings field's type (tests/test_links.py), which no static type states.
    sidebar: dict[str, Any] = {name: value for name, value in accepted.items() if name in Settings.__dataclass_fields__}
    if "preset" in sidebar:
        sidebar["preset"] = PresetKey(sidebar["preset"])
    if "weights" in sidebar:
        sidebar["weights"] = WeightSource(sidebar["weights"])
    controls = {name: value for name, value in accepted.items() if name not in sidebar}
    return LinkReading(Settings(**sidebar), tuple(notes), tuple(unknown), controls, respelled=respelled)


def controls_without_a_rule() -> frozenset[str]:
    """Link keys some widget binds that have no rule here (tests/test_links.py keeps this empty)."""
    return registry.link_keys() - set(rules(["cpu"]))


def settings_implied_by_link(params: Mapping[str, str | list[str]], devices: list[str]) -> dict[str, object]:
    """What a link opens with beyond what it spells out: its source preset's value for every
    control the link does not give (or gives as a value the app ignores).

    `?preset=article` alone thus opens the article's d_in 16, d_out 24 and 3 heads, as choosing
    the preset in the box does; `?preset=article&seed=7` keeps the link's seed. A link without a
    valid preset, or with "custom" (no source behind it), implies nothing: the sidebar's defaults
    hold. Values come typed as the sidebar widgets hold them.
    """
    raw = params.get("preset")
    key = raw[-1] if isinstance(raw, list) else raw
    if key is None or key not in PRESETS or key == PresetKey.CUSTOM:
        return {}
    ignored = {note.parameter for note in read_link(params, devices).notes}
    given = set(params) - ignored
    chosen = settings_for_preset(PresetKey(key))
    return {name.value: kind(getattr(chosen, name)) for name, kind in PRESET_CONTROLS.items() if name not in given}
