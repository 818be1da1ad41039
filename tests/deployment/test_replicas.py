"""Two replicas behind HAProxy (cookie affinity), a few simulated students, one replica killed mid-run.

Checked from both sides: the students' websocket sessions and cookies (loadtest/load_client.py) and
each replica's own run log (ATTENTION_LAB_RUN_LOG: which sessions it ran, with which seed).
Timings are reported, never asserted.
"""

from __future__ import annotations

import shutil

import pytest

pytestmark = pytest.mark.skipif(shutil.which("haproxy") is None, reason="Debian's haproxy is not installed")


def test_sessions_stay_on_their_replica_and_only_the_killed_ones_move() -> None:
    from loadtest import replicas

    run = replicas.run(replicas=2, students=6, seconds=25.0, kill_after_s=10.0)
    summary = run.summary()
    print(f"\nreplicas: {summary}")
    assert run.result.mismatches == (), summary  # every run showed the student's own seed and page
    assert run.foreign_seeds == (), summary  # no replica ran a session with another student's seed
    assert run.sessions_on_two_replicas == (), summary  # a session lives in one process
    assert run.cookie_disagrees == (), summary  # ... the one its affinity cookie names
    assert run.students_per_replica["r0"] >= 1 and run.students_per_replica["r1"] >= 1, summary  # spread
    assert run.killed_students, summary  # r0 had students when it was killed
    # Only the killed replica's students lost their connection, and each carried on elsewhere
    # with the settings from its link (their later runs were checked like every other).
    assert set(run.lost_students) == set(run.killed_students), summary
    assert run.recovered_students == run.killed_students, summary
    assert all("ConnectionLost" in e or "Error" in e for e in run.result.errors), run.result.errors
    assert not any("no script_finished" in e for e in run.result.errors), run.result.errors
