"""The training queue (services/training_queue.py): order, bound, dedup, replacement, abandonment.

The computations here are fakes that wait on an event, so each test decides when a run ends and
can look at the queue in between; no torch, no streamlit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from services.training_queue import Cancelled, State, TrainingQueue, default_slots

WAIT_S = 10.0  # generous: a shared machine can be slow, and every wait below ends on an event


class Gates:
    """A fake computation per key: it records its start, reports progress, and ends when released."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.cancelled: list[str] = []
        self.running = 0
        self.peak = 0
        self._events: dict[str, threading.Event] = {}
        self.all_open = False  # at the end of a test: every run, started or not, ends at once
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

    def event(self, key: str) -> threading.Event:
        with self._lock:
            event = self._events.setdefault(key, threading.Event())
            if self.all_open:
                event.set()
            return event

    def release(self, key: str) -> None:
        self.event(key).set()

    def compute(self, key: str, on_progress: Callable[[int, int], None]) -> str:
        with self._changed:
            self.started.append(key)
            self.running += 1
            self.peak = max(self.peak, self.running)
            self._changed.notify_all()
        try:
            gate = self.event(key)
            done = 0
            while not gate.wait(0.01):
                on_progress(min(done, 9), 10)  # raises Cancelled when nobody waits any more
                done += 1
            on_progress(10, 10)
            if key.startswith("bad"):
                raise ValueError("this run cannot be trained")
            return f"result of {key}"
        except Cancelled:
            with self._lock:
                self.cancelled.append(key)
            raise
        finally:
            with self._changed:
                self.running -= 1
                self._changed.notify_all()

    def wait_started(self, count: int) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: len(self.started) >= count, WAIT_S), self.started


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.fixture
def gates() -> Gates:
    return Gates()


@pytest.fixture
def make_queue(gates: Gates) -> Iterator[Callable[..., TrainingQueue]]:
    made: list[TrainingQueue] = []

    def make(**options) -> TrainingQueue:
        options.setdefault("slots", 1)
        queue = TrainingQueue(gates.compute, lambda key: 10.0, liveness_every_s=0.01, **options)
        made.append(queue)
        return queue

    yield make
    gates.all_open = True
    for key in list(gates._events):
        gates.release(key)
    for queue in made:
        queue.close()


def test_runs_start_first_come_first_served_one_at_a_time(gates: Gates, make_queue) -> None:
    queue = make_queue()
    for student, key in enumerate("abcd"):
        queue.request(f"s{student}", [key])
        if student == 0:
            gates.wait_started(1)
    assert [queue.status(f"s{i}", k).place for i, k in enumerate("bcd", start=1)] == [1, 2, 3]
    assert queue.status("s0", "a").state == State.RUNNING
    # The estimate grows with the place: each run ahead adds its 10 s.
    waits = [queue.status(f"s{i}", k).wait_s for i, k in enumerate("bcd", start=1)]
    assert waits[0] < waits[1] < waits[2] and waits[2] - waits[1] == pytest.approx(10.0, abs=0.5)
    for count, key in enumerate("abcd", start=1):
        gates.release(key)
        wait_until(lambda count=count: queue.computed == count)
    assert gates.started == list("abcd")
    assert gates.peak == 1 and queue.peak_running == 1
    assert queue.status("s3", "d").result == "result of d"


def test_the_bound_holds_with_two_slots(gates: Gates, make_queue) -> None:
    queue = make_queue(slots=2)
    for student in range(6):
        queue.request(f"s{student}", [f"k{student}"])
    gates.wait_started(2)
    time.sleep(0.1)  # a third start would show now
    assert len(gates.started) == 2 and queue.running() == 2 and queue.queued() == 4
    for student in range(6):
        gates.release(f"k{student}")
    wait_until(lambda: queue.computed == 6)
    assert gates.peak == 2 and queue.peak_running == 2


def test_identical_runs_are_computed_once(gates: Gates, make_queue) -> None:
    queue = make_queue()
    queue.request("first", ["same"])
    gates.wait_started(1)
    queue.request("second", ["same"])  # joins the running run
    assert queue.status("second", "same").state == State.RUNNING
    gates.release("same")
    wait_until(lambda: queue.status("second", "same").state == State.DONE)
    queue.request("third", ["same"])  # finished: served from the results
    assert queue.status("third", "same").result == "result of same"
    assert gates.started == ["same"] and queue.computed == 1


def test_a_queued_duplicate_keeps_the_first_askers_place(gates: Gates, make_queue) -> None:
    queue = make_queue()
    queue.request("s0", ["busy"])
    gates.wait_started(1)
    queue.request("s1", ["x"])
    queue.request("s2", ["y"])
    queue.request("s3", ["x"])  # the same run as s1: one computation, at s1's place
    assert queue.status("s3", "x").place == 1 and queue.status("s2", "y").place == 2
    for key in ("busy", "x", "y"):
        gates.release(key)
    wait_until(lambda: queue.computed == 3)
    assert gates.started == ["busy", "x", "y"]


def test_a_new_press_replaces_the_sessions_queued_run(gates: Gates, make_queue) -> None:
    queue = make_queue()
    queue.request("other", ["busy"])
    gates.wait_started(1)
    queue.request("student", ["old"])
    queue.request("late", ["later"])
    queue.request("student", ["new"])  # replaces "old": it is dropped, "new" queues behind "later"
    assert queue.status("student", "old").state == State.UNKNOWN
    assert queue.pending("student") == ("new",)
    assert queue.status("student", "new").place == 2 and queue.queued() == 2
    for key in ("busy", "later", "new", "old"):
        gates.release(key)
    wait_until(lambda: queue.computed == 3)
    assert gates.started == ["busy", "later", "new"]  # "old" never ran


def test_a_new_press_does_not_stop_a_started_run(gates: Gates, make_queue) -> None:
    queue = make_queue()
    queue.request("student", ["first"])
    gates.wait_started(1)
    queue.request("student", ["second"])
    gates.release("first")
    gates.release("second")
    wait_until(lambda: queue.computed == 2)
    assert gates.cancelled == [] and queue.status("student", "first").result == "result of first"


def test_a_run_another_session_still_wants_stays_queued_after_a_replacement(gates: Gates, make_queue) -> None:
    queue = make_queue()
    queue.request("other", ["busy"])
    gates.wait_started(1)
    queue.request("a", ["shared"])
    queue.request("b", ["shared"])
    queue.request("a", ["mine"])  # a leaves "shared"; b still waits for it
    assert queue.status("b", "shared").place == 1 and queue.status("a", "mine").place == 2


def test_a_closed_tab_leaves_the_queue(gates: Gates, make_queue) -> None:
    alive = {"s0", "s1", "s2"}
    queue = make_queue(is_alive=lambda session: session in alive)
    queue.request("s0", ["a"])
    gates.wait_started(1)
    queue.request("s1", ["b"])
    queue.request("s2", ["c"])
    alive.discard("s1")  # s1 closes its tab while queued
    gates.release("a")
    gates.release("c")
    wait_until(lambda: queue.computed == 2)
    assert gates.started == ["a", "c"]  # "b" was never computed
    assert queue.status("s1", "b").state == State.UNKNOWN


def test_a_running_run_nobody_waits_for_is_stopped(gates: Gates, make_queue) -> None:
    alive = {"s0", "s1"}
    queue = make_queue(is_alive=lambda session: session in alive)
    queue.request("s0", ["a"])
    queue.request("s1", ["b"])
    gates.wait_started(1)
    alive.discard("s0")  # the tab closes while its run trains: the slot goes to the next student
    gates.wait_started(2)
    assert gates.cancelled == ["a"] and gates.started == ["a", "b"]
    gates.release("b")
    wait_until(lambda: queue.computed == 1)
    assert queue.status("s0", "a").state == State.UNKNOWN


def test_leave_drops_queued_runs_and_keeps_shared_ones(gates: Gates, make_queue) -> None:
    queue = make_queue()
    queue.request("s0", ["busy"])
    gates.wait_started(1)
    queue.request("s1", ["alone", "shared"])
    queue.request("s2", ["shared"])
    queue.leave("s1")
    assert queue.queued() == 1 and queue.status("s2", "shared").place == 1


def test_a_failure_reaches_its_waiters_and_the_queue_goes_on(gates: Gates, make_queue) -> None:
    queue = make_queue()
    queue.request("s0", ["bad run"])
    queue.request("s1", ["good"])
    gates.release("bad run")
    gates.release("good")
    wait_until(lambda: queue.status("s1", "good").state == State.DONE)
    failed = queue.status("s0", "bad run")
    assert failed.state == State.FAILED and "cannot be trained" in failed.error


def test_finished_results_are_bounded(gates: Gates, make_queue) -> None:
    queue = make_queue(max_results=2)
    for key in ("a", "b", "c"):
        gates.release(key)
        queue.request("s", [key])
        wait_until(lambda key=key: queue.status("s", key).state == State.DONE)
    assert queue.status("s", "a").state == State.UNKNOWN  # the oldest went
    assert queue.status("s", "c").state == State.DONE


def test_a_request_of_two_runs_queues_both_in_order(gates: Gates, make_queue) -> None:
    queue = make_queue()
    queue.request("s", ["scaled", "unscaled", "scaled"])
    assert queue.pending("s") == ("scaled", "unscaled")
    gates.release("scaled")
    gates.release("unscaled")
    wait_until(lambda: queue.computed == 2)
    assert gates.started == ["scaled", "unscaled"]


def test_default_slots_leave_a_core_and_follow_the_variable(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    no_quota = tmp_path / "cpu.max"
    no_quota.write_text("max 100000\n")
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.delenv("ATTENTION_LAB_TRAINING_SLOTS", raising=False)
    assert default_slots(no_quota) == 1
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0})
    assert default_slots(no_quota) == 1
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(8)))
    assert default_slots(no_quota) == 7
    assert default_slots(tmp_path / "absent") == 7  # no cgroup v2 file: the affinity alone
    quota = tmp_path / "quota"
    quota.write_text("300000 100000\n")  # a container limited to 3 CPUs on the 8-core machine
    assert default_slots(quota) == 2
    monkeypatch.setenv("ATTENTION_LAB_TRAINING_SLOTS", "3")
    assert default_slots(quota) == 3
    with pytest.raises(ValueError):
        TrainingQueue(lambda key, report: key, lambda key: 1.0, slots=0)


def test_a_liveness_check_that_fails_does_not_stop_the_queue(gates: Gates, make_queue) -> None:
    def broken(session: str) -> bool:
        raise RuntimeError("no runtime")

    queue = make_queue(is_alive=broken)
    queue.request("s0", ["a"])
    queue.request("s1", ["b"])
    gates.release("a")
    gates.release("b")
    wait_until(lambda: queue.computed == 2)  # an error counts as alive: both ran


def test_estimates_follow_the_pace_of_the_finished_runs() -> None:
    """A run estimated at 10 s that took 30 s (a busy machine) makes the queue's next waits 3x longer."""
    now = [0.0]
    release = {key: threading.Event() for key in ("first", "busy", "next")}
    started: list[str] = []

    def silent(key: str, on_progress) -> str:  # no progress reports: the estimate is all there is
        started.append(key)
        release[key].wait(WAIT_S)
        return key

    queue = TrainingQueue(silent, lambda key: 10.0, slots=1, clock=lambda: now[0], liveness_every_s=0.01)
    try:
        queue.request("s0", ["first"])
        wait_until(lambda: started == ["first"])
        now[0] = 30.0
        release["first"].set()
        wait_until(lambda: queue.computed == 1)
        assert queue.pace == pytest.approx(3.0)
        queue.request("s0", ["busy"])
        wait_until(lambda: started == ["first", "busy"])
        queue.request("s1", ["next"])
        # "busy" has just started: 10 s x 3 left; then "next" itself: 10 s x 3.
        assert queue.status("s1", "next").wait_s == pytest.approx(60.0)
    finally:
        for event in release.values():
            event.set()
        queue.close()


def test_a_tiny_runs_fixed_costs_do_not_dominate_the_pace() -> None:
    """Runs weigh by their estimates: a 0.1 s run that took 5 s, then a 10 s run that took 20 s."""
    now = [0.0]
    estimates = {"tiny": 0.1, "long": 10.0}
    taken = {"tiny": 5.0, "long": 20.0}

    def compute(key: str, on_progress) -> str:
        now[0] += taken[key]  # the run "takes" its time on the fake clock
        return key

    queue = TrainingQueue(compute, estimates.__getitem__, slots=1, clock=lambda: now[0], liveness_every_s=0.01)
    try:
        for key in ("tiny", "long"):
            queue.request("s", [key])
            wait_until(lambda key=key: queue.status("s", key).state == State.DONE)
        assert queue.pace == pytest.approx((0.7 * 5.0 + 20.0) / (0.7 * 0.1 + 10.0))  # ~2.3, not ~36
    finally:
        queue.close()


# ---------------------------------------------------------------- fairness (issue 31, item 7)
# Ten tabs pressing "Compare" at the widest setting queued 20 runs of ~30 s; an honest default run
# then waited at place 20 ("about 594 s"). Expected cost orders the queue (cheap first, with ageing
# so a costly run still starts), a cheap run may use one express slot, a compare counts as two runs,
# and runs beyond a client's share wait behind everyone else's.
@pytest.fixture
def closing() -> Iterator[list[TrainingQueue]]:
    made: list[TrainingQueue] = []
    yield made
    for queue in made:
        queue.close()


def test_a_cheap_run_starts_before_the_costly_runs_asked_earlier(gates: Gates, closing) -> None:
    queue = TrainingQueue(
        gates.compute, lambda k: 1.0 if k == "cheap" else 30.0, express_max_s=0.0, liveness_every_s=0.01
    )
    closing.append(queue)
    queue.request("first", ["blocker"])
    gates.wait_started(1)
    for tab in range(10):  # ten tabs, each a widest compare
        queue.request(f"tab{tab}", [f"wide{tab}a", f"wide{tab}b"])
    queue.request("honest", ["cheap"])
    status = queue.status("honest", "cheap")
    assert status.place == 1 and status.wait_s < 60, status
    gates.release("blocker")
    gates.wait_started(2)
    assert gates.started[1] == "cheap"
    gates.all_open = True
    for key in list(gates._events):
        gates.release(key)


def test_ageing_lets_a_costly_run_start_in_the_end(gates: Gates, closing) -> None:
    now = [0.0]
    queue = TrainingQueue(
        gates.compute,
        lambda k: 1.0 if k.startswith("cheap") else 30.0,
        express_max_s=0.0,
        liveness_every_s=0.01,
        clock=lambda: now[0],
    )
    closing.append(queue)
    queue.request("first", ["blocker"])
    gates.wait_started(1)
    queue.request("patient", ["wide"])
    queue.request("fresh", ["cheap-1"])
    assert queue.status("patient", "wide").place == 2  # a fresh cheap run goes first ...
    now[0] = 3600.0  # ... but not forever: an hour of waiting outweighs a 30x cost
    queue.request("fresher", ["cheap-2"])
    assert queue.status("patient", "wide").place < queue.status("fresher", "cheap-2").place
    gates.all_open = True
    for key in list(gates._events):
        gates.release(key)


def test_a_cheap_run_takes_the_express_slot_while_a_costly_one_runs(gates: Gates, closing) -> None:
    queue = TrainingQueue(gates.compute, lambda k: 1.0 if k.startswith("cheap") else 30.0, liveness_every_s=0.01)
    closing.append(queue)
    queue.request("wide", ["wide"])
    gates.wait_started(1)
    queue.request("a", ["cheap-a"])
    queue.request("b", ["cheap-b"])
    gates.wait_started(2)  # at once, beside the costly run
    time.sleep(0.1)
    assert gates.started == ["wide", "cheap-a"] and queue.running() == 2  # one express slot, not more
    queue.request("w2", ["wide-2"])
    gates.release("cheap-a")
    gates.wait_started(3)
    assert gates.started[2] == "cheap-b"  # the express slot takes cheap runs only
    gates.release("cheap-b")
    time.sleep(0.1)
    assert len(gates.started) == 3 and queue.running() == 1
    gates.all_open = True
    for key in list(gates._events):
        gates.release(key)


def test_runs_beyond_a_clients_share_wait_behind_other_clients(gates: Gates, closing) -> None:
    queue = TrainingQueue(gates.compute, lambda k: 30.0, express_max_s=0.0, client_share=4, liveness_every_s=0.01)
    closing.append(queue)
    queue.request("tab0", ["blocker"], client="10.0.0.9")
    gates.wait_started(1)
    for tab in range(1, 10):  # one client's tabs: a compare counts as two runs
        queue.request(f"tab{tab}", [f"wide{tab}a", f"wide{tab}b"], client="10.0.0.9")
    queue.request("student", ["theirs"], client="10.0.0.1")
    assert queue.status("student", "theirs").place == 4  # behind the client's first 4 runs (one running)
    assert queue.status("tab9", "wide9b").place == 19
    gates.all_open = True
    for key in list(gates._events):
        gates.release(key)


def test_a_request_holds_at_most_a_compare(gates: Gates, closing) -> None:
    queue = TrainingQueue(gates.compute, lambda k: 30.0, liveness_every_s=0.01)
    closing.append(queue)
    with pytest.raises(ValueError):
        queue.request("s", ["a", "b", "c"])
