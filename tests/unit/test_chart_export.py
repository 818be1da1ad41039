"""Every chart can be saved as SVG or PNG under a name that says what it shows (issue 30, defect 12)."""

from __future__ import annotations

from core.charts import common as charts
from core.charts.spec import EXPORT_ACTIONS, chart_title, download_name, with_export


def test_the_file_name_holds_the_page_the_chart_and_the_settings_and_nothing_unsafe() -> None:
    name = download_name("why_scale", "Peakiness vs d_k", {"seed": "7", "multiplier": "16.0"})
    assert name == "attention-lab_why_scale_Peakiness-vs-d_k_multiplier-16.0_seed-7"
    hostile = download_name("real_model", "x", {"real_sentence": "../../etc/passwd <b>" + "a" * 500})
    assert "/" not in hostile and "<" not in hostile and len(hostile) <= 150


def test_a_chart_spec_turns_on_the_export_menu_only() -> None:
    import pandas as pd

    frame = pd.DataFrame({"token": ["a", "b"], "method": ["m", "m"], "weight": [0.4, 0.6]})
    spec = charts.grouped_bars(frame, "token", "weight", "method", "Weights for “a”").spec()
    exported = with_export(spec, download_name("without_weights", chart_title(spec), {"seed": "1"}))
    options = exported["usermeta"]["embedOptions"]
    assert options["actions"] == EXPORT_ACTIONS and options["actions"]["export"] is True
    assert options["downloadFileName"].startswith("attention-lab_without_weights_Weights-for-a")
    assert "usermeta" not in spec  # the chart's own spec is left as it was
