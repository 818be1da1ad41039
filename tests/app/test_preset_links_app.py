"""A preset link alone opens the source's settings, through the frame (AppTest); so does every link the README
gives. The rule alone is tests/unit/test_preset_links.py."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl

import pytest
from streamlit.testing.v1 import AppTest

from tests.support import ROOT, app


def open_link(query: str) -> AppTest:
    """The frame opened on a link such as "?preset=article&seed=7" (a repeated parameter: its last value)."""
    return app(None, **dict(parse_qsl(query.lstrip("?"))))


def test_preset_link_alone_opens_the_articles_settings() -> None:
    at = open_link("?preset=article")
    assert not at.exception, [e.value for e in at.exception]
    assert at.sidebar.slider(key="d_out").value == 24
    assert at.sidebar.slider(key="d_in").value == 16
    assert at.sidebar.slider(key="num_heads").value == 3
    assert not at.sidebar.warning


def readme_links() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return sorted(set(re.findall(r"`(\?[^`\s]+)`", text)))


def test_the_readme_has_example_links() -> None:
    assert "?preset=article&seed=7&num_heads=4" in readme_links()


@pytest.mark.parametrize("link", readme_links())
def test_every_readme_link_opens_without_an_error(link: str) -> None:
    at = open_link(link)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    pairs = parse_qsl(link.lstrip("?"))
    repeated = {key for key, _ in pairs if sum(k == key for k, _ in pairs) > 1}  # ignored by the link rule
    for key, value in pairs:
        if key in {"seed", "num_heads", "d_out"} and key not in repeated:
            widget = at.sidebar.number_input(key=key) if key == "seed" else at.sidebar.slider(key=key)
            assert widget.value == float(value)  # the link's own value, kept
