"""The lesson's steps and presentation mode: one step at a time, larger type, the step in the link."""

from __future__ import annotations

import streamlit as st

_STEPS_KEY = "steps_drawn"  # how many steps this run's page has drawn so far


def start_counting() -> None:
    """Before each page run: step 1 is the lesson's opening, before its first heading."""
    st.session_state[_STEPS_KEY] = 1


def step(title: str) -> None:
    """Start the next step of the lesson: its heading, in a container presentation mode can find.

    Outside presentation mode this is a subheader. In presentation mode the frame shows one
    step at a time (`presentation_style`), so a page only marks where each step starts.
    """
    number = st.session_state.get(_STEPS_KEY, 1) + 1
    st.session_state[_STEPS_KEY] = number
    with st.container(key=f"al-step-{number}"):
        st.subheader(title)


def steps_drawn() -> int:
    """How many steps the page drew in this run (1 + its step() calls)."""
    return int(st.session_state.get(_STEPS_KEY, 1))


def presentation_style(current: int) -> str:
    """CSS that shows only step `current` of the page's main column, and larger type.

    The page's top-level blocks are siblings (each container sits in its own wrapper); a step
    runs from its marker container to the next marker. The title block and the step bar stay.
    """
    blocks = '[data-testid="stMainBlockContainer"] > [data-testid="stVerticalBlock"] > div'
    marker = lambda n: f"{blocks}:has(> .st-key-al-step-{n})"  # noqa: E731 - a one-line selector builder
    keep = ":not(:has(> .st-key-al-bar)):not(:has(> .st-key-al-title))"
    rules = [
        f"{marker(current + 1)}, {marker(current + 1)} ~ div {{display: none;}}",
        "html {font-size: 20px;}",
    ]
    if current > 1:
        rules.append(f"{blocks}:has(~ div > .st-key-al-step-{current}){keep} {{display: none;}}")
    return "<style>" + "\n".join(rules) + "</style>"


def _move_step(delta: int, total: int) -> None:
    st.session_state["step"] = min(max(1, int(st.session_state.get("step", 1) or 1) + delta), total)


def presentation_bar(total: int) -> None:
    """Back / step k of n / Next, with the step bound to the link so students follow the teacher."""
    back, where, forward = st.columns([1, 3, 1], vertical_alignment="bottom")
    with where:
        chosen = st.number_input(f"Step (of {total})", 1, max(total, 1), 1, key="step", bind="query-params")
    current = min(int(chosen or 1), total)
    back.button("← Back", on_click=_move_step, args=(-1, total), disabled=current <= 1, width="stretch")
    forward.button("Next →", on_click=_move_step, args=(1, total), disabled=current >= total, width="stretch")
    st.html(presentation_style(current))
