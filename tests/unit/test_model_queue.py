"""The model queue (services/model_queue.py): bound, fairness per client and per session, queue bounds,
dedup, results kept per kind and shared ones apart, stale runs, abandonment, failures.

The runs here are fakes that wait on an event, so each test decides when a run ends and can look at the
queue in between; no torch, no streamlit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from services import model_queue
from services.model_queue import Limits, ModelQueue, State

WAIT_S = 10.0  # generous: a shared machine can be slow, and every wait below ends on an event


class Gates:
    """Fake runs, one per key: each records its start and ends when released (or at once once `open`)."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.running = 0
        self.peak = 0
        self.told_to_stop: list[str] = []
        self.open = False
        self._events: dict[str, threading.Event] = {}
        self._changed = threading.Condition()

    def event(self, key: str) -> threading.Event:
        with self._changed:
            event = self._events.setdefault(key, threading.Event())
            if self.open:
                event.set()
            return event

    def release(self, key: str) -> None:
        self.event(key).set()

    def release_all(self) -> None:
        with self._changed:
            self.open = True
            events = list(self._events.values())
        for event in events:
            event.set()

    def work(self, key: str) -> Callable[[model_queue.KeepGoing], str]:
        def run(keep_going: model_queue.KeepGoing) -> str:
            with self._changed:
                self.started.append(key)
                self.running += 1
                self.peak = max(self.peak, self.running)
                self._changed.notify_all()
            try:
                gate = self.event(key)
                while not gate.wait(0.01):
                    if not keep_going():
                        with self._changed:
                            self.told_to_stop.append(key)
                        raise RuntimeError(f"{key}: nobody waits")
                if key.startswith("bad"):
                    raise ValueError(f"{key} cannot be computed")
                return f"result of {key}"
            finally:
                with self._changed:
                    self.running -= 1
                    self._changed.notify_all()

        return run

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
def make_queue(gates: Gates) -> Iterator[Callable[..., ModelQueue[str, str]]]:
    made: list[ModelQueue[str, str]] = []

    def make(**options) -> ModelQueue[str, str]:
        options.setdefault("slots", 1)
        queue: ModelQueue[str, str] = ModelQueue(liveness_every_s=0.01, niceness=0, **options)
        made.append(queue)
        return queue

    yield make
    gates.release_all()
    for queue in made:
        queue.close()


def ask(queue: ModelQueue[str, str], gates: Gates, session: str, key: str, client: str = "", shared: bool = False):
    return queue.ask(session, key, gates.work(key), client=client, shared=shared)


def start_blocker(queue: ModelQueue[str, str], gates: Gates) -> None:
    """One run that holds the only slot until released: what is asked for next waits in the queue."""
    ask(queue, gates, "blocker", "blocker", client="elsewhere")
    gates.wait_started(1)


def test_at_most_slots_runs_at_once(gates: Gates, make_queue) -> None:
    queue = make_queue(slots=2)
    for student in range(6):
        ask(queue, gates, f"s{student}", f"k{student}", client=f"10.0.0.{student}")
    gates.wait_started(2)
    time.sleep(0.1)  # a third start would show now
    assert len(gates.started) == 2 and queue.running() == 2 and queue.queued() == 4
    gates.release_all()
    wait_until(lambda: queue.computed == 6)
    assert gates.peak == 2 and queue.peak_running == 2


def test_one_address_with_many_tabs_holds_one_turn_per_round(gates: Gates, make_queue) -> None:
    queue = make_queue()
    start_blocker(queue, gates)
    for tab in range(5):  # one client, five tabs, each its own prompt
        ask(queue, gates, f"tab{tab}", f"a{tab}", client="10.0.0.1")
    ask(queue, gates, "alone", "b", client="10.0.0.2")  # asked last, from another address
    assert queue.status("alone", "b").place == 2  # behind one of the five tabs, not all five
    assert [queue.status(f"tab{t}", f"a{t}").place for t in range(5)] == [1, 3, 4, 5, 6]
    gates.release_all()
    wait_until(lambda: queue.computed == 7)
    assert gates.started == ["blocker", "a0", "b", "a1", "a2", "a3", "a4"]


def test_an_open_page_run_counts_as_its_address_s_turn(gates: Gates, make_queue) -> None:
    queue = make_queue()
    ask(queue, gates, "tab0", "a0", client="10.0.0.1")
    gates.wait_started(1)
    ask(queue, gates, "tab1", "a1", client="10.0.0.1")
    ask(queue, gates, "other", "b", client="10.0.0.2")
    assert queue.status("other", "b").place == 1  # 10.0.0.1 has its turn: tab0's page run, running


def test_a_student_s_next_section_keeps_the_place_of_its_page_run(gates: Gates, make_queue) -> None:
    # One address (a class behind one NAT): first come, first served by page run. The first student's
    # second section goes ahead of the students who arrived after it; served in turn by run instead,
    # twenty students would each wait for the others' every section and all finish last.
    queue = make_queue()
    start_blocker(queue, gates)
    queue.begin("first")
    ask(queue, gates, "first", "first-analysis")
    for student in ("second", "third"):
        queue.begin(student)
        ask(queue, gates, student, f"{student}-analysis")
    gates.release("blocker")
    gates.release("first-analysis")
    wait_until(lambda: queue.status("first", "first-analysis").state == State.DONE)
    ask(queue, gates, "first", "first-timing")  # the same page run, its next section
    assert queue.status("first", "first-timing").place in (1, 2)  # "second" may have started meanwhile
    assert queue.status("first", "first-timing").place < queue.status("third", "third-analysis").place
    queue.settle("first")  # its page run ended: its next one takes a new ticket, behind those who came meanwhile
    queue.begin("first")
    ask(queue, gates, "first", "first-generation")
    assert queue.status("first", "first-generation").place > queue.status("third", "third-analysis").place


def test_the_queue_bounds_refuse_what_is_over_them(gates: Gates, make_queue) -> None:
    queue = make_queue(max_queued=6, max_queued_per_client=4, max_queued_per_session=2)
    start_blocker(queue, gates)
    assert ask(queue, gates, "s", "s1", client="A").state == State.QUEUED
    assert ask(queue, gates, "s", "s2", client="A").state == State.QUEUED
    refused = ask(queue, gates, "s", "s3", client="A")  # a session's share
    assert refused.state == State.FULL and refused.place == 2
    assert ask(queue, gates, "t", "t1", client="A").state == State.QUEUED
    assert ask(queue, gates, "u", "u1", client="A").state == State.QUEUED
    assert ask(queue, gates, "v", "v1", client="A").state == State.FULL  # the address's share (4)
    assert ask(queue, gates, "w", "w1", client="B").state == State.QUEUED
    assert ask(queue, gates, "x", "x1", client="C").state == State.QUEUED
    assert ask(queue, gates, "y", "y1", client="D").state == State.FULL  # the queue's (6)
    assert ask(queue, gates, "y", "s1", client="D").state == State.QUEUED  # joining a queued run is free
    assert ask(queue, gates, "z", "example", client="D", shared=True).state == State.QUEUED  # never refused
    assert queue.queued() == 7 and "s3" not in gates.started


def test_an_old_page_run_s_runs_make_room_for_the_new_one_s(gates: Gates, make_queue) -> None:
    queue = make_queue(max_queued_per_session=2)
    start_blocker(queue, gates)
    queue.begin("s")
    ask(queue, gates, "s", "old1")
    ask(queue, gates, "s", "old2")
    queue.begin("s")  # the student changed the prompt: both are stale
    assert ask(queue, gates, "s", "new").state == State.QUEUED  # the oldest stale run gave its place
    assert queue.status("s", "old1").state == State.UNKNOWN and queue.queued() == 2


def test_identical_runs_are_computed_once(gates: Gates, make_queue) -> None:
    queue = make_queue()
    start_blocker(queue, gates)
    ask(queue, gates, "one", "same", client="A")
    ask(queue, gates, "two", "same", client="B")  # joins
    assert queue.queued() == 1
    gates.release_all()
    wait_until(lambda: queue.computed == 2)
    assert gates.started.count("same") == 1
    assert queue.status("two", "same").result == "result of same"
    assert ask(queue, gates, "three", "same").state == State.DONE  # kept: no new run
    assert gates.started.count("same") == 1


def test_results_are_kept_per_kind_and_shared_ones_apart(gates: Gates, make_queue) -> None:
    gates.release_all()
    queue = make_queue(kind_of=lambda key: key.split("-")[0], limits={"prompt": Limits(max_entries=2)})
    ask(queue, gates, "s", "prompt-example", shared=True)
    wait_until(lambda: queue.computed == 1)
    for number in range(5):  # students' own prompts: more than the kind keeps
        ask(queue, gates, f"s{number}", f"prompt-own{number}")
        wait_until(lambda number=number: queue.computed == number + 2)
    assert queue.kept("prompt-example") == "result of prompt-example"  # never pushed out
    assert [queue.kept(f"prompt-own{n}") for n in range(5)] == [None, None, None, "result of prompt-own3",
                                                                "result of prompt-own4"]  # fmt: skip
    assert ask(queue, gates, "late", "prompt-example").state == State.DONE
    assert gates.started.count("prompt-example") == 1


def test_a_kept_result_expires_after_its_kind_s_age(gates: Gates, make_queue) -> None:
    gates.release_all()
    now = [0.0]
    queue = make_queue(clock=lambda: now[0], limits={None: Limits(max_entries=8, ttl_s=60.0)})
    ask(queue, gates, "s", "k")
    wait_until(lambda: queue.computed == 1)
    now[0] = 59.0
    assert queue.kept("k") == "result of k"
    now[0] = 61.0  # 61 s after it was computed (as st.cache_data's ttl counts)
    assert queue.kept("k") is None


def test_shared_runs_go_first(gates: Gates, make_queue) -> None:
    queue = make_queue()
    start_blocker(queue, gates)
    for student in range(3):
        ask(queue, gates, f"s{student}", f"own{student}", client=f"10.0.0.{student}")
    ask(queue, gates, "newcomer", "example", client="10.0.0.9", shared=True)
    assert queue.status("newcomer", "example").place == 1


def test_stale_runs_not_asked_again_are_dropped_when_the_page_run_ends(gates: Gates, make_queue) -> None:
    queue = make_queue()
    start_blocker(queue, gates)
    queue.begin("s")
    ask(queue, gates, "s", "kept-asking")
    ask(queue, gates, "other", "someone-else")
    ask(queue, gates, "s", "old-prompt")
    queue.begin("s")  # a rerun: the student typed a new prompt
    ask(queue, gates, "s", "kept-asking")  # asked again: keeps its place
    assert queue.status("s", "kept-asking").place == 1
    queue.settle("s")
    assert queue.status("s", "old-prompt").state == State.UNKNOWN
    assert queue.queued() == 2
    gates.release_all()
    wait_until(lambda: queue.computed == 3)
    assert "old-prompt" not in gates.started


def test_a_session_that_is_gone_leaves_and_its_running_run_is_told(gates: Gates, make_queue) -> None:
    gone: set[str] = set()
    queue = make_queue(is_alive=lambda session: session not in gone)
    ask(queue, gates, "leaver", "running")
    gates.wait_started(1)
    ask(queue, gates, "leaver", "queued")
    ask(queue, gates, "stayer", "shared-run")
    ask(queue, gates, "leaver", "shared-run")
    gone.add("leaver")
    wait_until(lambda: "running" in gates.told_to_stop)  # its keep_going said False
    wait_until(lambda: queue.computed == 0 and "shared-run" in gates.started)
    assert "queued" not in gates.started  # dropped before it started
    gates.release_all()
    wait_until(lambda: queue.computed == 1)
    assert queue.status("stayer", "shared-run").result == "result of shared-run"


def test_leave_drops_the_session_s_queued_runs(gates: Gates, make_queue) -> None:
    queue = make_queue()
    start_blocker(queue, gates)
    ask(queue, gates, "s", "mine")
    ask(queue, gates, "s", "ours")
    ask(queue, gates, "t", "ours")
    queue.leave("s")
    assert queue.status("s", "mine").state == State.UNKNOWN
    assert queue.queued() == 1 and queue.status("t", "ours").place == 1


def test_a_failure_reaches_its_waiters_and_is_not_kept(gates: Gates, make_queue) -> None:
    gates.release_all()
    queue = make_queue()
    ask(queue, gates, "s", "bad-prompt")
    status = queue.wait("s", "bad-prompt", WAIT_S)
    assert status.state == State.FAILED and isinstance(status.error, ValueError)
    assert queue.status("other", "bad-prompt").state == State.UNKNOWN  # only its waiters hear of it
    ask(queue, gates, "s", "bad-prompt")  # asked again: computed again
    wait_until(lambda: gates.started.count("bad-prompt") == 2)
    assert queue.kept("bad-prompt") is None


def test_wait_returns_as_soon_as_the_result_is_ready(gates: Gates, make_queue) -> None:
    queue = make_queue()
    ask(queue, gates, "s", "k")
    gates.wait_started(1)
    threading.Timer(0.05, gates.release, args=("k",)).start()
    started = time.monotonic()
    assert queue.wait("s", "k", WAIT_S).state == State.DONE
    assert time.monotonic() - started < WAIT_S / 2


def test_the_estimates_grow_with_the_place(gates: Gates, make_queue) -> None:
    queue = make_queue()
    start_blocker(queue, gates)
    for student in range(3):
        ask(queue, gates, f"s{student}", f"k{student}", client=f"10.0.0.{student}")
    waits = [queue.status(f"s{i}", f"k{i}").wait_s for i in range(3)]
    assert waits[0] < waits[1] < waits[2]
    assert waits[2] - waits[1] == pytest.approx(model_queue.FIRST_ESTIMATE_S, abs=0.5)


def test_after_run_follows_every_run(gates: Gates, make_queue) -> None:
    gates.release_all()
    calls: list[int] = []
    queue = make_queue(after_run=lambda: calls.append(queue.computed))
    for count, key in enumerate(("a", "b", "bad-c"), start=1):
        ask(queue, gates, key, key)
        wait_until(lambda count=count: len(calls) == count)
    assert calls == [1, 2, 2]  # after each run, the failed one too, once its waiters have their answer


def test_default_slots(monkeypatch) -> None:
    monkeypatch.delenv(model_queue.SLOTS_VARIABLE, raising=False)
    monkeypatch.setattr(model_queue, "usable_cores", lambda: 2)
    assert model_queue.default_slots() == 1  # one core left for the page reruns
    monkeypatch.setattr(model_queue, "usable_cores", lambda: 16)
    assert model_queue.default_slots() == model_queue.MAX_DEFAULT_SLOTS
    monkeypatch.setattr(model_queue, "usable_cores", lambda: 1)
    assert model_queue.default_slots() == 1
    monkeypatch.setenv(model_queue.SLOTS_VARIABLE, "3")
    assert model_queue.default_slots() == 3


def test_a_failure_is_kept_without_the_frames_of_its_run(gates: Gates, make_queue) -> None:
    gates.release_all()
    queue = make_queue()
    ask(queue, gates, "s", "bad-prompt")
    status = queue.wait("s", "bad-prompt", WAIT_S)
    assert status.state == State.FAILED and status.error is not None
    assert status.error.__traceback__ is None  # the run's locals (a forward pass's tensors) are not held


def test_a_stale_run_waits_behind_what_the_new_page_run_asks_for(gates: Gates, make_queue) -> None:
    queue = make_queue()
    start_blocker(queue, gates)
    queue.begin("s")
    ask(queue, gates, "s", "old-prompt")
    ask(queue, gates, "s", "old-timing")
    ask(queue, gates, "t", "someone-else")
    queue.begin("s")  # the student typed a new prompt while the old one waited
    ask(queue, gates, "s", "new-prompt")
    assert queue.status("s", "new-prompt").place == 1  # not behind the prompt it no longer shows
    assert queue.status("t", "someone-else").place == 2
    assert queue.status("s", "old-timing").place == 4
    ask(queue, gates, "s", "old-timing")  # asked again after all (the same prompt): its place back, first
    assert queue.status("s", "old-timing").place == 1


def test_a_page_run_that_ended_early_gives_its_ticket_back_at_the_next_one(gates: Gates, make_queue) -> None:
    gates.release_all()
    queue = make_queue()
    queue.begin("early")
    ask(queue, gates, "early", "first-section")  # then the page stopped on an error: no settle
    wait_until(lambda: queue.computed == 1)
    gates.open = False
    ask(queue, gates, "blocker", "blocker", client="elsewhere")
    gates.wait_started(2)
    ask(queue, gates, "meanwhile", "theirs")
    queue.begin("early")  # its next page run, nothing pending: a new ticket, behind the student who came meanwhile
    ask(queue, gates, "early", "next-section")
    assert queue.status("meanwhile", "theirs").place == 1
    assert queue.status("early", "next-section").place == 2


def test_sessions_that_share_a_ticket_are_ordered_without_comparing_their_clients(gates: Gates, make_queue) -> None:
    queue = make_queue()
    start_blocker(queue, gates)
    ask(queue, gates, "first", "same", client="10.0.0.1")
    ask(queue, gates, "second", "same", client=None)  # type: ignore[arg-type]  # joins, and so takes its ticket
    ask(queue, gates, "second", "more", client=None)  # type: ignore[arg-type]
    assert queue.status("second", "more").place == 2  # no TypeError: clients are keys, never compared
