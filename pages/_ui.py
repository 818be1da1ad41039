"""Helpers the pages share: cached lesson calls, prose loading, charts with click-to-select.

Nothing here computes attention: it calls `core.lessons` through `st.cache_data`
(keyed on the frozen `Settings`, so sessions never share a mutable object).
"""

from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, TypeVar

import altair as alt
import pandas as pd
import pyarrow as pa
import streamlit as st
from streamlit.runtime.app_session import AppSession
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.state.common import user_key_from_element_id
from streamlit.runtime.state.session_state import SessionState

from core import charts, tiny_transformer
from core import prose as core_prose
from core.charts import QUERY_SELECTION
from core.lessons import (
    causal_dropout,
    common,
    cross_attention,
    multi_head,
    overview,
    trainable_weights,
    why_scale,
    without_weights,
)
from core.lessons.common import Prediction
from core.links import LinkReading
from core.markup import code_span, literal
from core.registry import FRAME_CONTROLS, PageSpec
from core.settings import Settings, cache_key

if TYPE_CHECKING:  # the real model's modules are imported only by its page (memory)
    from core.real_model import RealModel
    from core.real_model_lesson import RealModelLesson

# Set by bench/load.py: a file that gets one JSON line per finished script run, so a load test
# can check what the server computed for each session, not only what 40 tabs have painted.
RUN_LOG = os.environ.get("ATTENTION_LAB_RUN_LOG")
LOGGER = logging.getLogger("attention_lab")

# Every cache is bounded by time and by bytes. Streamlit bounds a cache by entries (max_entries)
# and age (ttl), so each max_entries below is a byte budget divided by the largest value that
# cache can hold (pickled, at the largest settings: 24 tokens, d_in = d_out = 64, 8 heads).
# tests/test_cache_budget.py measures those sizes and holds the sum under CACHE_BUDGET_MIB.
CACHE_BUDGET_MIB = 150
TTL_S = 60 * 60  # a lesson: a class's settings are not needed the next hour
T = TypeVar("T")


@dataclass(frozen=True)
class Frame:
    """What streamlit_app.py hands every page for one run: one typed object, not loose keys."""

    page: PageSpec  # this page's row of core.registry
    settings: Settings  # the sidebar's settings, already made usable (a bad sentence -> the book's)
    input_problem: str | None  # why the student's sentence could not be used, in plain words
    link: LinkReading  # what the link asked for, and what of it was ignored


_FRAME_KEY = "frame"
_RERUN_KEY = "frame_reruns"
_STEPS_KEY = "steps_drawn"  # how many steps this run's page has drawn so far


@contextmanager
def hand_over(state: Frame) -> Iterator[None]:
    """The frame runs the page inside this: the page sees `state` through `frame()`, and only then."""
    st.session_state[_FRAME_KEY] = state
    st.session_state[_RERUN_KEY] = 0
    st.session_state[_STEPS_KEY] = 1  # step 1 is the lesson's opening, before its first heading
    try:
        yield
    finally:
        st.session_state.pop(_FRAME_KEY, None)  # a page run alone must never find an old hand-over


def frame() -> Frame:
    """This run's hand-over from the frame. The one workaround for Streamlit's pages/ folder lives here.

    Streamlit sees the pages/ folder when the server starts and, until st.navigation has run
    once in the process, serves a deep link such as /causal_dropout as a legacy page, without
    the frame (PagesManager.uses_pages_directory). Every session whose first run starts in that
    mode lands here without a hand-over: we clear the flag and rerun, and the rerun (with the
    link's query string) goes through the frame. Moving the page scripts into a subfolder of
    pages/ was tried: legacy mode then finds no page for the link and shows a "Page not found"
    dialog on every early deep link, so the scripts stay at the top of pages/.

    A page run alone (a test opening its file directly) gets no hand-over after that rerun
    either, and fails loudly instead of drawing the defaults.
    """
    state = st.session_state.get(_FRAME_KEY)
    if isinstance(state, Frame) and not PagesManager.uses_pages_directory:
        return state
    if st.session_state.get(_RERUN_KEY, 0) >= 1:
        raise RuntimeError("This page runs only inside streamlit_app.py (the frame handed it nothing).")
    st.session_state[_RERUN_KEY] = 1
    PagesManager.uses_pages_directory = False
    st.rerun()


def page_start() -> Frame:
    """Every page's first line: the hand-over, the title, and what of this session's input could
    not be used (the sentence, a link's values for this page's controls, a forged control value)."""
    state = frame()
    with st.container(key="al-title"):  # stays in view on every step of presentation mode
        st.title(state.page.heading)
        if state.input_problem:
            st.error(state.input_problem, icon=":material/error:")
        mine = {*state.page.controls, *FRAME_CONTROLS}
        for note in state.link.page_notes():
            if note.parameter in mine:
                link_warning(note.parameter, note.value, note.reason)
        unreadable_values_note()
    return state


# ------------------------------------------------------------------ steps and presentation mode
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


def predict(prediction: Prediction, key: str) -> None:
    """Predict, then reveal: the answer and why appear only once the student has chosen."""
    with st.container(border=True):
        st.markdown(f"**Predict first.** {literal(prediction.question)}")
        choice = st.radio(
            "Your prediction",
            range(len(prediction.options)),
            index=None,
            format_func=lambda i: literal(prediction.options[i]),  # radio labels are markdown
            key=key,
            label_visibility="collapsed",
        )
        if choice is None:
            st.caption("Choose an answer to see what the numbers say.")
        elif choice == prediction.answer:
            st.success(f"Right. {literal(prediction.explanation)}", icon=":material/check_circle:")
        else:
            right = literal(prediction.options[prediction.answer])
            st.warning(
                f"Not quite: it is “{right}”. {literal(prediction.explanation)}",
                icon=":material/lightbulb:",
            )


@st.cache_resource(show_spinner=False)
def _run_logger(path: str) -> logging.Logger:
    """One logger per process (its handler's lock keeps lines from many sessions whole)."""
    logger = logging.getLogger("attention_lab.runs")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(logging.FileHandler(path, encoding="utf-8"))
    return logger


def log_run(page: str, shown: Settings, seconds: float) -> None:
    """Record a finished run (only when ATTENTION_LAB_RUN_LOG is set; interrupted runs never get here)."""
    if not RUN_LOG:
        return
    ctx = get_script_run_ctx()
    record = {"session": ctx.session_id if ctx else None, "page": page, "seed": shown.seed, "seconds": seconds}
    _run_logger(RUN_LOG).info(json.dumps(record))


@functools.lru_cache(maxsize=256)
def _section(name: str, part: str) -> str:
    """A prose section, read once per process. Not st.cache_data: the keys are the pages' own
    constants (about 90 sections, never user input), the value an immutable str, and
    st.cache_data's hashing and unpickling on every call cost ~2% of a rerun (py-spy)."""
    return core_prose.section(name, part)


def prose(name: str, part: str) -> None:
    """Render one '## part' section of pages/text/<name>.md (a missing one raises)."""
    st.markdown(_section(name, part))


def _draw(spec: dict, description: str, key: str | None = None, on_select=None) -> object:
    """st.vega_lite_chart the house way: Streamlit's theme (light or dark, as the viewer's) with
    axis and legend text in the page's text colour, the column's full width, and a text
    description for screen readers."""
    return _vega(charts.readable(spec), description, key, on_select)


def _vega(spec: dict, description: str, key: str | None, on_select) -> object:
    """The one st.vega_lite_chart call: Streamlit's theme, full width, alt text, optional selection."""
    if on_select is None:
        return st.vega_lite_chart(spec=spec, theme="streamlit", width="stretch", alt=description)
    return st.vega_lite_chart(
        spec=spec, theme="streamlit", width="stretch", alt=description, key=key, on_select=on_select
    )


def chart(chart_obj: alt.Chart, description: str, key: str | None = None, on_select=None) -> object:
    """Draw an Altair chart the house way (see `_draw`).

    The spec is serialised without Altair's jsonschema validation (~40 ms a chart on
    a small container); tests/test_charts.py validates every builder's spec instead.
    """
    return _draw(chart_obj.to_dict(validate=False), description, key, on_select)


def spec_chart(spec: dict, description: str) -> object:
    """Draw a ready Vega-Lite spec (from a core.charts *_spec function) the house way.

    Its named datasets go to Streamlit as Arrow tables: records would be turned into a DataFrame
    and then into Arrow on every rerun (~4 ms a dataset; bench/capacity.py's profile).
    """
    datasets = {
        name: pa.Table.from_pylist(rows) if isinstance(rows, list) else rows
        for name, rows in spec.get("datasets", {}).items()
    }
    if datasets:
        spec = {**spec, "datasets": datasets}  # a new dict: the caller's spec is left as it was
    return _draw(spec, description)


def heatmap(frame, title: str, description: str, *, key: str | None = None, on_select=None, **options) -> object:
    """Draw `core.charts.heatmap_spec(frame, title, **options)`: the one heatmap path.

    Options (see core.charts.heatmap): signed, value_title, show_values, select_rows,
    highlight_row (the query's row, outlined), x_title, y_title, domain (e.g.
    charts.shared_domain(a, b) to put two heatmaps on one colour scale), min_magnitude.
    The values travel as an Arrow table, which Streamlit sends as is.
    """
    return _draw(charts.heatmap_spec(frame, title, **options), description, key, on_select)


def number_table(frame: pd.DataFrame, *, decimals: int = 4, hide_index: bool = False, where=None) -> object:
    """st.dataframe with every float column at the same decimals (never 0.15 beside 0.2264).

    The browser formats the numbers (column_config): a pandas Styler, the other way, renders
    every cell in Python on every rerun, ~12% of the server's CPU under a class's load
    (py-spy, bench/capacity.py). `where` is a column or container to draw in (default: the page).
    """
    formats = {
        str(name): st.column_config.NumberColumn(format=f"%.{decimals}f")
        for name in frame.columns
        if pd.api.types.is_float_dtype(frame[name])
    }
    return (where or st).dataframe(frame, column_config=formats, width="stretch", hide_index=hide_index)


# A widget in the link and kept across page switches: the sidebar's and the pages' own controls.
LINKED = MappingProxyType({"bind": "query-params", "persist_state": "session"})  # read-only: shared


def linked_select(
    label: str,
    options: Sequence[T],
    *,
    key: str,
    param: str,
    code: Callable[[T], str],
    name: Callable[[T], str],
    default: T,
    where=None,
    **widget,
) -> T:
    """A selectbox that shows each option's name and keeps its short code in the link (?param=code).

    Why not bind="query-params": a bound selectbox writes the *shown* name into the link
    (?preset=Life+is+short%2C+eat+dessert+first+...), and a name that holds a token of the
    sentence ("2: journey") stops matching as soon as the sentence changes. So this box keeps
    its link parameter itself, through st.query_params: the session takes the link's code the
    first time it draws the box, and the box's code is written back after every change (the
    default leaves the link, as it does for a bound widget). A code that names no option gets
    one warning and the default. persist_state keeps the choice across page switches.
    """
    by_code = {code(option): option for option in options}
    if key not in st.session_state:  # the first time this session draws the box: the link decides
        given = st.query_params.get_all(param)
        if len(given) == 1 and given[0] in by_code:
            st.session_state[key] = by_code[given[0]]
        elif given:
            link_warning(param, " & ".join(given), f"is not one of {', '.join(by_code)}")
    if st.session_state.get(key) not in options:  # not drawn yet, or a value the options lost
        st.session_state[key] = default
    value = (where or st).selectbox(label, options, format_func=name, key=key, persist_state="session", **widget)
    wanted = None if value == default else code(value)
    if st.query_params.get(param) != wanted:
        if wanted is None:
            del st.query_params[param]
        else:
            st.query_params[param] = wanted
    return value


LINK_OFF = ":material/link_off:"


def link_warning(parameter: str, value: str, reason: str) -> None:
    """The one way a link's ignored value is reported: the value as inert code, and why."""
    st.warning(f"{code_span(parameter + '=' + value)} {reason}; ignored.", icon=LINK_OFF)


def query_picker(tokens: list[str], default: int, key: str) -> int:
    """The query token, also set by a click on a row of the weights heatmap (`select_query_from_chart`).

    In the link as ?query=N, counted from 1 as the box shows it. One widget key per page: two
    pages sharing a key left the second page's picker at its first option after a switch
    between them (the book's query 'journey' became 'Your').

    The browser keeps a selectbox's value as its label ("2: journey") and sends it back on the
    next rerun. After the input changes, that label names no option of the new token list, and
    Streamlit then stores the label string itself as the widget's value (a str, not an index):
    anything that is not an index into these tokens goes back to the lesson's default.
    """
    default = min(default, len(tokens) - 1)
    if key in st.session_state and not is_index(st.session_state[key], len(tokens)):
        st.session_state[key] = default
    return linked_select(
        "Query token",
        list(range(len(tokens))),
        key=key,
        param="query",
        code=lambda i: str(i + 1),
        name=lambda i: f"{i + 1}: {tokens[i]}",
        default=default,
        help="Pick the token whose attention you follow, or click a row in the weights heatmap.",
    )


def is_index(value: object, length: int) -> bool:
    """True for a plain int that indexes a list of `length` items (bool and str are not indexes)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < length


def select_query_from_chart(chart_key: str, target: str) -> None:
    """on_select callback: a click on a heatmap row makes that row the query.

    Runs before the page (outside its error handler), so a selection the chart could not have
    sent (forged: a missing field, a row that is not a number) is ignored, not raised.
    """
    row = _picked(chart_key, QUERY_SELECTION, "row_index")
    if row is not None:
        st.session_state[target] = row["row_index"]


def _picked(chart_key: str, selection: str, *fields: str) -> dict[str, int] | None:
    """The first point of a chart's selection as whole numbers, or None if it has no such point."""
    try:
        point = st.session_state[chart_key]["selection"][selection][0]
        return {name: int(point[name]) for name in fields}
    except (KeyError, IndexError, TypeError, ValueError, OverflowError):
        return None


def query_weights_heatmap(
    frame, title: str, description: str, *, chart_key: str, picker_key: str, highlight_row: int
) -> object:
    """The attention weights, whose rows a click makes the query of the picker `picker_key`.

    The outlined row is the picker's current query (`highlight_row`), not the last clicked one.
    """
    return heatmap(
        frame,
        title,
        description,
        value_title="weight",
        select_rows=True,
        highlight_row=highlight_row,
        key=chart_key,
        on_select=lambda: select_query_from_chart(chart_key, picker_key),
    )


def code_box(
    code: str,
    note: str = "Plain PyTorch; paste it into a notebook and compare with this page.",
    *,
    title: str = "reproduce exactly these numbers",
) -> None:
    """A recipe (core/recipes/), filled with this page's settings, under "Code: <title>".

    A page with several boxes gives each its own title: two closed boxes with one label look
    like the same code twice.
    """
    with st.expander(f"Code: {title}", icon=":material/code:"):
        st.caption(note)
        st.code(code, language="python")


# ------------------------------------------------------------------ cached lessons
# One wrapper per lesson computation, keyed on the frozen Settings (sessions never share a
# mutable object: st.cache_data hands every caller its own copy). Each key keeps only the
# settings its lesson reads (core.settings.cache_key): a control the page ignores, or a sentence
# on a preset that does not use it, creates no new entry.
USES: dict[str, frozenset[str]] = {
    "token_labels": frozenset(),
    "overview_lesson": frozenset(),
    "without_weights_lesson": frozenset({"device"}),
    "trainable_lesson": frozenset({"d_out", "seed", "scale", "device"}),
    "causal_lesson": frozenset({"d_out", "seed", "scale", "dropout", "device"}),
    "multihead_lesson": frozenset({"d_out", "seed", "scale", "dropout", "num_heads", "device"}),
    "cross_lesson": frozenset({"d_out", "seed", "scale", "device"}),
}
# Entries per cache: the byte budget / the largest value it can hold (pickled, at the largest
# settings; tests/test_cache_budget.py measures them and holds the sum under CACHE_BUDGET_MIB).
MAX_ENTRIES = {
    "token_labels": 256,
    "overview_lesson": 64,
    "without_weights_lesson": 64,
    "trainable_lesson": 48,
    "causal_lesson": 96,
    "multihead_lesson": 64,
    "cross_lesson": 64,
    "scaling_variance": 64,
    "scaling_peakiness": 64,
    "scaling_sweep": 8,
}


def token_labels(s: Settings) -> tuple[str, ...]:
    return _token_labels(cache_key(s, USES["token_labels"]))


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES["token_labels"], ttl=TTL_S)
def _token_labels(s: Settings) -> tuple[str, ...]:
    return common.token_labels(s)


def overview_lesson(s: Settings) -> overview.OverviewLesson:
    return _overview_lesson(cache_key(s, USES["overview_lesson"]))


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES["overview_lesson"], ttl=TTL_S)
def _overview_lesson(s: Settings) -> overview.OverviewLesson:
    return overview.overview_lesson(s)


def without_weights_lesson(s: Settings, query_index: int, multiplier: float) -> without_weights.WithoutWeightsLesson:
    return _without_weights_lesson(cache_key(s, USES["without_weights_lesson"]), query_index, multiplier)


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES["without_weights_lesson"], ttl=TTL_S)
def _without_weights_lesson(s: Settings, query_index: int, multiplier: float) -> without_weights.WithoutWeightsLesson:
    return without_weights.without_weights_lesson(s, query_index, multiplier)


def trainable_lesson(s: Settings, query_index: int) -> trainable_weights.TrainableLesson:
    return _trainable_lesson(cache_key(s, USES["trainable_lesson"]), query_index)


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES["trainable_lesson"], ttl=TTL_S)
def _trainable_lesson(s: Settings, query_index: int) -> trainable_weights.TrainableLesson:
    return trainable_weights.trainable_lesson(s, query_index)


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES["scaling_variance"], ttl=TTL_S)
def scaling_variance(seed: int, trials: int) -> why_scale.VarianceResult:
    return why_scale.variance(seed, trials)


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES["scaling_peakiness"], ttl=TTL_S)
def scaling_peakiness(seed: int):
    return why_scale.peakiness(seed)


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES["scaling_sweep"], ttl=TTL_S)
def scaling_sweep(multiplier: float) -> tuple[why_scale.SweepResult, dict, dict]:
    """The seed-independent part of the page, with its two chart specs (built once)."""
    result = why_scale.sweep(multiplier)
    sweep = charts.sweep_chart(result.sweep, multiplier).to_dict(validate=False)
    saturation = charts.saturation_chart(result.saturation).to_dict(validate=False)
    return result, sweep, saturation


def causal_lesson(s: Settings, perturbed: int, training: bool) -> causal_dropout.CausalLesson:
    return _causal_lesson(cache_key(s, USES["causal_lesson"]), perturbed, training)


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES["causal_lesson"], ttl=TTL_S)
def _causal_lesson(s: Settings, perturbed: int, training: bool) -> causal_dropout.CausalLesson:
    return causal_dropout.causal_lesson(s, perturbed, training)


def multihead_lesson(s: Settings) -> multi_head.MultiHeadLesson:
    return _multihead_lesson(cache_key(s, USES["multihead_lesson"]))


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES["multihead_lesson"], ttl=TTL_S)
def _multihead_lesson(s: Settings) -> multi_head.MultiHeadLesson:
    return multi_head.multihead_lesson(s)


def cross_lesson(
    s: Settings, second_text: str, d_v: int, first_text: str | None = None, d_in_kv: int | None = None
) -> cross_attention.CrossLesson:
    if s.preset == "article":  # the article's own set-up: torch.rand(8, 16), whatever the boxes say
        second_text, first_text, d_in_kv = cross_attention.DEFAULT_SECOND_TEXT, None, None
    return _cross_lesson(cache_key(s, USES["cross_lesson"]), second_text, d_v, first_text, d_in_kv)


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES["cross_lesson"], ttl=TTL_S)
def _cross_lesson(
    s: Settings, second_text: str, d_v: int, first_text: str | None, d_in_kv: int | None
) -> cross_attention.CrossLesson:
    return cross_attention.cross_lesson(s, second_text, d_v, first_text, d_in_kv)


# The real model ("Inside a real model"): imported here lazily, so the other pages never load it.
REAL_MODEL_TTL_S = 3600


@st.cache_resource(show_spinner="Loading all-MiniLM-L6-v2 (once per server)…")
def real_model() -> RealModel:
    """The pretrained encoder, checked and loaded once per process; shared, never mutated."""
    from core import real_model as core_real_model

    return core_real_model.load_model()


@st.cache_data(show_spinner=False, max_entries=32, ttl=REAL_MODEL_TTL_S)
def real_model_lesson(sentence: str) -> RealModelLesson:
    """One sentence's lesson (~1.2 MB at the 64-piece cap: 32 entries stay under 40 MB)."""
    from core.real_model_lesson import real_model_lesson as compute

    return compute(real_model(), sentence)


def template_chart(template: str, datasets: dict, description: str, key: str | None = None, on_select=None):
    """Draw a cached chart template (a JSON string, never mutated) with this rerun's named datasets.

    The data go to the browser as Arrow tables, which Streamlit sends as they are.
    """
    spec = json.loads(template)
    spec["datasets"] = {name: pa.Table.from_pandas(frame, preserve_index=False) for name, frame in datasets.items()}
    return _vega(spec, description, key, on_select)


def grouped_bars(frame: pd.DataFrame, x: str, value: str, group: str, title: str, description: str) -> object:
    """`charts.grouped_bars` drawn from its cached template (built once per look, not per rerun)."""
    template = charts.grouped_bars_template(tuple(dict.fromkeys(frame[x])), x, value, group, title)
    return template_chart(template, {charts.BARS_DATA: frame}, description)


def leakage_bars(frame: pd.DataFrame, position: int, description: str) -> object:
    """`charts.leakage_chart` drawn from its cached template."""
    return template_chart(
        charts.leakage_template(tuple(frame["token"]), position), {charts.BARS_DATA: frame}, description
    )


def select_head_from_chart(chart_key: str, selection: str, layer_key: str, head_key: str) -> None:
    """on_select callback: a click on a head's cell or panel makes it the chosen (layer, head)."""
    picked = _picked(chart_key, selection, "layer", "head")
    if picked is not None:
        st.session_state[layer_key], st.session_state[head_key] = picked["layer"], picked["head"]


# ------------------------------------------------------------------ one client must not reset everyone
def keep_shared_caches() -> None:
    """Make a client's "clear cache" message clear only that client's own session state.

    Any websocket client can send Streamlit's clear_cache BackMsg (the browser's menu item is
    hidden by client.toolbarMode = "viewer", the message is not), and Streamlit then empties
    st.cache_data and st.cache_resource for every session in the process: one student, or a
    script, resets the whole class's caches. No configuration option turns it off (Streamlit
    1.67), so the handler is replaced, once per process. bench/hostile_probe.py measures it on
    a real server; tests/test_public_link.py checks the patch is in place.
    """
    if getattr(AppSession._handle_clear_cache_request, "_attention_lab", False):
        return

    def clear_own_session_state_only(session: AppSession) -> None:
        LOGGER.warning("A client asked to clear every cache; only its own session state was cleared.")
        session._session_state.clear()

    clear_own_session_state_only._attention_lab = True  # type: ignore[attr-defined]
    AppSession._handle_clear_cache_request = clear_own_session_state_only  # type: ignore[method-assign]


_UNREADABLE_KEY = "al_unreadable_controls"  # keys of controls whose forged value was dropped this run


def drop_unreadable_widget_values() -> None:
    """Make a control value that Streamlit cannot read a note on the page, not its raw error box.

    A browser sends each widget's value, and Streamlit reads (deserialises) every changed value
    before the script runs, outside any error handler of ours: a forged message, such as an
    integer box holding inf or NaN (int() raises) or a chart selection that is not JSON, stops
    the run with Streamlit's error box. The check runs just before Streamlit's callbacks, once
    per process: a value that cannot be read is dropped (the control keeps its previous value)
    and its key is kept for `unreadable_values_note`. tests/test_forged_messages.py sends them.
    """
    original = SessionState._call_callbacks
    if getattr(original, "_attention_lab", False):
        return

    def call_callbacks_on_readable_values(self: SessionState, **kwargs) -> None:
        dropped = []
        for widget_id in list(self._new_widget_state):
            try:
                self._new_widget_state[widget_id]  # reading deserialises it
            except Exception:  # whatever a widget's deserializer raises on a value it never sends
                del self._new_widget_state[widget_id]
                dropped.append(user_key_from_element_id(widget_id) or "a control")
        if dropped:
            LOGGER.warning("Dropped unreadable values of %s.", dropped)
            self._new_session_state[_UNREADABLE_KEY] = tuple(dropped)
        original(self, **kwargs)

    call_callbacks_on_readable_values._attention_lab = True  # type: ignore[attr-defined]
    SessionState._call_callbacks = call_callbacks_on_readable_values  # type: ignore[method-assign]


def unreadable_values_note() -> None:
    """The note for values `drop_unreadable_widget_values` dropped before this run (then forgotten)."""
    dropped = st.session_state.pop(_UNREADABLE_KEY, ())
    if dropped:
        names = ", ".join(code_span(str(name), 40) for name in dropped[:5])
        st.warning(f"A control sent a value the app cannot read ({names}); it keeps its previous value.", icon=LINK_OFF)


# One training per setting for the whole class: sessions asking for a run that is being computed
# wait for it (Streamlit holds a lock per key) instead of training it again. A run is ~50 kB;
# entries expire after an hour so the cache cannot grow for the life of the server.
@st.cache_data(show_spinner="Training (another student may have started this exact run)…", max_entries=64, ttl=3600)
def training_run(config: tiny_transformer.TrainingConfig) -> tiny_transformer.TrainingRun:
    """Train on the calling session's thread, with a progress bar (replayed, finished, on a cache hit)."""
    bar = st.progress(0.0, text=f"Training: 0 of {config.steps:,} steps")

    def report(done: int, total: int) -> None:
        bar.progress(done / total, text=f"Training: {done:,} of {total:,} steps")

    # Same priority as every session: a lowered one could hold the GIL while descheduled.
    run = tiny_transformer.train(config, on_progress=report)
    bar.empty()
    return run
