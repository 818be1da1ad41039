"""A bounded, fair queue for the trainings students start (no streamlit here).

Why: every session of a class runs in one server process. Twenty students pressing Train at once
used to start twenty trainings side by side: each took ~150 MiB, all shared the CPU and finished
together, and every other student's rerun slowed down meanwhile. Here at most `slots` trainings
run at once, on the queue's own worker threads; the rest wait in the order they were asked for.

The rules, each tested in tests/unit/test_training_queue.py:
- order: the cheapest expected run first, with ageing (its cost is divided by 1 + waited/`ageing_s`,
  so a costly run still starts); equal costs in the order they were first asked for. Issue 31: ten
  tabs of the widest "Compare" (20 runs of ~30 s) put an honest default run (~2 s) at place 20;
- share: a client (a network address; a class behind one NAT is one client) holds `client_share`
  runs in the fair order; its runs beyond that wait behind every other client's. A compare is two
  runs, and a request holds at most a compare (MAX_RUNS_PER_REQUEST);
- bound: never more than `slots` computations at once, plus one express slot for a run expected
  to take at most `express_max_s` (a default run starts while a widest one trains);
- priority: the worker threads run at a lower CPU priority (`niceness`), so the students' page
  reruns go first on a busy machine;
- dedup: a run that is queued, running or finished is never computed a second time; a second
  session asking for it joins it (and keeps the place of whoever asked first);
- replacement: a session holds one queued request; a new request replaces the runs of its old
  one that have not started (a started run is finished: its result is kept for everyone);
- abandonment: a session that is gone (closed tab; `is_alive` says so) leaves the queue; a run
  nobody waits for any more is dropped before it starts, or stopped at its next progress report.

A request is a tuple of run keys (the training lab's "Compare" asks for two runs at once). Keys
must be hashable and immutable (the training lab's frozen `TrainingConfig`); results are shared
between the sessions that asked for the same key, so they must never be mutated.
"""

from __future__ import annotations

import contextlib
import enum
import heapq
import itertools
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

Key = TypeVar("Key", bound=Hashable)
Result = TypeVar("Result")
ProgressCallback = Callable[[int, int], None]  # (steps done, steps in all)
PACE_MEMORY = 0.7  # how much of the pace learned so far each finished run keeps
SLOTS_VARIABLE = "ATTENTION_LAB_TRAINING_SLOTS"  # overrides default_slots(), e.g. on a large machine
MAX_RUNS_PER_REQUEST = 2  # the training lab's "Compare": a request holds at most two runs
DEFAULT_CLIENT_SHARE = 4  # runs one client holds in the fair order: two compares
DEFAULT_AGEING_S = 30.0  # a run's cost counts half after waiting this long, a third after twice, ...
DEFAULT_EXPRESS_MAX_S = 5.0  # runs expected to take at most this may use the express slot
DEFAULT_NICENESS = 10  # the workers' CPU priority, below the page reruns' (Linux: per thread)


class Cancelled(Exception):
    """Raised inside a computation's progress report when nobody waits for its result any more."""


class State(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    UNKNOWN = "unknown"  # not asked for by this session (or dropped after it left)


@dataclass(frozen=True)
class Status(Generic[Result]):
    """Where one asked-for run stands, as one session sees it.

    place: 1 for the next run to start, 2 for the one after, ...; 0 unless queued.
    progress: fraction of the run done (0 while queued, 1 when done).
    wait_s: estimated seconds until its result is ready (0 when done).
    """

    state: State
    place: int = 0
    progress: float = 0.0
    wait_s: float = 0.0
    result: Result | None = None
    error: str = ""


@dataclass(eq=False)
class _Job(Generic[Key]):
    key: Key
    order: int  # when it was first asked for: breaks ties in the fair order
    estimate_s: float
    asked_at: float = 0.0  # the queue's clock when it was first asked for (ageing)
    client: str = ""  # the network address of whoever asked first (the share)
    express: bool = False  # started in the express slot
    waiters: set[str] = field(default_factory=set)  # session ids
    state: State = State.QUEUED
    started_at: float = 0.0
    done: int = 0
    total: int = 0
    checked_at: float = 0.0  # when the waiters' liveness was last checked while running

    @property
    def progress(self) -> float:
        return self.done / self.total if self.total else 0.0

    def remaining_s(self, now: float, pace: float) -> float:
        """Seconds left: from this run's own pace once it has one, else from the estimate x `pace`."""
        if self.state != State.RUNNING:
            return self.estimate_s * pace
        elapsed = now - self.started_at
        if self.progress >= 0.05:
            return elapsed / self.progress * (1 - self.progress)
        return max(self.estimate_s * pace - elapsed, 0.0)


CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")  # cgroup v2: "<quota> <period>" or "max <period>"


def usable_cores(cpu_max: Path = CGROUP_CPU_MAX) -> int:
    """The cores this process may use: its CPU affinity, and a container's CPU quota where it has one
    (a container limited to 1 CPU on a 16-core machine still sees 16 cores)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        quota, period = cpu_max.read_text().split()[:2]
    except (OSError, ValueError):
        return cores
    if quota == "max":
        return cores
    return max(1, min(cores, int(int(quota) // int(period))))


def default_slots(cpu_max: Path = CGROUP_CPU_MAX) -> int:
    """Trainings at once: one core is left for the students' reruns, one at least (default 1 on 2 cores).

    `ATTENTION_LAB_TRAINING_SLOTS` overrides it.
    """
    configured = os.environ.get(SLOTS_VARIABLE, "").strip()
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return max(1, usable_cores(cpu_max) - 1)


class TrainingQueue(Generic[Key, Result]):
    """At most `slots` computations at once, on the queue's own threads, first come first served.

    compute(key, on_progress): the computation; it should call on_progress(done, total) now and then
        (that is where a run nobody waits for is stopped, by raising Cancelled).
    estimate_s(key): its expected seconds on one core (for the waiting students' estimates).
    is_alive(session): False once a session is gone (its tab closed); checked before a run starts
        and at most every `liveness_every_s` while it runs.
    max_results / result_ttl_s: finished results kept for late arrivals (least recently used out).
    """

    def __init__(
        self,
        compute: Callable[[Key, ProgressCallback], Result],
        estimate_s: Callable[[Key], float],
        *,
        slots: int = 1,
        is_alive: Callable[[str], bool] = lambda session: True,
        max_results: int = 64,
        result_ttl_s: float = 3600.0,
        liveness_every_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        client_share: int = DEFAULT_CLIENT_SHARE,
        ageing_s: float = DEFAULT_AGEING_S,
        express_max_s: float = DEFAULT_EXPRESS_MAX_S,
        niceness: int = DEFAULT_NICENESS,
    ) -> None:
        if slots < 1:
            raise ValueError(f"slots must be at least 1, got {slots}")
        self.client_share, self.ageing_s, self.express_max_s = client_share, ageing_s, express_max_s
        self._niceness = niceness
        self._compute, self._estimate_s, self._is_alive = compute, estimate_s, is_alive
        self.slots = slots
        self._max_results, self._ttl_s, self._liveness_every_s = max_results, result_ttl_s, liveness_every_s
        self._clock = clock
        self._lock = threading.Condition()
        self._jobs: dict[Key, _Job[Key]] = {}  # queued and running
        self._results: OrderedDict[Key, tuple[float, Result]] = OrderedDict()  # key -> (finished at, result)
        self._failures: dict[Key, str] = {}  # the last error per key, until it is asked for again
        self._requests: dict[str, tuple[Key, ...]] = {}  # session -> its current request
        self._order = itertools.count()
        self._workers: list[threading.Thread] = []
        self._closed = False
        # Seconds a run actually took per second of its estimate, learned from the finished runs: the
        # estimate is for one quiet core; a busy machine (or a faster one) shows in the waits at once.
        # A ratio of (decaying) sums, not a mean of ratios: a tiny run's fixed costs must not dominate.
        self.pace = 1.0
        self._taken_s = self._estimated_s = 0.0
        self.computed = 0  # computations finished (tests and benchmarks read it)
        self.peak_running = 0  # the most computations ever running at once

    # ---------------------------------------------------------------- what sessions call
    def request(self, session: str, keys: Sequence[Key], client: str = "") -> None:
        """Ask for `keys` on behalf of `session` (from network address `client`); replaces the
        session's previous request. At most MAX_RUNS_PER_REQUEST keys (a compare)."""
        keys = tuple(dict.fromkeys(keys))  # in order, each once
        if len(keys) > MAX_RUNS_PER_REQUEST:
            raise ValueError(f"a request holds at most {MAX_RUNS_PER_REQUEST} runs, got {len(keys)}")
        with self._lock:
            self._leave_queued(session, keep=set(keys))
            self._requests[session] = keys
            for key in keys:
                self._failures.pop(key, None)
                if self._cached(key) is not None:
                    continue
                job = self._jobs.get(key)
                if job is None:
                    job = _Job(key, next(self._order), float(self._estimate_s(key)), self._clock(), client)
                    self._jobs[key] = job
                job.waiters.add(session)
            self._start_workers()
            self._lock.notify_all()

    def status(self, session: str, key: Key) -> Status[Result]:
        """Where `key` stands for `session`: its place and estimate while queued, its result when done."""
        with self._lock:
            cached = self._cached(key)
            if cached is not None:
                return Status(State.DONE, progress=1.0, result=cached[1])
            if key in self._failures:
                return Status(State.FAILED, error=self._failures[key])
            job = self._jobs.get(key)
            if job is None or session not in job.waiters:
                return Status(State.UNKNOWN)
            now = self._clock()
            if job.state == State.RUNNING:
                return Status(State.RUNNING, progress=job.progress, wait_s=job.remaining_s(now, self.pace))
            place, starts_in = self._place(job, now)
            return Status(State.QUEUED, place=place, wait_s=starts_in + job.estimate_s * self.pace)

    def pending(self, session: str) -> tuple[Key, ...]:
        """The keys of the session's current request."""
        with self._lock:
            return self._requests.get(session, ())

    def leave(self, session: str) -> None:
        """The session is gone: it leaves every run it waited for (runs nobody else wants are dropped)."""
        with self._lock:
            self._requests.pop(session, None)
            for job in list(self._jobs.values()):
                job.waiters.discard(session)
                if not job.waiters and job.state == State.QUEUED:
                    del self._jobs[job.key]
            self._lock.notify_all()

    def finish(self, session: str) -> None:
        """The session has taken its results: its request is over (the results stay cached)."""
        with self._lock:
            keys = self._requests.pop(session, ())
            for key in keys:
                if (job := self._jobs.get(key)) is not None and job.state == State.QUEUED:
                    job.waiters.discard(session)
                    if not job.waiters:
                        del self._jobs[key]

    def queued(self) -> int:
        """Runs waiting for a slot."""
        with self._lock:
            return sum(job.state == State.QUEUED for job in self._jobs.values())

    def running(self) -> int:
        with self._lock:
            return self._running_count()

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop the worker threads once their current runs end (tests; the app's queue lives as long as the process)."""
        with self._lock:
            self._closed = True
            self._lock.notify_all()
        for worker in self._workers:
            worker.join(timeout_s)

    # ---------------------------------------------------------------- inside the lock
    def _cached(self, key: Key) -> tuple[float, Result] | None:
        entry = self._results.get(key)
        if entry is None:
            return None
        if self._clock() - entry[0] > self._ttl_s:
            del self._results[key]
            return None
        self._results.move_to_end(key)
        return entry

    def _leave_queued(self, session: str, keep: set[Key]) -> None:
        """Take `session` off the queued runs of its old request it no longer asks for."""
        for key in self._requests.get(session, ()):
            job = self._jobs.get(key)
            if key in keep or job is None or job.state != State.QUEUED:
                continue  # a started run goes on: its result is cached for everyone
            job.waiters.discard(session)
            if not job.waiters:
                del self._jobs[key]

    def _fair_order(self, now: float) -> list[_Job[Key]]:
        """The queued runs in the order they will start (module docstring: order and share).

        A client's share goes to its running runs, then to its cheapest queued ones: a student
        behind the same address as ten costly tabs still counts among that address's first runs.
        """
        aged = {
            job: job.estimate_s / (1.0 + max(0.0, now - job.asked_at) / self.ageing_s) for job in self._jobs.values()
        }
        held: dict[str, int] = {}
        beyond_share: dict[_Job[Key], bool] = {}
        for job in sorted(self._jobs.values(), key=lambda j: (j.state != State.RUNNING, aged[j], j.order)):
            beyond_share[job] = held.get(job.client, 0) >= self.client_share
            held[job.client] = held.get(job.client, 0) + 1
        queued = (job for job in self._jobs.values() if job.state == State.QUEUED)
        return sorted(queued, key=lambda j: (beyond_share[j], aged[j], j.order))

    def _place(self, job: _Job[Key], now: float) -> tuple[int, float]:
        """(place in the queue, seconds until it starts): the runs ahead of it, given to slots as they free."""
        order = self._fair_order(now)
        ahead = order[: order.index(job)]
        running = [j for j in self._jobs.values() if j.state == State.RUNNING]
        starts_in = self._starts_in(ahead, [j for j in running if not j.express], self.slots, now)
        if job.estimate_s <= self.express_max_s:  # the express slot takes it, after the cheap runs ahead
            cheap = [j for j in ahead if j.estimate_s <= self.express_max_s]
            starts_in = min(starts_in, self._starts_in(cheap, [j for j in running if j.express], 1, now))
        return len(ahead) + 1, starts_in

    def _starts_in(self, ahead: list[_Job[Key]], running: list[_Job[Key]], slots: int, now: float) -> float:
        """Seconds until a run behind `ahead` gets one of `slots` slots that `running` occupy now."""
        free_at = [j.remaining_s(now, self.pace) for j in running]
        free_at += [0.0] * max(0, slots - len(free_at))
        heapq.heapify(free_at)
        for j in ahead:
            heapq.heappush(free_at, heapq.heappop(free_at) + j.estimate_s * self.pace)
        return free_at[0]

    def _alive(self, session: str) -> bool:
        """is_alive, where an error counts as alive: a worker thread must never die of it."""
        try:
            return bool(self._is_alive(session))
        except Exception:
            return True

    def _drop_abandoned(self) -> None:
        """Sessions that are gone leave; queued runs nobody waits for are dropped."""
        for session in [s for s in self._requests if not self._alive(s)]:
            del self._requests[session]
        for job in list(self._jobs.values()):
            job.waiters = {s for s in job.waiters if self._alive(s)}
            if not job.waiters and job.state == State.QUEUED:
                del self._jobs[job.key]

    def _next_job(self) -> _Job[Key] | None:
        """The next run to start, marked express when it takes the express slot; None if none may start."""
        running = [job for job in self._jobs.values() if job.state == State.RUNNING]
        slot_free = sum(not job.express for job in running) < self.slots
        express_free = self.express_max_s > 0 and not any(job.express for job in running)
        if not (slot_free or express_free):
            return None
        self._drop_abandoned()
        for job in self._fair_order(self._clock()):
            if slot_free:
                return job
            if job.estimate_s <= self.express_max_s:
                job.express = True
                return job
        return None

    def _start_workers(self) -> None:
        while len(self._workers) < self.slots + (self.express_max_s > 0):
            worker = threading.Thread(target=self._work, name=f"training-queue-{len(self._workers)}", daemon=True)
            self._workers.append(worker)
            worker.start()

    # ---------------------------------------------------------------- the worker threads
    def _work(self) -> None:
        # Linux schedules each thread on its own: this one yields to the page reruns (elsewhere, or
        # where it is not allowed, the thread keeps the default priority).
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

    def _running_count(self) -> int:
        return sum(job.state == State.RUNNING for job in self._jobs.values())

    def _run(self, job: _Job[Key]) -> None:
        def report(done: int, total: int) -> None:
            with self._lock:
                job.done, job.total = done, total
                now = self._clock()
                if now - job.checked_at >= self._liveness_every_s:
                    job.checked_at = now
                    job.waiters = {s for s in job.waiters if self._alive(s)}
                if not job.waiters:
                    raise Cancelled(f"nobody waits for {job.key!r} any more")

        try:
            result = self._compute(job.key, report)
        except Cancelled:
            outcome: tuple[bool, object] = (False, None)
        except Exception as error:  # a failed run is reported to its waiters, and the worker goes on
            outcome = (False, f"{type(error).__name__}: {error}")
        else:
            outcome = (True, result)
        with self._lock:
            self._jobs.pop(job.key, None)
            succeeded, value = outcome
            if succeeded:
                if job.estimate_s > 0:  # the recent runs weigh most (the machine's load changes)
                    self._taken_s = PACE_MEMORY * self._taken_s + (self._clock() - job.started_at)
                    self._estimated_s = PACE_MEMORY * self._estimated_s + job.estimate_s
                    self.pace = self._taken_s / self._estimated_s
                self.computed += 1
                self._results[job.key] = (self._clock(), value)  # type: ignore[assignment]
                while len(self._results) > self._max_results:
                    self._results.popitem(last=False)
            elif value is not None:
                self._failures[job.key] = str(value)
                if len(self._failures) > self._max_results:
                    del self._failures[next(iter(self._failures))]
            self._lock.notify_all()
