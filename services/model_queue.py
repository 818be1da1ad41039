"""A bounded, fair queue for the model runs students start, and the results every session shares (no streamlit here).

Why (issue 40, item 3): lesson 10 runs SmolLM2-135M on each student's own prompt, in the session's own
script thread. On a 2-core server twenty students opening new prompts ran twenty forward passes side by
side: other students' reruns took 6.7x their idle median, a new student opening the lesson's default
example waited 5-48 s (its result had been pushed out of an 8-entry cache), and the server grew from 621
to 1,559 MiB. Here the runs go through one queue per process (ui/gpt_queue.py makes it):

- bound: at most `slots` runs at once, on the queue's own worker threads, at a lower CPU priority
  (`niceness`), so that page reruns go first on a busy machine;
- queue bounds: at most `max_queued` runs wait in all, `max_queued_per_client` asked by one client (a
  network address; a class behind one NAT is one client) and `max_queued_per_session` by one session; a
  request over a bound is refused (State.FULL: the page says so and asks again) and a shared run is never
  refused (there are few: the lesson's examples);
- order: shared runs first (what every new student reads: the example prompts' results); then first come,
  first served by page run, in turn by client: a session takes a ticket when its page run first asks for a
  run and gives it back at the run's end (`settle`), and each of its runs ranks by (its ticket's place among
  its client's tickets, the ticket). A student's later sections keep their place instead of going to the
  back behind everyone who arrived meanwhile (twenty students served a run each in turn would all wait for
  the others' every section and finish last), and ten tabs of one address hold one page run per round: a
  student alone behind another address waits for at most one of their page runs;
- dedup: a run queued, running or kept is never computed a second time; a second session asking joins it;
- results: kept per kind (`limits`: entries and age, least recently used out, as an st.cache_data of the
  same spec would keep them); shared results are kept apart and never pushed out by other students' runs.
  Results are shared objects, never copies: they must be immutable (frozen dataclasses, never mutated);
- replacement: `begin(session)` at the start of a page run marks the session's runs stale: they wait behind
  every other run, a run asked for again in that page run takes its place back, and `settle(session)` at its
  end drops the stale runs not started (a student who changed the prompt no longer waits for the old one);
- abandonment: a session that is gone (closed tab; `is_alive` says so) leaves the queue; a queued run
  nobody waits for is dropped; a running run is told through its `keep_going` (it may stop);
- memory: `after_run()` after every run (the app gives the freed heap pages back to the OS there).

A run is asked for with its key (hashable) and its work: `work(keep_going) -> result`, a closure over the
computation and its inputs; the first asker's work is the one run.
"""

from __future__ import annotations

import bisect
import contextlib
import enum
import itertools
import os
import threading
import time
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from services.training_queue import usable_cores

Key = TypeVar("Key", bound=Hashable)
Result = TypeVar("Result")
KeepGoing = Callable[[], bool]  # False once nobody waits for the run's result any more
SLOTS_VARIABLE = "ATTENTION_LAB_MODEL_SLOTS"  # overrides default_slots()
MAX_DEFAULT_SLOTS = 2  # one model run takes ~100-250 MiB of activations at its peak: two at most by default
DEFAULT_NICENESS = 10  # the workers' CPU priority, below the page reruns' (Linux: per thread)
FIRST_ESTIMATE_S = 2.0  # a kind's expected seconds before any of its runs has finished
PACE_MEMORY = 0.7  # how much of a kind's learned time each finished run keeps


class State(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    FULL = "full"  # refused: the queue (or this client's or this session's share of it) is full
    UNKNOWN = "unknown"  # not asked for by this session, or dropped


@dataclass(frozen=True)
class Status(Generic[Result]):
    """Where one run stands for one session.

    place: 1 for the next run to start, 2 for the one after, ...; 0 unless queued (or FULL: the runs waiting).
    wait_s: estimated seconds until its result is ready (0 when done).
    progress: the fraction of its expected time a running run has had (at most 0.95), 0 while queued.
    """

    state: State
    place: int = 0
    wait_s: float = 0.0
    progress: float = 0.0
    result: Result | None = None
    error: BaseException | None = None


@dataclass(frozen=True)
class Limits:
    """How many results of one kind are kept, and how long (as st.cache_data's max_entries and ttl)."""

    max_entries: int = 64
    ttl_s: float = 3600.0


@dataclass(eq=False)
class _Job(Generic[Key, Result]):
    key: Key
    work: Callable[[KeepGoing], Result]
    order: int  # when it was first asked for
    ticket: int  # its owner's ticket (the module docstring's order)
    shared: bool
    kind: Hashable
    waiters: dict[str, str] = field(default_factory=dict)  # session -> its client
    session: str = ""  # the owner: whose turn it takes (the first asker, or another waiter once it left)
    client: str = ""
    state: State = State.QUEUED
    started_at: float = 0.0

    def reown(self, tickets: Mapping[str, tuple[int, str]]) -> None:
        """After its owner left: the earliest remaining waiter owns it, with its ticket."""
        if self.session not in self.waiters and self.waiters:
            self.session, self.client = next(iter(self.waiters.items()))
            self.ticket = tickets.get(self.session, (self.order, self.client))[0]


def default_slots() -> int:
    """Model runs at once: the cores left after one for the page reruns, one at least, MAX_DEFAULT_SLOTS at most
    (1 on 2 cores). `ATTENTION_LAB_MODEL_SLOTS` overrides it."""
    configured = os.environ.get(SLOTS_VARIABLE, "").strip()
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return max(1, min(MAX_DEFAULT_SLOTS, usable_cores() - 1))


class ModelQueue(Generic[Key, Result]):
    """At most `slots` runs at once, in a fair order, each computed once; results kept per kind.

    kind_of(key): the kind of a run (its lesson), for `limits` and for the estimates of the wait.
    is_alive(session): False once a session is gone; checked before a run starts and by `keep_going`.
    """

    def __init__(
        self,
        *,
        slots: int = 1,
        kind_of: Callable[[Key], Hashable] = lambda key: None,
        limits: Mapping[Hashable, Limits] | None = None,
        max_queued: int = 64,
        max_queued_per_client: int = 32,
        max_queued_per_session: int = 3,
        max_shared: int = 1024,
        is_alive: Callable[[str], bool] = lambda session: True,
        after_run: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
        niceness: int = DEFAULT_NICENESS,
        liveness_every_s: float = 1.0,
    ) -> None:
        if slots < 1:
            raise ValueError(f"slots must be at least 1, got {slots}")
        self.slots = slots
        self.max_queued, self.max_queued_per_client = max_queued, max_queued_per_client
        self.max_queued_per_session, self._max_shared = max_queued_per_session, max_shared
        self._kind_of, self._limits = kind_of, dict(limits or {})
        self._is_alive, self._after_run, self._clock = is_alive, after_run, clock
        self._niceness, self._liveness_every_s = niceness, liveness_every_s
        self._lock = threading.Condition()
        self._jobs: dict[Key, _Job[Key, Result]] = {}  # queued and running
        self._results: dict[Hashable, OrderedDict[Key, tuple[float, Result]]] = defaultdict(OrderedDict)
        self._shared: OrderedDict[Key, Result] = OrderedDict()
        self._failures: OrderedDict[Key, tuple[frozenset[str], BaseException]] = OrderedDict()
        self._stale: dict[str, set[Key]] = {}  # session -> the runs of its previous page run
        # session -> (its ticket: when its current page run first asked for a run, its client)
        self._tickets: dict[str, tuple[int, str]] = {}
        self._seconds: dict[Hashable, float] = {}  # kind -> learned seconds per run
        self._order = itertools.count()
        self._workers: list[threading.Thread] = []
        self._closed = False
        self.computed = 0  # runs finished (tests and benchmarks read it)
        self.peak_running = 0  # the most runs ever running at once

    # ---------------------------------------------------------------- what sessions call
    def ask(
        self, session: str, key: Key, work: Callable[[KeepGoing], Result], *, client: str = "", shared: bool = False
    ) -> Status[Result]:
        """Ask for `key` on behalf of `session` (from network address `client`): its result if kept, else its
        place in the queue (a run already queued or running is joined, not started again)."""
        with self._lock:
            self._stale.get(session, set()).discard(key)
            if (kept := self._kept(key)) is not None:
                return Status(State.DONE, progress=1.0, result=kept[0])
            self._failures.pop(key, None)
            job = self._jobs.get(key)
            if job is None:
                refused = self._refusal(session, client, shared)
                if refused is not None:
                    return refused
                ticket, _ = self._tickets.setdefault(session, (next(self._order), client))
                kind = self._kind_of(key)
                job = _Job(key, work, next(self._order), ticket, shared, kind, session=session, client=client)
                self._jobs[key] = job
            self._tickets.setdefault(session, (job.ticket, client))
            job.waiters.setdefault(session, client)
            self._start_workers()
            self._lock.notify_all()
            return self._status(session, key)

    def status(self, session: str, key: Key) -> Status[Result]:
        with self._lock:
            return self._status(session, key)

    def wait(self, session: str, key: Key, timeout_s: float) -> Status[Result]:
        """The run's status once it is done or failed, or after `timeout_s` (whichever comes first)."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while True:
                status = self._status(session, key)
                left = deadline - time.monotonic()
                if status.state not in (State.QUEUED, State.RUNNING) or left <= 0:
                    return status
                self._lock.wait(left)

    def kept(self, key: Key) -> Result | None:
        """The result if it is kept (shared or not), without asking for it."""
        with self._lock:
            kept = self._kept(key)
            return None if kept is None else kept[0]

    def begin(self, session: str) -> None:
        """A page run starts: the runs the session waits for are stale until it asks for them again (and when it
        waits for none, its ticket is given back: a page run that ended early never settled)."""
        with self._lock:
            waited_for = {key for key, job in self._jobs.items() if session in job.waiters}
            if waited_for:
                self._stale[session] = waited_for
            else:  # nothing pending: the last page run is over, even one that ended early (an error, st.stop)
                self._stale.pop(session, None)
                self._tickets.pop(session, None)

    def settle(self, session: str) -> None:
        """The page run has ended: the session leaves the queued runs it did not ask for again, and its ticket."""
        with self._lock:
            self._tickets.pop(session, None)
            for key in self._stale.pop(session, set()):
                self._leave_queued(session, key)
            self._lock.notify_all()

    def leave(self, session: str) -> None:
        """The session is gone: it leaves every run (queued runs nobody else waits for are dropped)."""
        with self._lock:
            self._stale.pop(session, None)
            self._tickets.pop(session, None)
            for job in list(self._jobs.values()):
                job.waiters.pop(session, None)
                job.reown(self._tickets)
                if not job.waiters and job.state == State.QUEUED:
                    del self._jobs[job.key]
            self._lock.notify_all()

    def queued(self) -> int:
        with self._lock:
            return sum(job.state == State.QUEUED for job in self._jobs.values())

    def running(self) -> int:
        with self._lock:
            return self._running_count()

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop the worker threads once their current runs end (tests; the app's queue lives with the process)."""
        with self._lock:
            self._closed = True
            self._lock.notify_all()
        for worker in self._workers:
            worker.join(timeout_s)

    # ---------------------------------------------------------------- inside the lock
    def _kept(self, key: Key) -> tuple[Result] | None:
        if key in self._shared:
            self._shared.move_to_end(key)
            return (self._shared[key],)
        kind = self._kind_of(key)
        results = self._results.get(kind)
        if results is None or key not in results:
            return None
        finished_at, result = results[key]
        if self._clock() - finished_at > self._limits.get(kind, Limits()).ttl_s:
            del results[key]
            return None
        results.move_to_end(key)
        return (result,)

    def _keep(self, job: _Job[Key, Result], result: Result) -> None:
        if job.shared:
            self._shared[job.key] = result
            while len(self._shared) > self._max_shared:  # a safety net: shared keys are a small, finite set
                self._shared.popitem(last=False)
            return
        results = self._results[job.kind]
        results[job.key] = (self._clock(), result)
        while len(results) > self._limits.get(job.kind, Limits()).max_entries:
            results.popitem(last=False)

    def _refusal(self, session: str, client: str, shared: bool) -> Status[Result] | None:
        """A new run over one of the bounds is refused (FULL, with the number of runs waiting); None if it fits."""
        if shared:
            return None
        queued = [job for job in self._jobs.values() if job.state == State.QUEUED and not job.shared]
        mine = [job for job in queued if session in job.waiters]
        stale = self._stale.get(session, set())
        for job in sorted((j for j in mine if j.key in stale), key=lambda j: j.order):
            if len(mine) < self.max_queued_per_session:
                break
            self._leave_queued(session, job.key)  # an old page run's runs make room for the new one's
            mine.remove(job)
            queued = [j for j in queued if j.key in self._jobs]
        if (
            len(mine) >= self.max_queued_per_session
            or sum(job.client == client for job in queued) >= self.max_queued_per_client
            or len(queued) >= self.max_queued
        ):
            return Status(State.FULL, place=len(queued))
        return None

    def _leave_queued(self, session: str, key: Key) -> None:
        job = self._jobs.get(key)
        if job is None or job.state != State.QUEUED:
            return  # a started run goes on: its result is kept for everyone
        job.waiters.pop(session, None)
        job.reown(self._tickets)
        if not job.waiters:
            del self._jobs[key]

    def _status(self, session: str, key: Key) -> Status[Result]:
        kept = self._kept(key)
        if kept is not None:
            return Status(State.DONE, progress=1.0, result=kept[0])
        if key in self._failures and session in self._failures[key][0]:
            return Status(State.FAILED, error=self._failures[key][1])
        job = self._jobs.get(key)
        if job is None or session not in job.waiters:
            return Status(State.UNKNOWN)
        now = self._clock()
        if job.state == State.RUNNING:
            expected = self._estimate(job.kind)
            elapsed = now - job.started_at
            return Status(State.RUNNING, wait_s=max(expected - elapsed, 0.0), progress=min(elapsed / expected, 0.95))
        order = self._fair_order()
        ahead = order[: order.index(job)]
        busy = sum(max(self._estimate(j.kind) - (now - j.started_at), 0.0) for j in self._running_jobs())
        starts_in = (busy + sum(self._estimate(j.kind) for j in ahead)) / self.slots
        return Status(State.QUEUED, place=len(ahead) + 1, wait_s=starts_in + self._estimate(job.kind))

    def _estimate(self, kind: Hashable) -> float:
        return max(self._seconds.get(kind, FIRST_ESTIMATE_S), 0.05)

    def _running_jobs(self) -> list[_Job[Key, Result]]:
        return [job for job in self._jobs.values() if job.state == State.RUNNING]

    def _running_count(self) -> int:
        return len(self._running_jobs())

    def _fair_order(self) -> list[_Job[Key, Result]]:
        """The queued runs in the order they will start (module docstring: order): shared runs, then by (the place
        of the run's ticket among its client's open page runs, the ticket); stale runs last."""
        queued = sorted(
            (job for job in self._jobs.values() if job.state == State.QUEUED), key=lambda j: (j.ticket, j.order)
        )
        stale = [job for job in queued if not job.shared and self._only_stale(job)]  # last: wanted by no page now
        private = [job for job in queued if not job.shared and job not in stale]
        open_runs: dict[str, list[int]] = defaultdict(list)  # client -> the tickets of its page runs, in order
        for ticket, client in sorted(self._tickets.values(), key=lambda entry: entry[0]):
            open_runs[client].append(ticket)

        def rank(job: _Job[Key, Result]) -> tuple[int, int, int]:
            tickets = open_runs.get(job.client, [])
            turn = bisect.bisect_left(tickets, job.ticket)  # its page run's turn within its client
            return (turn, job.ticket, job.order)

        return [job for job in queued if job.shared] + sorted(private, key=rank) + stale

    def _only_stale(self, job: _Job[Key, Result]) -> bool:
        """Every session waiting for it has moved on to a new page run that has not asked for it (yet)."""
        return all(job.key in self._stale.get(session, ()) for session in job.waiters)

    def _alive(self, session: str) -> bool:
        """is_alive, where an error counts as alive: a worker thread must never die of it."""
        try:
            return bool(self._is_alive(session))
        except Exception:
            return True

    def _drop_abandoned(self) -> None:
        for session in [s for s in {*self._stale, *self._tickets} if not self._alive(s)]:
            self._stale.pop(session, None)
            self._tickets.pop(session, None)
        for job in list(self._jobs.values()):
            for session in [s for s in job.waiters if not self._alive(s)]:
                del job.waiters[session]
            job.reown(self._tickets)
            if not job.waiters and job.state == State.QUEUED:
                del self._jobs[job.key]

    def _next_job(self) -> _Job[Key, Result] | None:
        if self._running_count() >= self.slots:
            return None
        self._drop_abandoned()
        order = self._fair_order()
        return order[0] if order else None

    def _start_workers(self) -> None:
        while len(self._workers) < self.slots:
            worker = threading.Thread(target=self._work, name=f"model-queue-{len(self._workers)}", daemon=True)
            self._workers.append(worker)
            worker.start()

    # ---------------------------------------------------------------- the worker threads
    def _work(self) -> None:
        # Linux schedules each thread on its own: this one yields to the page reruns.
        with contextlib.suppress(AttributeError, OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self._niceness)
        while True:
            with self._lock:
                job = self._next_job()
                while job is None and not self._closed:
                    self._lock.wait(timeout=self._liveness_every_s)  # also notices closed tabs while idle
                    job = self._next_job()
                if job is None:
                    return
                job.state, job.started_at = State.RUNNING, self._clock()
                self.peak_running = max(self.peak_running, self._running_count())
            self._run(job)

    def _run(self, job: _Job[Key, Result]) -> None:
        def keep_going() -> bool:
            with self._lock:
                waiters = list(job.waiters)
            return any(self._alive(session) for session in waiters)

        result: Result | None = None
        error: BaseException | None = None
        try:
            result = job.work(keep_going)
        except Exception as raised:  # reported to its waiters; the worker goes on
            error = raised.with_traceback(None)  # its frames (the run's tensors) are not kept with it
        with self._lock:
            self._jobs.pop(job.key, None)
            if error is None:
                taken = self._clock() - job.started_at
                self._seconds[job.kind] = (
                    taken
                    if job.kind not in self._seconds
                    else PACE_MEMORY * self._seconds[job.kind] + (1 - PACE_MEMORY) * taken
                )
                self.computed += 1
                self._keep(job, result)  # type: ignore[arg-type]
            else:
                self._failures[job.key] = (frozenset(job.waiters), error)
                while len(self._failures) > self.max_queued:
                    self._failures.popitem(last=False)
            self._lock.notify_all()
        with contextlib.suppress(Exception):  # after the waiters have their result
            self._after_run()
