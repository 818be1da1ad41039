"""The training lab's runs go through one bounded queue per process (services/training_queue.py).

A press of Train asks the queue for the run and the page is drawn at once; at the end of the
script the student waits, with a progress bar that says their place in the queue and an estimate,
or how far their run has got. When it is ready the page reruns and shows it. Why a loop at the end
of the script and not an st.fragment(run_every=...): the loop costs the server nothing between two
updates, and any widget the student touches meanwhile reruns the page at the next update (every
UPDATE_S), which is also how Streamlit stops it when the tab closes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import streamlit as st

from core.lessons import training_lab as tt
from services.training_queue import ProgressCallback, State, Status, TrainingQueue, default_slots
from ui import hardening, sessions

PENDING = "training_pending"  # session state: the configs this session asked for and has not received
UPDATE_S = 0.5  # how often a waiting student's bar is redrawn (and a widget change can interrupt the wait)


def _train(config: tt.TrainingConfig, on_progress: ProgressCallback) -> tt.TrainingRun:
    # Looked up at call time, so that a test can replace the computation.
    return tt.RUN.compute(config, on_progress=on_progress)


@st.cache_resource(show_spinner=False)
def training_queue() -> TrainingQueue[tt.TrainingConfig, tt.TrainingRun]:
    """The process's one queue: at most default_slots() trainings at once; finished runs kept as the
    lesson's spec says (tt.RUN: entries and age, as a cache of the lesson would be)."""
    return TrainingQueue(
        _train,
        tt.estimated_seconds,
        slots=default_slots(),
        is_alive=sessions.session_alive,
        max_results=tt.RUN.max_entries,
        result_ttl_s=tt.RUN.ttl_s,
    )


def pace() -> float:
    """The server's seconds per estimated second over its recent finished runs (1.0 before any)."""
    return training_queue().pace


def ask(configs: Sequence[tt.TrainingConfig]) -> None:
    """Queue these runs for this session (replacing whatever it had queued and not started)."""
    st.session_state[PENDING] = tuple(configs)
    training_queue().request(sessions.session_id(), tuple(configs), client=hardening.client_address())


def forget() -> None:
    """The student cleared their runs: nothing is awaited any more."""
    if st.session_state.pop(PENDING, None):
        training_queue().finish(sessions.session_id())


def collect() -> list[tt.TrainingRun]:
    """The runs this session asked for, once every one of them is ready (else []); a failure is said."""
    pending: tuple[tt.TrainingConfig, ...] = st.session_state.get(PENDING, ())
    if not pending:
        return []
    queue, session = training_queue(), sessions.session_id()
    statuses = [queue.status(session, config) for config in pending]
    if any(s.state == State.UNKNOWN for s in statuses):
        # the queue lost it (the tab reconnected after a drop): ask again
        queue.request(session, pending, client=hardening.client_address())
        return []
    if any(s.state in (State.QUEUED, State.RUNNING) for s in statuses):
        return []
    del st.session_state[PENDING]
    queue.finish(session)
    for status in statuses:
        if status.state == State.FAILED:
            st.error(f"This run could not be trained ({status.error}). Try other settings.", icon=":material/error:")
    return [s.result for s in statuses if s.state == State.DONE and s.result is not None]


def describe(statuses: Sequence[Status]) -> tuple[float, str]:
    """The bar's fraction and text for a session waiting for these runs."""
    total_s = max(s.wait_s for s in statuses)
    queued = [s for s in statuses if s.state == State.QUEUED]
    done = sum(s.progress for s in statuses) / len(statuses)
    if queued:
        place = min(s.place for s in queued)
        ahead = "you are next" if place == 1 else f"place {place} in the queue"
        return done, f"Waiting for a free trainer: {ahead}, ready in about {total_s:.0f} s."
    return done, f"Training: {done:.0%} done, about {total_s:.0f} s left."


def wait(where: st.delta_generator.DeltaGenerator) -> None:
    """Block until this session's runs are ready, showing the wait in `where`; then rerun the page."""
    pending: tuple[tt.TrainingConfig, ...] = st.session_state.get(PENDING, ())
    if not pending:
        return
    queue, session = training_queue(), sessions.session_id()
    bar = where.progress(0.0, text="Asking for a trainer…")
    while True:
        statuses = [queue.status(session, config) for config in pending]
        if all(s.state in (State.DONE, State.FAILED) for s in statuses):
            st.rerun()  # collect() takes the runs and the page draws them
        if any(s.state == State.UNKNOWN for s in statuses):
            if not sessions.session_alive(session):
                return  # the tab is gone: the queue has dropped its runs
            st.rerun()  # the queue lost them: collect() asks again
        fraction, text = describe(statuses)
        bar.progress(min(fraction, 1.0), text=text)  # also where a newer rerun or a closed tab stops this loop
        time.sleep(UPDATE_S)
