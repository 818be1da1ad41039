"""The shared sidebar: every control of core/app/controls.py `SIDEBAR`, drawn in one loop.

Each control is bound to the link (bind="query-params") and persists across page switches
(persist_state="session"). The controls a page uses come first; the ones it ignores follow, greyed out
under their reasons (the page's registry row). A control the page uses can still be greyed out by another
control's value (`Greyed`: the sentence box without "Your own sentence", say).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from core.app import registry
from core.app.controls import PRESET_CONTROLS, SIDEBAR, Greyed, SidebarControl, Widget
from core.app.settings import PRESETS, PresetKey, Settings, settings_for_preset
from core.inputs.weights import WeightSource
from ui import widgets


def apply_preset() -> None:
    """on_change of the preset box: choosing a preset sets the sidebar to its values."""
    key = st.session_state.get("preset", PresetKey.BOOK)
    chosen = settings_for_preset(key, Settings(d_in=st.session_state.get("d_in", 3)))
    for control in PRESET_CONTROLS:
        st.session_state[control.value] = getattr(chosen, control.value)


@dataclass(frozen=True)
class Context:
    """What decides a control's state beyond its own spec: this page, its ignored controls, the machine."""

    page: registry.PageSpec
    unused: Mapping[str, str]  # control key -> why this page ignores it
    devices: tuple[str, ...]


def greyed_reason(spec: SidebarControl, context: Context, preset: PresetKey) -> str | None:
    """Why a control this page uses is greyed out anyway (another control's value), or None."""
    if spec.greyed is Greyed.WITHOUT_OWN_SENTENCE and preset != PresetKey.CUSTOM:
        return "Choose 'Your own sentence' above to type one."
    if spec.greyed is Greyed.INPUTS_FIXED and PRESETS[preset].fixed_inputs:
        return "Fixed by the source's own embeddings."
    if spec.greyed is Greyed.NOTHING_DRAWN and not context.page.random_weights and PRESETS[preset].fixed_inputs:
        return "Not used here: the source's inputs are fixed and this page draws nothing."
    return None


def state(spec: SidebarControl, context: Context, preset: PresetKey) -> dict:
    """The widget's disabled flag and help: the page's reason, another control's, or the control's own help."""
    if spec.key in context.unused:
        return {"disabled": True, "help": f"Not used here: {context.unused[spec.key]}."}
    why = greyed_reason(spec, context, preset)
    # The sentence box is greyed out but is the page's own control: its help says how to turn it on.
    return {"disabled": why is not None, "help": why or spec.help}


def _number(value: object) -> float:
    """A widget's numeric value (a slider's int or float, a number box's float, a toggle's bool)."""
    if not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {type(value).__name__}")
    return float(value)


def draw(spec: SidebarControl, where: DeltaGenerator, context: Context, preset: PresetKey) -> object:
    """One control's widget, bound to the link; its value as the widget holds it."""
    options = {**widgets.LINKED, **state(spec, context, preset)}
    default = spec.default
    if spec.widget is Widget.SELECT:  # the preset: the box shows the example's title, the link its short key
        options.pop("bind"), options.pop("persist_state")
        return widgets.linked_select(
            spec.label,
            list(PRESETS),
            key=spec.key,
            param=spec.key,
            code=str,
            name=lambda key: PRESETS[PresetKey(str(key))].label,
            default=default,
            on_change=apply_preset,
            where=where,
            **options,
        )
    if spec.widget is Widget.RADIO:  # plain values as labels: a bound widget writes its shown label
        return where.radio(spec.label, list(spec.options), key=spec.key, horizontal=True, **options)
    if spec.widget is Widget.TEXT:
        return where.text_input(spec.label, str(default), max_chars=spec.max_chars, key=spec.key, **options)
    if spec.widget is Widget.SLIDER:
        low, high = _number(spec.low), _number(spec.high)
        if spec.step is not None and spec.step < 1:
            return where.slider(spec.label, low, high, _number(default), step=spec.step, key=spec.key, **options)
        return where.slider(spec.label, int(low), int(high), int(_number(default)), key=spec.key, **options)
    if spec.widget is Widget.WHOLE_NUMBER_BOX:
        # A float-typed box showing whole numbers: Streamlit's integer box crashes on a link such as
        # ?seed=1e9999 (it tries int(inf)); the float one ignores it, and Settings rounds.
        bounds = (_number(spec.low), _number(spec.high), _number(default))
        return where.number_input(spec.label, *bounds, step=spec.step, format="%.0f", key=spec.key, **options)
    if spec.widget is Widget.TOGGLE:
        return where.toggle(spec.label, bool(default), key=spec.key, **options)
    return where.selectbox(spec.label, list(context.devices), key=spec.key, **options)  # MACHINE_SELECT


def draw_all(page: registry.PageSpec, weights_now: WeightSource, devices: list[str]) -> dict[str, object]:
    """Every sidebar control for this page, the used ones first; {key: the value its widget holds}."""
    unused = {control.value: reason for control, reason in page.ignores_with(weights_now).items()}
    context = Context(page, unused, tuple(devices))
    st.subheader("Settings")
    # Widgets are created in one order (the preset before the boxes it fills), each into its group.
    used_box, unused_box = st.container(), st.container()
    if unused:
        unused_box.caption("Not used on this page: " + "; ".join(f"**{k}** ({v})" for k, v in unused.items()))
    values: dict[str, object] = {}
    preset = PresetKey(st.session_state.get("preset", Settings().preset))
    for spec in SIDEBAR:
        where = unused_box if spec.key in unused else used_box
        values[spec.key] = draw(spec, where, context, preset)
        if spec.control is registry.Control.PRESET:
            preset = PresetKey(str(values[spec.key]))
    used_box.toggle(
        "Presentation mode",
        False,
        key="present",
        bind="query-params",
        persist_state="session",
        help="One step of the lesson at a time, larger type, sidebar closed; the step is in the link.",
    )
    if "weights" in unused:  # a page without the chosen source runs on random weights
        values["weights"] = WeightSource.RANDOM.value
    return values


def settings_from(values: Mapping[str, object]) -> Settings:
    """The widgets' values as the frozen Settings the pages compute from: each control's spec converts its own
    (core.app.controls.SidebarControl.setting), so a new sidebar control needs no line here."""
    fields: dict[str, Any] = {spec.key: spec.setting(values[spec.key]) for spec in SIDEBAR}  # typed by each spec
    return replace(Settings(), **fields)
