"""The overview page (AppTest): the decoder-block map, a link to every lesson, the lecture path."""

from __future__ import annotations

from core.app import registry
from tests.support import app


def test_the_overview_draws_the_map_links_every_lesson_and_shows_the_plan() -> None:
    at = app()
    assert not at.exception, [e.value for e in at.exception]
    (diagram,) = at.get("graphviz_chart")
    assert "cluster_block" in diagram.proto.spec
    links = {link.proto.page for link in at.get("page_link")}
    assert all(spec.file in " ".join(links) or spec.slug in " ".join(links) for spec in registry.lessons()), links
    # A static table, whose cells wrap: a data grid cut "what to show" off on a laptop (the third review).
    plan = next(table.value for table in at.table if "what to show" in table.value.columns)
    assert len(plan) == len(registry.lessons())
    assert not any("what to show" in df.value.columns for df in at.dataframe)
    # On a phone a line says that the block diagram scrolls sideways.
    assert any("swipe it sideways" in caption.value for caption in at.caption)


def test_the_overview_names_the_gpt_as_lessons_ten_and_eleven_do() -> None:
    # The s25 review: the overview said "SmolLM2-135M" where lessons 10 and 11 say "SmolLM2-135M-Instruct" (the
    # same file, the chat-tuned release).
    import re

    from tests.support import text_of

    at = app()
    text = text_of(at) + " ".join(str(chart.proto.spec) for chart in at.get("arrow_vega_lite_chart"))
    assert "SmolLM2-135M-Instruct" in text
    assert not re.search(r"SmolLM2-135M(?!-Instruct)", text), re.findall(r".{40}SmolLM2-135M(?!-Instruct).{20}", text)
