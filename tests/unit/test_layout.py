"""The layout's rules, checked on the code: no test module imports another, and bench/ is imported by nothing."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def python_files(*folders: str) -> list[Path]:
    return [path for folder in folders for path in sorted((ROOT / folder).rglob("*.py"))]


def test_no_test_module_imports_another_test_module() -> None:
    # Shared helpers live in tests/support.py and fixtures in conftest.py (test modules once imported each other).
    offenders = {
        str(path.relative_to(ROOT)): sorted(m for m in imported_modules(path) if m.split(".")[-1].startswith("test_"))
        for path in python_files("tests")
    }
    assert not {path: names for path, names in offenders.items() if names}


def test_bench_is_imported_by_nothing_and_imports_no_tests() -> None:
    # bench/ (micro-benchmarks) and loadtest/ share testkit/ with the tests; none imports bench or tests.
    for path in python_files("core", "services", "ui", "pages", "tests", "loadtest", "testkit"):
        assert not any(m == "bench" or m.startswith("bench.") for m in imported_modules(path)), path
    for path in python_files("bench", "loadtest", "testkit"):
        assert not any(m == "tests" or m.startswith("tests.") for m in imported_modules(path)), path


def test_core_and_services_never_import_streamlit_or_ui() -> None:
    for path in python_files("core", "services"):
        names = imported_modules(path)
        assert not any(m.split(".")[0] in {"streamlit", "ui", "pages"} for m in names), path


def test_models_never_import_lessons_and_the_attention_library_imports_no_model() -> None:
    for path in python_files("core/models"):
        assert not any(m.startswith("core.lessons") for m in imported_modules(path)), path
    for path in python_files("core/attention"):
        assert not any(m.startswith(("core.models", "core.lessons")) for m in imported_modules(path)), path


def test_the_app_layer_never_imports_lessons() -> None:
    # Lessons build on core/app (its registry, its choices); the app reads a link's choices from core/app/choices.py.
    for path in python_files("core/app"):
        assert not any(m.startswith("core.lessons") for m in imported_modules(path)), path


def test_every_table_says_how_tall_it_is() -> None:
    # Review s23 (D8): Streamlit's default height scrolls inside a table after about ten rows, which hid heads 10
    # and 11 of 12 in lesson 5's pattern table, on a projector and in every screenshot. Each call now passes
    # height= ("content" for a short table, or widgets.table_height's choice).
    calls = [
        (str(path.relative_to(ROOT)), node.lineno, {keyword.arg for keyword in node.keywords})
        for path in python_files("pages", "ui")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "dataframe"
    ]
    assert len(calls) >= 8
    assert [(path, line) for path, line, keywords in calls if "height" not in keywords] == []


def test_a_short_table_shows_every_row_and_a_long_one_scrolls() -> None:
    from ui.widgets import FULL_TABLE_ROWS, table_height

    assert FULL_TABLE_ROWS >= 12  # lesson 5's encoder has 12 heads, one row each
    assert table_height(12) == "content" and table_height(FULL_TABLE_ROWS) == "content"
    assert table_height(FULL_TABLE_ROWS + 1) == "auto"
