"""The recipe mechanism: settings filled in one whole assignment at a time, then run."""

from __future__ import annotations

from pathlib import Path

import pytest

from core import recipes

DEMO = '''"""A demo recipe."""
import torch

# --- settings (the page fills in its current values) ---
text = "inputs"
inputs = torch.tensor([
    [1.0, 2.0],
])
d_out = 2
# --- end of settings ---

total = float(inputs.sum()) * d_out
'''


@pytest.fixture
def demo(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    (tmp_path / "demo.py").write_text(DEMO, encoding="utf-8")
    monkeypatch.setattr(recipes, "RECIPES_DIR", tmp_path)
    return "demo"


def test_fill_replaces_whole_settings_only(demo: str) -> None:
    # A sentence that names a variable must not rewrite the code (the old str.replace did).
    code = recipes.fill(
        demo, {"text": "inputs = __init__", "inputs": recipes.Code("torch.tensor([[0.5]])"), "d_out": 3}
    )
    assert 'text = "inputs = __init__"' in code
    assert "[1.0, 2.0]" not in code
    assert code.endswith("total = float(inputs.sum()) * d_out\n")
    assert recipes.run(code)["total"] == pytest.approx(1.5)


def test_unknown_setting_is_an_error(demo: str) -> None:
    with pytest.raises(KeyError):
        recipes.fill(demo, {"nope": 1})


def test_settings_are_listed_in_order(demo: str) -> None:
    assert recipes.settings_of(demo) == ["text", "inputs", "d_out"]
