"""Every lock line is a sentence: "X appear(s) once you have answered the question above."

`widgets.answer_first(what_appears)` appends "once you have answered …" to its clause. Three clauses had
no verb ("The trained weights, and how well they align the words, once you have answered …") and one had
the wrong number ("The shape of every tensor … appear"); the third teacher review read them on screen.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*ROOT.glob("pages/*.py"), *ROOT.glob("ui/*.py")])


def clauses(node: ast.expr) -> list[str]:
    """The literal clause(s) an argument can be: both arms of `a if c else b`; an f-string's closing text."""
    if isinstance(node, ast.IfExp):
        return clauses(node.body) + clauses(node.orelse)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr) and isinstance(last := node.values[-1], ast.Constant):
        return [str(last.value)]
    raise AssertionError(f"a lock line's clause this test cannot read: {ast.dump(node)}")


def lock_clauses() -> list[tuple[str, str]]:
    found = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "answer_first" and node.args:
                found += [(path.name, clause) for clause in clauses(node.args[0])]
    return found


def test_the_pages_have_lock_lines() -> None:
    assert len(lock_clauses()) >= 20


@pytest.mark.parametrize(("source", "clause"), lock_clauses())
def test_each_lock_line_says_what_appears(source: str, clause: str) -> None:
    verbs = {"appear", "appears"} & set(clause.replace(",", " ").split())
    assert verbs, f"{source}: {clause!r} has no verb before 'once you have answered'"


def test_the_tensor_shapes_line_agrees_with_its_subject() -> None:
    assert ("7_cross_attention.py", "The shape of every tensor, the weights' included, appears") in lock_clauses()
