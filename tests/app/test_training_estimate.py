"""The training lab's time estimate (core/lessons/training_lab.estimate_sentence): said at the server's pace.

Fast: no run is trained; the queue's learned pace is set by hand.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from core.lessons import training_lab as tt
from tests.support import open_page


# A teacher's review on a busy server: the page said "about 2 s" and settled after 15-19 s. The estimate is for one
# quiet core; the queue learns the server's pace from its finished runs, and the page says the estimate at it.
@pytest.mark.parametrize(("pace", "said"), [(1.0, "about 4 s"), (1.2, "about 4 s"), (8.0, "about 32 s"), (0.5, "2 s")])
def test_the_estimate_is_said_at_the_servers_measured_pace(pace: float, said: str) -> None:
    config = tt.TrainingConfig(steps=1000)
    config = replace(config, steps=round(1000 * 4.0 / tt.estimated_seconds(config)))  # a run of 4 s on one core
    sentence = tt.estimate_sentence(config, pace)
    assert said in sentence
    assert ("this server now" in sentence) is (pace not in (1.0, 1.2))
    if "this server now" in sentence:
        assert f"{pace:.1f}×" in sentence and "about 4 s on one quiet core" in sentence


def test_the_page_says_the_estimate_at_the_queues_pace(navigation_not_pages_directory: None) -> None:
    from ui import training_queue

    quiet = open_page("training_lab")
    assert any("Estimated time on one core" in c.value for c in quiet.caption)
    training_queue.training_queue().pace = 6.0  # as six finished runs on a busy server would have taught it
    try:
        busy = open_page("training_lab")
        said = next(c.value for c in busy.caption if "Estimated time" in c.value)
        assert "this server now" in said and "6.0×" in said
    finally:
        training_queue.training_queue.clear()
