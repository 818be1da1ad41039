"""The sidebar's controls: one typed spec each, read by the sidebar, the link rule, the presets and the tests.

A `SidebarControl` says what the control is (its `Control`, the `Settings` field and URL key of the same
name), which widget draws it, its label, default, range or choices, its help, and whether a preset sets it.
From it follow the link's rule for the control (`rule`), the pages that use it (`pages`, the inverse of
each registry row's `ignores`), and the sidebar's widget (ui/sidebar.py draws `SIDEBAR` in a loop).
Adding a sidebar control is one entry here plus its `Settings` field and `Control` member.

Pure Python (no streamlit).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import Enum
from types import MappingProxyType

from core.app import registry
from core.app.registry import Control
from core.app.rules import Choice, Flag, Rate, Rule, Text, Whole
from core.app.settings import LIMITS, PRESETS, Settings
from core.inputs.examples import MAX_TEXT_CHARS
from core.inputs.weights import WeightSource


class Widget(Enum):
    """How the sidebar draws a control (and so how its value reads from a link)."""

    SELECT = "select"  # a select box that keeps a short code in the link (ui.widgets.linked_select)
    RADIO = "radio"
    TEXT = "text"
    SLIDER = "slider"
    WHOLE_NUMBER_BOX = "whole number box"  # float-typed, shown without decimals: "7.0" in a link is 7
    TOGGLE = "toggle"
    MACHINE_SELECT = "machine select"  # choices the machine has (the device): known only at run time


class Greyed(Enum):
    """When a control that the page uses is greyed out anyway, because of another control's value."""

    NEVER = "never"
    WITHOUT_OWN_SENTENCE = "without own sentence"  # the sentence box: only for "Your own sentence"
    INPUTS_FIXED = "inputs fixed"  # d_in: a source's embeddings have their own width
    NOTHING_DRAWN = "nothing drawn"  # the seed: the page draws no weights and the source's inputs are fixed


_SLOWER = "slow every page for the class."  # why the sliders stop where they do (bench/ measurements)
WEIGHTS_HELP = (
    "random: the sources' own random draw (their worked examples, digit for digit). "
    "pretrained: one head of all-MiniLM-L6-v2, an encoder, weights that learned something (lessons 2, 4, 5 and 7). "
    "decoder: one head of SmolLM2-135M, a GPT-style decoder trained behind the causal mask (lessons 2, 4 and 5)."
)


@dataclass(frozen=True, kw_only=True)
class SidebarControl:
    """One sidebar control."""

    control: Control
    widget: Widget
    label: str
    help: str | None = None  # what the widget's (?) says where the page uses it
    low: float | None = None  # a slider's or a box's range
    high: float | None = None
    step: float | None = None
    options: tuple[str, ...] = ()  # a select box's or radio's codes, as the link spells them
    max_chars: int | None = None  # a text box's limit
    preset_type: type | None = None  # a preset sets this control; the type its widget holds
    greyed: Greyed = Greyed.NEVER

    @property
    def key(self) -> str:
        """The widget's key, the `Settings` field and the URL parameter: one name."""
        return self.control.value

    @property
    def default(self) -> object:
        """The value the sidebar opens with: `Settings()`'s."""
        return getattr(Settings(), self.key)

    def setting(self, value: object) -> object:
        """The widget's value as this control's `Settings` field holds it: the type of the field's default (a
        select's code as its enum, a number box's 7.0 as 7). Raises TypeError for a number that is not one."""
        default = self.default
        if isinstance(default, Enum):
            return type(default)(str(value))
        if isinstance(default, str):
            return str(value or "")
        if isinstance(default, bool):  # before the numbers: a bool is an int to Python
            return bool(value)
        if not isinstance(value, int | float):
            raise TypeError(f"{self.key}: expected a number, got {type(value).__name__}")
        return int(round(value)) if isinstance(default, int) else float(value)

    def rule(self) -> Rule:
        """The link's rule for this control (a machine's choices: `core.app.links.rules` adds them)."""
        if self.widget in (Widget.SELECT, Widget.RADIO, Widget.MACHINE_SELECT):
            return Choice(self.options)
        if self.widget is Widget.TEXT:
            return Text(self.max_chars or MAX_TEXT_CHARS)
        if self.widget is Widget.TOGGLE:
            return Flag()
        assert self.low is not None and self.high is not None, self.key
        if self.step is not None and self.step < 1:
            return Rate(self.low, self.high)
        return Whole(int(self.low), int(self.high), point_zero=self.widget is Widget.WHOLE_NUMBER_BOX)

    def pages(self) -> tuple[str, ...]:
        """The slugs of the pages that use this control (with random weights): the registry's rows that do
        not list it among their ignored controls."""
        return tuple(spec.slug for spec in registry.PAGES if self.control not in spec.ignores_with(WeightSource.RANDOM))


# In the order the sidebar draws them: the preset before the boxes it fills.
SIDEBAR: tuple[SidebarControl, ...] = (
    SidebarControl(
        control=Control.PRESET,
        widget=Widget.SELECT,
        label="Input (a source's worked example, or your own sentence)",
        options=tuple(PRESETS),
    ),
    SidebarControl(
        control=Control.WEIGHTS,
        widget=Widget.RADIO,
        label="Weights",
        help=WEIGHTS_HELP,
        options=tuple(source.value for source in WeightSource),
    ),
    SidebarControl(
        control=Control.TEXT,
        widget=Widget.TEXT,
        label="Your sentence",
        max_chars=MAX_TEXT_CHARS,
        greyed=Greyed.WITHOUT_OWN_SENTENCE,
    ),
    SidebarControl(
        control=Control.D_IN,
        widget=Widget.SLIDER,
        label="d_in (embedding width)",
        help=f"At most 64: wider embeddings stop fitting on a projector and {_SLOWER}",
        preset_type=int,
        greyed=Greyed.INPUTS_FIXED,
        low=LIMITS[Control.D_IN][0],
        high=LIMITS[Control.D_IN][1],
    ),
    SidebarControl(
        control=Control.D_OUT,
        widget=Widget.SLIDER,
        label="d_out (query/key/value width)",
        help=f"At most 64: wider projections stop fitting on a projector and {_SLOWER}",
        preset_type=int,
        low=LIMITS[Control.D_OUT][0],
        high=LIMITS[Control.D_OUT][1],
    ),
    SidebarControl(
        control=Control.SEED,
        widget=Widget.WHOLE_NUMBER_BOX,
        label="Seed",
        step=1.0,
        preset_type=float,  # the box is float-typed (see Widget.WHOLE_NUMBER_BOX)
        greyed=Greyed.NOTHING_DRAWN,
        low=LIMITS[Control.SEED][0],
        high=LIMITS[Control.SEED][1],
    ),
    SidebarControl(
        control=Control.DROPOUT,
        widget=Widget.SLIDER,
        label="Dropout rate",
        step=0.05,
        preset_type=float,
        low=LIMITS[Control.DROPOUT][0],
        high=LIMITS[Control.DROPOUT][1],
    ),
    SidebarControl(
        control=Control.NUM_HEADS,
        widget=Widget.SLIDER,
        label="Heads",
        help="At most 8 heads: one readable heatmap per head.",
        preset_type=int,
        low=LIMITS[Control.NUM_HEADS][0],
        high=LIMITS[Control.NUM_HEADS][1],
    ),
    SidebarControl(control=Control.SCALE, widget=Widget.TOGGLE, label="Scale scores by 1/√d_k", preset_type=bool),
    SidebarControl(control=Control.DEVICE, widget=Widget.MACHINE_SELECT, label="Device"),
)

BY_CONTROL: Mapping[Control, SidebarControl] = MappingProxyType({spec.control: spec for spec in SIDEBAR})

# The controls a preset sets, and the type each widget holds (core.app.settings.settings_for_preset).
PRESET_CONTROLS: Mapping[Control, type] = MappingProxyType(
    {spec.control: spec.preset_type for spec in SIDEBAR if spec.preset_type is not None}
)

# Every sidebar control's link rule but the device's (the machine's choices: core.app.links.rules).
SIDEBAR_RULES: Mapping[str, Rule] = MappingProxyType(
    {spec.key: spec.rule() for spec in SIDEBAR if spec.widget is not Widget.MACHINE_SELECT}
)


def check() -> None:
    """The specs cover exactly the `Settings` fields and `Control` members (tests/app/test_controls.py)."""
    names = {field.name for field in fields(Settings)}
    if {spec.key for spec in SIDEBAR} != names or set(BY_CONTROL) != set(Control):
        raise AssertionError("core/app/controls.py SIDEBAR must list every Settings field and Control member once")
