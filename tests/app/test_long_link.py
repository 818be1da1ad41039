"""A link longer than any the app writes opens the defaults with one note (issue 31)."""

from __future__ import annotations

from core.app.links import MAX_LINK_CHARS
from tests.app.test_app import navigation_not_pages_directory  # noqa: F401 - autouse fixture
from tests.app.test_page_links import open_page


def test_a_very_long_link_opens_the_defaults_with_a_note() -> None:
    at = open_page("trainable_weights", seed="7", **{f"unknown{i}": "x" * 600 for i in range(30)})
    assert not at.exception
    notes = [w.value for w in at.sidebar.warning if "characters" in w.value]
    assert notes and f"{MAX_LINK_CHARS:,}" in notes[0], [w.value for w in at.warning]
    assert at.sidebar.number_input(key="seed").value == 123  # the link's seed is ignored with the rest
    assert "seed" not in at.query_params and not any(k.startswith("unknown") for k in at.query_params)
