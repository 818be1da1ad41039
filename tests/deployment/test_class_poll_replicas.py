"""The class poll across replicas: two app processes behind HAProxy sharing one redis-server.

A teacher on one replica, six students spread over both (loadtest/class_poll.py drives them over
Streamlit's websocket protocol); then Redis is stopped mid-poll and started again. Timings are
reported (bench/results), never asserted.
"""

from __future__ import annotations

import shutil

import pytest

from tests.support import redis_available

pytestmark = [
    pytest.mark.skipif(shutil.which("haproxy") is None, reason="Debian's haproxy is not installed"),
    pytest.mark.skipif(not redis_available(), reason="Debian's redis-server is not installed"),
]


def test_students_on_both_replicas_are_counted_exactly_and_a_redis_restart_is_survived() -> None:
    from loadtest import class_poll

    run = class_poll.run(students=6, answer_window_s=2.0, restart_redis=True)
    summary = run.summary()
    print(f"\nclass poll across replicas: {summary}")
    assert run.errors == [], run.errors
    assert set(run.replicas_of_students) == {"r0", "r1"}, summary  # the students landed on both replicas
    assert run.teacher_replica in {"r0", "r1"}, summary
    assert run.shown_answers == 6, summary  # the teacher's page: "6 answers"
    assert run.shown_split.endswith(run.expected_split), (run.shown_split, run.expected_split)
    assert run.unavailable_teacher and run.unavailable_student, summary  # Redis stopped: a note, no error
    assert run.recovered_answers == 7, summary  # Redis back: the same room counts a newcomer
