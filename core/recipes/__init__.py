"""Code boxes as real Python files: one recipe per lesson (or per variant).

A recipe is a plain script that a student can paste into a notebook. It opens with a block
of plain settings between two marker lines:

    # --- settings (the page fills in its current values) ---
    seed = 123
    d_out = 2
    # --- end of settings ---

The page shows the file with the current values filled in (`fill`); ruff lints the files as
they are; the tests run the filled text (`run`) and compare its variables with the page's.
"""

from __future__ import annotations

import json
import re
import runpy
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RECIPES_DIR = Path(__file__).resolve().parent
START = "# --- settings (the page fills in its current values) ---"
END = "# --- end of settings ---"
_ASSIGNMENT = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*=\s*(?P<value>.*)$")


@dataclass(frozen=True)
class Code:
    """A value written into a recipe as this exact Python source (a tensor literal, say)."""

    source: str


def source(name: str) -> str:
    """The recipe file core/recipes/<name>.py as it is on disk."""
    return (RECIPES_DIR / f"{name}.py").read_text(encoding="utf-8")


def _as_source(value: Any) -> str:
    if isinstance(value, Code):
        return value.source
    if isinstance(value, float):
        return repr(float(value))
    if isinstance(value, str):  # double quotes, as ruff formats the files; JSON escapes are valid Python
        return json.dumps(value, ensure_ascii=False)
    return repr(value)  # str, int, bool, None, tuples and lists of those


def fill(name: str, values: Mapping[str, Any]) -> str:
    """The recipe with each setting in its block replaced by `values` (every key must exist).

    Only the settings block changes, one whole assignment at a time, so a word in a student's
    sentence can never rewrite the code (the old templates used str.replace on the code).
    A multi-line setting (a tensor literal) ends at the next assignment or the end marker.
    """
    lines = source(name).splitlines()
    try:
        start, end = lines.index(START), lines.index(END)
    except ValueError as error:
        raise ValueError(f"recipe {name!r} lacks its settings markers") from error
    block: list[str] = []
    seen: set[str] = set()
    skipping = False  # inside the continuation lines of a value being replaced
    for line in lines[start + 1 : end]:
        match = _ASSIGNMENT.match(line)
        if match is None:
            # a continuation line (indented, or a closing bracket) belongs to the setting above
            if skipping and (line[:1].isspace() or line[:1] in ")]}"):
                continue
            skipping = False
            block.append(line)
            continue
        key = match.group("name")
        skipping = key in values
        if skipping:
            seen.add(key)
            block.append(f"{key} = {_as_source(values[key])}")
        else:
            block.append(line)
    missing = set(values) - seen
    if missing:
        raise KeyError(f"recipe {name!r} has no setting(s) {sorted(missing)}")
    return "\n".join([*lines[: start + 1], *block, *lines[end:]]) + "\n"


def settings_of(name: str) -> list[str]:
    """The names the recipe's settings block assigns, in order."""
    lines = source(name).splitlines()
    start, end = lines.index(START), lines.index(END)
    return [m.group("name") for line in lines[start + 1 : end] if (m := _ASSIGNMENT.match(line))]


def run(code: str) -> dict[str, Any]:
    """Run a filled recipe as a script in a fresh namespace; its global variables."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False, encoding="utf-8") as handle:
        handle.write(code)
    try:
        return runpy.run_path(handle.name, run_name="__main__")
    finally:
        Path(handle.name).unlink()
