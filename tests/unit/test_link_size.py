"""The bound on a link's total size (issue 31): a link longer than any the app writes is ignored whole."""

from __future__ import annotations

from core.app.links import MAX_LINK_CHARS, link_chars, read_link
from core.app.settings import Settings


def test_a_link_within_the_bound_is_read_as_usual() -> None:
    reading = read_link({"seed": "7", "text": "a" * 400, "preset": "custom"}, ["cpu"])
    assert reading.settings.seed == 7 and not reading.too_long_chars


def test_a_link_over_the_bound_is_ignored_whole() -> None:
    params = {"seed": "7", "text": "a" * MAX_LINK_CHARS}
    reading = read_link(params, ["cpu"])
    assert reading.too_long_chars == link_chars(params) > MAX_LINK_CHARS
    assert reading.settings == Settings() and not reading.notes and not reading.unknown and not reading.controls


def test_repeated_values_and_names_count_towards_the_size() -> None:
    assert link_chars({"ab": ["xyz", "q"]}) == len("ab=xyz&ab=q&")
    assert link_chars({"x" * MAX_LINK_CHARS: ""}) > MAX_LINK_CHARS
