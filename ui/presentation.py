"""The lesson's steps and presentation mode: one step at a time, larger type, the step in the link."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from core.app.links import LinkReading
from ui.link_notes import link_warning

_STEPS_KEY = "steps_drawn"  # how many steps this run's page has drawn so far
_STEP_PAGE = "step_page"  # the page the session's current step belongs to
_QUESTIONS_KEY = "question_steps"  # this run: the step each predict question was drawn on, by its key
_QUESTION_STEPS_KEY = "steps_with_questions"  # page slug -> the steps that held a question, for the poll's panel
_LINK_PAGE = "link_page"  # the page this session's link opened in presentation mode


def presenting() -> bool:
    """Whether this session is in presentation mode (a projector's screen: a page may draw a compact chart)."""
    return bool(st.session_state.get("present"))


def start_counting() -> None:
    """Before each page run: step 1 is the lesson's opening, before its first heading."""
    st.session_state[_STEPS_KEY] = 1
    st.session_state[_QUESTIONS_KEY] = {}


def step(title: str) -> None:
    """Start the next step of the lesson: its heading, in a container presentation mode can find.

    Outside presentation mode this is a subheader. In presentation mode the frame shows one
    step at a time (`presentation_style`), so a page only marks where each step starts.
    """
    number = st.session_state.get(_STEPS_KEY, 1) + 1
    st.session_state[_STEPS_KEY] = number
    with st.container(key=f"al-step-{number}"):
        st.subheader(title)


def step_break() -> None:
    """In presentation mode, start the next step here, without a heading; elsewhere nothing changes.

    For a step too tall for a projector (1280×720 CSS px): its question, or its chart, then opens a
    screen of its own instead of starting below the fold. Streamlit draws no empty container, so an
    empty element marks the place; its wrapper is hidden in every mode (no extra gap on the page).
    """
    number = steps_drawn() + 1
    st.session_state[_STEPS_KEY] = number
    with st.container(key=f"al-step-{number}"):
        st.html(f"<span></span><style>div:has(> .st-key-al-step-{number}) {{display: none;}}</style>")


def steps_drawn() -> int:
    """How many steps the page drew in this run (1 + its step() and step_break() calls)."""
    return int(st.session_state.get(_STEPS_KEY, 1))


def on_screen() -> bool:
    """Whether what the page draws now is on the screen: always, except on a step presentation mode hides."""
    return not presenting() or steps_drawn() == int(st.session_state.get("step") or 1)


def question_drawn(key: str, page: str) -> None:
    """Note the step a predict question is drawn on (ui.widgets.predict), for the lock lines under it, and the
    page's steps that hold a question (`has_question`)."""
    steps = st.session_state.setdefault(_QUESTIONS_KEY, {})
    steps.pop(key, None)  # the latest question last
    steps[key] = steps_drawn()
    st.session_state.setdefault(_QUESTION_STEPS_KEY, {}).setdefault(page, set()).add(steps_drawn())


def has_question(page: str, step: int) -> bool:
    """Whether `page`'s step `step` held a question when this session last drew it."""
    return step in st.session_state.get(_QUESTION_STEPS_KEY, {}).get(page, set())


def next_question_step(page: str, step: int) -> int | None:
    """The first step after `step` of `page` that held a question when this session last drew it, if any."""
    later = [n for n in st.session_state.get(_QUESTION_STEPS_KEY, {}).get(page, set()) if n > step]
    return min(later, default=None)


def go_to_step(step: int) -> None:
    """A button's callback: show `step` (the box is bound to the link, so the link follows)."""
    st.session_state["step"] = step


def the_question(key: str | None = None) -> str:
    """How a lock line names the question it waits for (`key`; by default the latest one drawn).

    "the question above", which is true on the whole page; in presentation mode, where only one step
    shows, "the question on step N" when that question is on another step.
    """
    steps: dict[str, int] = st.session_state.get(_QUESTIONS_KEY) or {}
    where = steps.get(key) if key is not None else next(reversed(steps.values()), None)
    if presenting() and where is not None and where != steps_drawn():
        return f"the question on step {where}"
    return "the question above"


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
        *_COMPACT_HEAD,
    ]
    if current > 1:
        rules.append(f"{blocks}:has(~ div > .st-key-al-step-{current}){keep} {{display: none;}}")
    return "<style>" + "\n".join(rules) + "</style>"


# A projector is about 1280×720 CSS pixels, often zoomed to 1.5× (853×480): the repeated title and the step bar
# took about 40% of that height, and the step's chart started below the fold. The title shrinks to a line, the
# bar loses its label row and padding, and the page's top margin shrinks to the header's height.
_COMPACT_HEAD = (
    # Below the fixed header, which holds the menu and the sidebar's opener: a smaller top padding put the step
    # bar under it, where no click reaches Back or Next. The header is 3.75rem (75 px at 20 px a rem, measured in
    # Chromium on a lesson page); at 3.25rem the step box's top edge sat 10 px under it, cut on a projector.
    '[data-testid="stMainBlockContainer"] {padding-top: 4rem;}',
    ".st-key-al-title h1 {font-size: 1.35rem; padding: 0 0 0.15rem 0; line-height: 1.25;}",
    ".st-key-al-title {gap: 0.25rem;}",
    '.st-key-al-bar [data-testid="stWidgetLabel"] {display: none;}',
    ".st-key-al-bar {gap: 0.25rem;}",
    '.st-key-al-bar [data-testid="stHorizontalBlock"] {gap: 0.5rem;}',
    # Streamlit pulls the block after a heading up by 1rem (a negative margin under the heading's text) to
    # offset the heading's bottom padding; with that padding shrunk, the pull put the first line under the
    # title (a link's warning covered the title's lower half).
    '.st-key-al-title [data-testid="stHeading"] > [data-testid="stMarkdownContainer"] {margin-bottom: 0;}',
    # The step's own heading (st.subheader, larger than the shrunk title) at the title's size, with less padding.
    '[class*="st-key-al-step-"] h3 {font-size: 1.35rem; padding: 0.25rem 0 0 0; line-height: 1.25;}',
    '[class*="st-key-al-step-"] [data-testid="stHeading"] > [data-testid="stMarkdownContainer"] {margin-bottom: 0;}',
)


def start_step_on(page: str, *, following: bool) -> None:
    """Before the step box is drawn: a lesson the session has just switched to opens at step 1.

    The step is one widget shared by every page, so a teacher who moved from step 3 of one lesson to
    another landed on its step 3 (past its question), and the class followed. A student following
    a poll takes the teacher's step instead (ui.class_poll.follow_teacher has set it).
    """
    previous = st.session_state.get(_STEP_PAGE)
    st.session_state[_STEP_PAGE] = page
    if previous is not None and previous != page and not following:
        st.session_state["step"] = 1


def _move_step(delta: int, total: int) -> None:
    shown = min(int(st.session_state.get("step", 1) or 1), total)  # a step past the last shows the last
    st.session_state["step"] = min(max(1, shown + delta), total)


def step_link_note(link: LinkReading | None, total: int, page: str) -> None:
    """One warning for a link's step this page does not have, naming the page's own steps.

    The link's rule only knows that no page has more than 30 steps, and its note said "from 1 to 30" on a
    page of 4. Here: a value that rule ignored ("99", "inf"), or, on the page the link opened, a whole
    number past the page's last step (which the step box dropped without a word).
    """
    opened = st.session_state.setdefault(_LINK_PAGE, page)
    if link is None:
        return
    asked = next((note.value for note in link.page_notes() if note.parameter == "step"), None)
    wanted = link.controls.get("step")
    if asked is None and page == opened and isinstance(wanted, int) and wanted > total:
        asked = str(wanted)
    if asked is not None:
        steps = "only step 1" if total <= 1 else f"steps 1 to {total}"
        link_warning("step", asked, f"is not a step of this page, which has {steps}")


MOST_STEPS = 30  # the link rule's bound (core.app.links): no page has more
_TOTALS_KEY = "steps_total"  # page slug -> how many steps it drew when this session last showed it
_CLAMP_KEY = "step_clamp"  # a step past the page's last, to set back before the box is drawn again


@dataclass(frozen=True)
class StepBar:
    """The step box, drawn before the page, and the places the rest of the bar fills once the page has counted."""

    chosen: int  # the step the box holds (maybe past the page's last, on a page's first run)
    following: bool
    back: DeltaGenerator | None = None  # None for a student following a class poll: no buttons
    count: DeltaGenerator | None = None
    forward: DeltaGenerator | None = None
    poll: DeltaGenerator | None = None  # where "Poll" starts a class poll (ui/class_poll.bar_button)


def step_box(page: str, *, following: bool = False) -> StepBar:
    """The step box, bound to the link, drawn before the page so that the link holds the new step before any chart
    of the page reaches the browser.

    Why before: Vega's SVG renderer paints a colour legend's ramp with a fill that names the address it was drawn
    at; drawn after the page, the box moved the link to the new step after the charts, and every ramp a step showed
    after Next was blank (lesson 5's heads on a projector, an independent review). The page's step count is not
    known yet, so the box's bound is the count this session last saw on this page (MOST_STEPS the first time);
    `step_bar` sends a step past the page's last back to step 1, as the box itself did when its bound was exact.

    The box starts at "min" (step 1), not at a default value: the step is also set through session
    state (a new lesson, the teacher's step), which Streamlit warns about beside a default.
    A student `following` a class poll gets no box they can see (the teacher moves the class); it is still drawn,
    hidden, so that their link keeps the step.
    """
    start_step_on(page, following=following)
    known = st.session_state.get(_TOTALS_KEY, {}).get(page)
    # Only while the step is still past the page's last: a Back pressed meanwhile has already brought it in.
    if st.session_state.pop(_CLAMP_KEY, None) == page and known and int(st.session_state.get("step") or 1) > known:
        st.session_state["step"] = 1
    bound = max(known or MOST_STEPS, 1)
    if following:
        with st.container(key="al-follow-step"):
            chosen = st.number_input("Step", 1, bound, "min", key="step", bind="query-params")
        st.html("<style>.st-key-al-follow-step {display: none;}</style>")
        return StepBar(int(chosen or 1), following=True)
    # "of n steps" beside the box, not under it: under it, the centred row put the box about 28 px above
    # Back and Next, and the bar a line taller.
    back, where, count, forward, poll = st.columns([1, 2.2, 0.8, 1, 0.8], vertical_alignment="center")
    with where:
        chosen = st.number_input("Step", 1, bound, "min", key="step", bind="query-params", label_visibility="collapsed")
    return StepBar(int(chosen or 1), following=False, back=back, count=count, forward=forward, poll=poll)


def step_bar(bar: StepBar, total: int, page: str, *, link: LinkReading | None = None) -> None:
    """The rest of the bar once the page has counted its `total` steps: Back / of n steps / Next (or, following a
    poll, "Step k of n"), the one step shown, and a note for a step the `link` asked for that this page lacks
    (`step_link_note`)."""
    known = st.session_state.setdefault(_TOTALS_KEY, {})
    first_time, known[page] = page not in known, total
    step_link_note(link, total, page)
    if bar.chosen > total:  # the box's bound was a guess: step 1, as a box bound to this page would have done
        st.session_state[_CLAMP_KEY] = page
        if first_time:
            st.rerun()
    current = min(bar.chosen, total)
    if bar.following:
        st.caption(f"Step {current} of {total}, as the teacher shows it.")
        st.html(presentation_style(current))
        return
    assert bar.back is not None and bar.count is not None and bar.forward is not None  # drawn by step_box
    bar.count.caption(f"of {total} step{'s' if total != 1 else ''}")
    bar.back.button("← Back", on_click=_move_step, args=(-1, total), disabled=current <= 1, width="stretch")
    bar.forward.button("Next →", on_click=_move_step, args=(1, total), disabled=current >= total, width="stretch")
    st.html(presentation_style(current))
