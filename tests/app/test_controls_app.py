"""The sidebar the frame draws from the typed control model (core/app/controls.py), through AppTest: every spec
once, with its label, and greyed out with its reason. The model alone is tests/unit/test_controls.py."""

from __future__ import annotations

import pytest

from core.app import registry
from core.app.controls import SIDEBAR, Greyed
from tests.support import app


@pytest.mark.parametrize("slug", ["overview", "multi_head", "causal_dropout"])
def test_the_sidebar_draws_every_spec_once_with_its_label_and_reason(slug: str) -> None:
    spec = registry.page(slug)
    at = app(spec)
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
    at = app(registry.page("trainable_weights"))
    text = at.sidebar.text_input(key="text")
    assert text.disabled and text.help == "Choose 'Your own sentence' above to type one."  # the book's preset
    assert at.sidebar.slider(key="d_in").disabled  # the book's embeddings are 3 wide
    at.sidebar.selectbox(key="preset").set_value("custom").run()
    assert not at.sidebar.text_input(key="text").disabled and not at.sidebar.slider(key="d_in").disabled
