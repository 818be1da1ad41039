"""The one way a chart reaches the page: `draw`, plus the heatmap helpers the lessons share.

Every chart builder in core (no streamlit there) returns a `VegaChart`: a cached Vega-Lite
template and the data that fill it. `draw` turns it into one st.vega_lite_chart call: Streamlit's
theme (light or dark, as the viewer's), the column's full width, a text description for screen
readers, every dataset as an Arrow table (which Streamlit sends as it is), and under it a small
"Save for slides" menu: Save SVG / Save PNG under a file name that holds the page, the chart's title and
the link's settings, the file made on the server only when clicked (`save_for_slides`).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

import streamlit as st

from core.charts import export
from core.charts import heads as charts_heads
from core.charts import heatmap as heatmaps
from core.charts import real_model as charts_rm
from core.charts.heatmap import QUERY_SELECTION
from core.charts.spec import VegaChart, chart_title, download_name, has_colour_ramp
from ui.frame import current_slug
from ui.presentation import on_screen, presenting

_NOT_SETTINGS = frozenset({"room", "step", "present"})  # in the link, but not what a chart shows


def _link_settings() -> dict[str, str]:
    """The settings in the address bar (what the chart shows), for a saved chart's file name."""
    return {key: st.query_params[key] for key in st.query_params if key not in _NOT_SETTINGS}


def _address() -> str:
    """The link's parameters as the browser's address bar holds them (the presentation step is written before the
    page draws: ui.presentation.step_box), as one string."""
    return "&".join(f"{key}={value}" for key in sorted(st.query_params) for value in st.query_params.get_all(key))


def draw(
    chart: VegaChart,
    description: str,
    *,
    key: str | None = None,
    on_select: Callable[[], None] | None = None,
    width: Literal["stretch", "content"] = "stretch",
) -> object:
    """Draw `chart` the house way; `on_select` (with its widget `key`) makes its selections clickable.

    `width`: "stretch" fills the column; "content" keeps the chart's own width (a map of fixed squares).
    """
    spec = chart.spec()  # a fresh dict: the cached template and data are never changed
    name = download_name(current_slug(), chart_title(spec), _link_settings())
    if has_colour_ramp(spec) and on_screen():
        # The ramp's SVG fill names the address it was drawn at (spec.has_colour_ramp); a chart that is the same
        # after a step or a setting moved the address kept an unpainted legend (lesson 5's heads on a projector,
        # an independent review). Carrying the address makes such a chart new, so the browser draws it again.
        # Only on the step shown: a hidden step's charts are drawn again when their step comes (lesson 10 holds
        # some 40,000 SVG cells; redrawing them all on every Next cost the projector's browser for nothing).
        spec["usermeta"] = {**spec.get("usermeta", {}), "address": _address()}
    if on_select is None:
        drawn: object = st.vega_lite_chart(spec=spec, theme="streamlit", width=width, alt=description)
    else:
        drawn = st.vega_lite_chart(
            spec=spec, theme="streamlit", width=width, alt=description, key=key, on_select=on_select
        )
    save_for_slides(chart, name, key=_save_key(name, description, key))
    return drawn


# One conversion at a time in this server process: the first starts vl-convert's JavaScript runtime (~6 s),
# each later one takes a fraction of a second of a CPU; a class clicking at once queues here instead of
# running forty side by side. Streamlit runs each click's callable on its own thread (asyncio.to_thread).
_CONVERTING = threading.Lock()
CONVERT_WAIT_S = 120  # past this the click fails (Streamlit shows "Failed to generate file") rather than hang


def _converted(convert: Callable[[dict], bytes], chart: VegaChart) -> bytes:
    """`convert(chart.spec())` once the process's one conversion slot is free."""
    if not _CONVERTING.acquire(timeout=CONVERT_WAIT_S):
        raise TimeoutError(f"the server was busy saving charts for {CONVERT_WAIT_S} s")
    try:
        # chart.spec() again, not the drawn dict: st.vega_lite_chart takes the datasets out of that one. It is
        # the same spec (a VegaChart is frozen), built only on a click, so a page's run does no more work.
        return convert(chart.spec())
    finally:
        _CONVERTING.release()


def _save_key(name: str, description: str, key: str | None) -> str:
    """A widget key for a chart's save menu, the same on every rerun and different for each chart on a page
    (its page, title, settings, description and own key); a short hash, since a setting can be a sentence."""
    digest = hashlib.sha1(f"{key}\0{name}\0{description}".encode(), usedforsecurity=False).hexdigest()[:12]
    return f"al-save-{digest}"


def save_for_slides(chart: VegaChart, name: str, *, key: str) -> None:
    """A compact "Save for slides" menu under a chart: Save SVG and Save PNG, files named `name` + suffix.

    The file is made only when its button is clicked (a callable as `data`): a page's message carries two
    small buttons per chart, never an image, however many charts it draws. `on_click="ignore"`: a click
    downloads without rerunning the page.
    """
    with st.popover("Save for slides", icon=":material/download:", type="tertiary", key=f"{key}-menu"):
        st.download_button(
            "Save SVG",
            data=lambda: _converted(export.to_svg, chart),
            file_name=f"{name}.svg",
            mime="image/svg+xml",
            key=f"{key}-svg",
            on_click="ignore",
            help="Sharp at any size: for slides and print",
        )
        st.download_button(
            "Save PNG",
            data=lambda: _converted(export.to_png, chart),
            file_name=f"{name}.png",
            mime="image/png",
            key=f"{key}-png",
            on_click="ignore",
            help="A picture at twice the pixels; a chart that fills the page's width is saved slide-wide",
        )


def heatmap(frame, title: str, description: str, *, key: str | None = None, on_select=None, **options) -> object:
    """Draw `core.charts.heatmap.heatmap(frame, title, **options)`: the one heatmap path.

    Options (see core.charts.heatmap.heatmap): signed, value_title, show_values, select_rows,
    highlight_row (the query's row, outlined), x_title, y_title, domain (e.g.
    core.charts.colours.shared_domain(a, b) to put two heatmaps on one colour scale), min_magnitude.
    """
    return draw(heatmaps.heatmap(frame, title, **options), description, key=key, on_select=on_select)


def select_query_from_chart(chart_key: str, target: str) -> None:
    """on_select callback: a click on a heatmap row makes that row the query.

    Runs before the page (outside its error handler), so a selection the chart could not have
    sent (forged: a missing field, a row that is not a number) is ignored, not raised.
    """
    row = _picked(chart_key, QUERY_SELECTION, "row_index")
    if row is not None:
        st.session_state[target] = row["row_index"]


def select_head_from_chart(chart_key: str, selection: str, layer_key: str, head_key: str) -> None:
    """on_select callback: a click on a head's cell or panel makes it the chosen (layer, head)."""
    picked = _picked(chart_key, selection, "layer", "head")
    if picked is not None:
        st.session_state[layer_key], st.session_state[head_key] = picked["layer"], picked["head"]


def _picked(chart_key: str, selection: str, *fields: str) -> dict[str, int] | None:
    """The first point of a chart's selection as whole numbers, or None if it has no such point."""
    try:
        point = st.session_state[chart_key]["selection"][selection][0]
        return {name: int(point[name]) for name in fields}
    except (KeyError, IndexError, TypeError, ValueError, OverflowError):
        return None


def query_weights_heatmap(
    frame,
    title: str,
    description: str,
    *,
    chart_key: str,
    picker_key: str,
    highlight_row: int,
    value_title: str = "weight",
    domain: tuple[float, float] | None = None,
    causal: bool = False,
) -> object:
    """The attention weights, whose rows a click makes the query of the picker `picker_key`.

    The outlined row is the picker's current query (`highlight_row`), not the last clicked one.
    `domain` stretches the colours to a range (say so in `value_title`: the legend is the only place that can).
    """
    return heatmap(
        frame,
        title,
        description,
        value_title=value_title,
        domain=domain,
        select_rows=True,
        highlight_row=highlight_row,
        causal=causal,
        key=chart_key,
        on_select=lambda: select_query_from_chart(chart_key, picker_key),
    )


def head_panels(
    frame,
    title: str,
    description: str,
    *,
    key: str,
    causal: bool = False,
    columns: int | None = None,
    projector_group: int = 0,
) -> None:
    """One layer's heads as small multiples on one colour scale (core.charts.heads); on a screen narrower
    than the panels, the chart shrinks to its column instead of clipping its labels. `projector_group`: see
    `layer_head_panels`."""
    with shrinks_to_column(f"panels-{key}"):
        chart = charts_heads.head_panels(frame, title, causal=causal, columns=columns, projector_group=projector_group)
        draw(chart, description)


def layer_head_panels(
    frame, num_heads: int, group: int, title: str, description: str, *, key: str, causal: bool
) -> None:
    """A real model's layer of heads, `group` query heads sharing each key/value head (1: none shared).

    On a laptop, one row per key/value head (rows of four when none is shared). On a projector (presentation
    mode), a layout sized for its short screen, the legend on the right: two rows of heads, or a decoder's
    key/value groups side by side in one row with a gap between groups. Review s23 measured a decoder's three
    rows at 266-1180 px on a 720 px screen, below the fold; every head in one row instead made twelve maps
    266 px tall with 7 px labels and hid the decoder's groups (review s27b).
    """
    if group > 1:
        title += f": {num_heads // group} key/value heads, each shared by {group} query heads side by side"
    if presenting():
        columns = num_heads if group > 1 else -(-num_heads // 2)  # a row of groups, or two rows (12 heads: 6 + 6)
        head_panels(frame, title, description, key=key, causal=causal, columns=columns, projector_group=group)
    else:
        head_panels(frame, title, description, key=key, causal=causal, columns=group if group > 1 else None)


# On a projector a grid of every head is at most this share of the screen's height, keeping its shape: review s23
# measured lesson 6's 72 heads at 382-957 px on a 720 px screen (its labels stay legible at the ~0.7 scale).
PROJECTOR_GRID_VH = 56
PROJECTOR_CHARTS_VH = 44  # a row of charts under a step's heading and a paragraph (lessons 1 and 9)


@contextmanager
def shrinks_to_column(key: str, *, projector_vh: int | None = None) -> Iterator[None]:
    """A chart of fixed-size panels drawn inside shrinks to its column where the column is narrower (a phone),
    instead of clipping its labels or scrolling sideways; with `projector_vh`, in presentation mode it also
    shrinks, keeping its shape, to that share of the screen's height."""
    container = f"al-{key}"
    charts = f".st-key-{container} svg, .st-key-{container} canvas"
    rules = f"{charts} {{max-width: 100%; height: auto;}}"
    if projector_vh is not None and presenting():
        # Vega writes each chart's size inline: !important lets the height cap keep the chart's shape.
        rules += f" {charts} {{max-height: {projector_vh}vh; width: auto !important; height: auto !important;}}"
    st.html(f"<style>{rules}</style>")
    with st.container(key=container):
        yield


NARROW_PX = 640  # Streamlit stacks st.columns at this width and below: a phone held upright


@contextmanager
def narrow_screens_only(key: str) -> Iterator[None]:
    """What is drawn inside shows on a screen NARROW_PX wide or less (a phone) and nowhere else.

    The server does not know the screen's width, so the browser decides (a CSS media query on the
    container): a wide screen keeps its view as it was, a phone gets what its small screen needs.
    """
    container = f"al-narrow-{key}"
    st.html(f"<style>@media (min-width: {NARROW_PX + 1}px) {{.st-key-{container} {{display: none;}}}}</style>")
    with st.container(key=container):
        yield


@contextmanager
def scrolls_on_narrow_screens(key: str, min_width_px: int) -> Iterator[None]:
    """What is drawn inside keeps at least `min_width_px` on a phone and scrolls sideways, instead of shrinking
    to the column until its text is unreadable (the overview's block diagram); wider screens are unchanged."""
    container = f"al-wide-{key}"
    st.html(
        f"<style>@media (max-width: {NARROW_PX}px) {{.st-key-{container} {{overflow-x: auto;}} "
        f".st-key-{container} svg {{min-width: {min_width_px}px;}}}}</style>"
    )
    with st.container(key=container):
        yield


def head_grid(
    chart: VegaChart,
    description: str,
    *,
    key: str,
    layer_key: str,
    head_key: str,
    width: Literal["stretch", "content"] = "stretch",
    projector_vh: int | None = None,
) -> None:
    """A real model's every head in one clickable chart (core.charts.real_model.grid, or lesson 10's overview of
    blocks), a click opening one in the layer and head boxes. Wider than a phone, the chart shrinks to its
    column instead of scrolling sideways. `width`: as in `draw` ("content" keeps a map's squares square);
    `projector_vh`: as in `shrinks_to_column`."""
    with shrinks_to_column(f"grid-{key}", projector_vh=projector_vh):
        draw(
            chart,
            description,
            key=key,
            on_select=lambda: select_head_from_chart(key, charts_rm.HEAD_SELECTION, layer_key, head_key),
            width=width,
        )
