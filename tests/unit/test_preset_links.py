"""A preset link alone opens the source's settings: the rule (core.app.links.settings_implied_by_link). The frame
opening such links, the README's included, is tests/app/test_preset_links_app.py."""

from __future__ import annotations

import pytest

from core.app.links import settings_implied_by_link

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
