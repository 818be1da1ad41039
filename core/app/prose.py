"""Lesson prose: each page's markdown file, split into its `## name` sections.

A file starts with its first `## name` line; every section has a name and a body.
Pure Python, so the tests can list every section a page must render.
"""

from __future__ import annotations

import re
from pathlib import Path

TEXT_DIR = Path(__file__).resolve().parents[2] / "pages" / "text"
_HEADING = re.compile(r"^## +(\S.*?)\s*$", re.MULTILINE)


def sections(text: str) -> dict[str, str]:
    """{section name: body} in file order; the body is stripped of surrounding blank lines.

    The first section starts at the top of the file: splitting on "\\n## " used to miss it,
    and with it every lesson's opening text.
    """
    headings = list(_HEADING.finditer(text))
    if not headings or text[: headings[0].start()].strip():
        raise ValueError("a prose file must start with a '## name' heading")
    result: dict[str, str] = {}
    for heading, following in zip(headings, [*headings[1:], None], strict=True):
        end = following.start() if following else len(text)
        name = heading.group(1)
        if name in result:
            raise ValueError(f"section {name!r} appears twice")
        result[name] = text[heading.end() : end].strip("\n")
    return result


def read_sections(name: str) -> dict[str, str]:
    """The sections of pages/text/<name>.md."""
    return sections((TEXT_DIR / f"{name}.md").read_text(encoding="utf-8"))


def section(name: str, part: str) -> str:
    """One section's body; a KeyError (never an empty string) for a name the file lacks."""
    parts = read_sections(name)
    if part not in parts:
        raise KeyError(f"pages/text/{name}.md has no section {part!r} (it has {', '.join(parts)})")
    return parts[part]
