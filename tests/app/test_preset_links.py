"""A preset link alone opens the source's settings: the rule (pure) and the frame (AppTest)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl

import pytest
from streamlit.testing.v1 import AppTest

from core.app.links import settings_implied_by_link
from tests.support import restore_pages_manager, use_navigation_mode

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "streamlit_app.py")
CPU = ["cpu"]


def test_a_preset_alone_implies_all_its_settings() -> None:
    implied = settings_implied_by_link({"preset": "article"}, CPU)
    assert implied == {"d_in": 16, "d_out": 24, "seed": 123.0, "dropout": 0.0, "num_heads": 3, "scale": True}
    assert isinstance(implied["seed"], float)  # the seed box is float-typed


def test_what_the_link_gives_wins() -> None:
    implied = settings_implied_by_link({"preset": "article", "seed": "7", "num_heads": "4"}, CPU)
    assert "seed" not in implied and "num_heads" not in implied
    assert implied["d_out"] == 24 and implied["d_in"] == 16


def test_an_ignored_value_counts_as_not_given() -> None:
    implied = settings_implied_by_link({"preset": "article", "d_out": "banana"}, CPU)
    assert implied["d_out"] == 24


@pytest.mark.parametrize("params", [{}, {"seed": "7"}, {"preset": "custom"}, {"preset": "<b>x</b>"}])
def test_no_source_preset_implies_nothing(params: dict[str, str]) -> None:
    assert settings_implied_by_link(params, CPU) == {}


def test_a_repeated_preset_uses_the_last_value() -> None:
    assert settings_implied_by_link({"preset": ["book", "blog"]}, CPU)["d_out"] == 4


# ------------------------------------------------------------------ through the frame
@pytest.fixture
def navigation_mode() -> Iterator[None]:
    use_navigation_mode()
    yield
    restore_pages_manager()


def open_link(query: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in parse_qsl(query.lstrip("?")):
        at.query_params[key] = value
    at.run()
    return at


def test_preset_link_alone_opens_the_articles_settings(navigation_mode: None) -> None:
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
def test_every_readme_link_opens_without_an_error(link: str, navigation_mode: None) -> None:
    at = open_link(link)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    pairs = parse_qsl(link.lstrip("?"))
    repeated = {key for key, _ in pairs if sum(k == key for k, _ in pairs) > 1}  # ignored by the link rule
    for key, value in pairs:
        if key in {"seed", "num_heads", "d_out"} and key not in repeated:
            widget = at.sidebar.number_input(key=key) if key == "seed" else at.sidebar.slider(key=key)
            assert widget.value == float(value)  # the link's own value, kept
