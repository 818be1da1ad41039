"""Twenty students press Train at once at the widest setting: the training queue on a real server.

    python -m loadtest.training_queue            # ~3 minutes on a quiet machine: the widest runs (~30 s each)
    python -m loadtest.training_queue --quick    # the same runs cut to 40 steps

One `streamlit run` on every core the machine gives it, driven over its websocket
(loadtest/load_client.py) in one run, so that every figure is a ratio of times measured side by side:
0. warm-up: one small run (the page's default task, 10 steps), so that torch's first calls are not timed;
1. alone: one student presses Train at the widest setting the page allows (induction, 2 layers x 4
   heads x d_k 64, as many steps as the caps allow) -> the time a run takes alone;
2. idle: OTHERS students step the seed on the multi-head page -> their reruns with no training;
3. queue: PRESSERS more students (each their own seed: twenty different runs) press Train at once,
   while the OTHERS go on stepping; measured until the first presser sees its run, plus one run's
   time: the server's peak RSS growth (VmHWM, reset before the presses), the first result's time
   relative to alone, the places and estimates the waiting students were shown, and the OTHERS'
   reruns relative to idle;
4. closed tabs: every presser closes its tab; the server's CPU use over the next seconds shows
   whether their queued and running trainings were dropped.

    python -m loadtest.training_queue --fair     # ~1.5 minutes: issue 31's row, the fair trainer

The fair row: ten tabs press "Scaled vs unscaled" at the widest setting (20 runs of ~30 s),
then an honest student presses Train with the page's defaults; measured: that run's seconds from
press to result against the same run alone (target: it starts within 30 s), and the OTHERS' reruns
meanwhile against idle (target: within 2x). Every client is on loopback, so all share one address:
the queue's per-client share cannot tell them apart, and the order by expected cost (and the
express slot) is what is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

from loadtest import load_client
from loadtest.capacity import cpu_seconds
from testkit.harness import start_server

PRESSERS = 20
OTHERS = 4
OTHER_PAGE = "multi_head"
WIDEST = "train_task=induction&train_layers=2&train_heads=4&train_d_k=64"
MAX_STEPS_ASKED = 3000  # the caps cut it to what fits the run budget at this width
QUICK_STEPS = 40
PLACE = re.compile(r"place (\d+)")
WAITING = "Waiting for a free trainer"  # ui/training_queue.describe: a queued student's bar
RUN_SHOWN = re.compile(r"^Run \d+: ")  # the caption above the heads, once a run is on the page
FINISHED = ForwardMsg.ScriptFinishedStatus


class TrainingStudent(load_client.Student):
    """A student whose link opens the training lab at the widest setting, with its own seed."""

    steps: int = MAX_STEPS_ASKED
    widest: bool = True  # False: the page's default task and sizes (the warm-up run)

    @property
    def query_string(self) -> str:
        return f"seed={self.seed}&{WIDEST if self.widest else ''}&train_steps={self.steps}"


@dataclass(frozen=True)
class Pressed:
    """What one press of Train gave: seconds until the run was on the page, what the wait showed."""

    seconds: float
    run_label: str  # the page's caption for the run it shows
    first_wait_text: str  # the first progress text after the press ("" if the run was shown at once)
    places_seen: tuple[int, ...]


def rss_mib(pid: int, field_name: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def open_student(
    url: str, index: int, page: str, steps: int, kind=TrainingStudent, widest: bool = True
) -> load_client.Student:
    student = kind(index, url, time.monotonic(), random.Random(index), page, seed=1000 * (index + 1))
    if isinstance(student, TrainingStudent):
        student.steps, student.widest = steps, widest
    await student.connect()
    await student.rerun(load_client.Action.OPEN)
    return student


async def press_train(
    student: load_client.Student, timeout_s: float, texts: list[str] | None = None, button: str = "Train"
) -> Pressed:
    """Click `button` as the browser does (the widgets' states plus its trigger); wait for the run.

    `texts` receives the progress texts the page shows meanwhile (the wait: place and estimate).
    """
    message = BackMsg()
    state = message.rerun_script
    state.query_string = student.query_string
    state.page_name = student.page
    state.widget_states.widgets.extend(student.view.widgets.values())
    state.widget_states.widgets.append(WidgetState(id=student.view.buttons[button], trigger_value=True))
    sent = time.monotonic()
    await student.socket.send(message.SerializeToString())
    texts = [] if texts is None else texts
    shown = ""
    while True:
        reply = ForwardMsg()
        reply.ParseFromString(await asyncio.wait_for(student.socket.recv(), timeout_s))
        if reply.WhichOneof("type") == "delta" and reply.delta.WhichOneof("type") == "new_element":
            element = reply.delta.new_element
            kind = element.WhichOneof("type")
            if kind == "progress":
                texts.append(element.progress.text)
            elif kind == "markdown" and RUN_SHOWN.match(element.markdown.body):
                shown = element.markdown.body
            elif kind == "exception":
                raise RuntimeError(f"exception on the page: {element.exception.message[:200]}")
        elif reply.WhichOneof("type") == "script_finished":
            done = reply.script_finished == FINISHED.FINISHED_SUCCESSFULLY
            if done and shown:  # the run's end after the one that waited in the queue (it reran)
                places = tuple(int(m.group(1)) for t in texts if (m := PLACE.search(t)))
                return Pressed(time.monotonic() - sent, shown, texts[0] if texts else "", places)


async def step_seeds(students: list[load_client.Student], until: float, think_s: float = 0.5) -> list[float]:
    """Each student steps its seed, with a short pause, until `until`; every rerun's seconds."""
    times: list[float] = []

    async def one(student: load_client.Student) -> None:
        while time.monotonic() < until:
            student.set_seed(student.seed + 1)
            seconds, view = await student.rerun(load_client.Action.SEED)
            assert not student.problems(view), student.problems(view)
            times.append(seconds)
            await asyncio.sleep(think_s)

    await asyncio.gather(*(one(s) for s in students))
    return times


async def measure(url: str, pid: int, steps: int) -> dict:
    warm = await open_student(url, 50, "training_lab", 10, widest=False)  # torch's first training calls
    await press_train(warm, timeout_s=300)
    await load_client.close(warm)
    alone_student = await open_student(url, 0, "training_lab", steps)
    alone = await press_train(alone_student, timeout_s=300)
    await load_client.close(alone_student)
    others = [await open_student(url, 100 + i, OTHER_PAGE, steps, load_client.Student) for i in range(OTHERS)]
    idle = await step_seeds(others, until=time.monotonic() + 15)
    pressers = [await open_student(url, 1 + i, "training_lab", steps) for i in range(PRESSERS)]

    rss_before = rss_mib(pid)
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM from here on: the queue's peak
    started = time.monotonic()
    shown: list[list[str]] = [[] for _ in pressers]  # each presser's progress texts
    presses = [
        asyncio.create_task(press_train(s, PRESSERS * alone.seconds * 3, texts))
        for s, texts in zip(pressers, shown, strict=True)
    ]
    first = await next(asyncio.as_completed(presses))  # the first student whose run is on the page
    window_end = time.monotonic() + alone.seconds  # and one more run's time while the queue works
    busy = await step_seeds(others, until=window_end)
    finished = [p.result() for p in presses if p.done() and not p.exception()]
    peak = rss_mib(pid, "VmHWM")
    places = [max((int(m.group(1)) for t in texts if (m := PLACE.search(t))), default=0) for texts in shown]
    told = [any(t.startswith(WAITING) for t in texts) for texts in shown]  # "you are next" counts too
    last_wait = next((t for t in reversed(shown[-1]) if t.startswith(WAITING)), "")

    # Every presser closes its tab: their queued runs must go, the running one must stop.
    for task in presses:
        task.cancel()
    await asyncio.gather(*presses, return_exceptions=True)
    for student in pressers:
        await load_client.close(student)
    await asyncio.sleep(2.0)  # the queue checks its sessions about once a second
    cpu_before, clock = cpu_seconds(pid), time.monotonic()
    await asyncio.sleep(5.0)
    cpu_after_close = (cpu_seconds(pid) - cpu_before) / (time.monotonic() - clock)
    for student in others:
        await load_client.close(student)

    return {
        "load_average_1min": round(os.getloadavg()[0], 1),  # other work on the machine (2 cores) meanwhile
        "pressers": PRESSERS,
        "others": OTHERS,
        "steps_asked": steps,
        "run": alone.run_label,
        "alone_s": round(alone.seconds, 2),
        "first_result_s": round(first.seconds, 2),
        "first_vs_alone": round(first.seconds / alone.seconds, 2),
        "finished_in_window": len(finished),
        "window_s": round(window_end - started, 1),
        "rss_before_mib": round(rss_before, 1),
        "peak_rss_mib": round(peak, 1),
        "peak_growth_mib": round(peak - rss_before, 1),
        "others_idle_median_s": round(statistics.median(idle), 3),
        "others_busy_median_s": round(statistics.median(busy), 3),
        "others_slowdown": round(statistics.median(busy) / statistics.median(idle), 2),
        "others_reruns": [len(idle), len(busy)],
        "largest_place_shown": max(places),
        "pressers_shown_a_place": sum(told),
        "last_presser_saw": last_wait,
        "server_cpu_after_tabs_closed": round(cpu_after_close, 2),
    }


COMPARE = "Scaled vs unscaled"
TABS = 10
HONEST_LIMIT_S = 90.0  # the honest run is waited for this long at most (keeps the row short)


async def measure_fair(url: str, steps: int) -> dict:
    """Issue 31's row: an honest default run behind ten tabs of widest compares (module docstring)."""
    warm = await open_student(url, 50, "training_lab", 10, widest=False)
    await press_train(warm, timeout_s=300)
    await load_client.close(warm)
    honest_alone = await open_student(url, 60, "training_lab", 300, widest=False)
    alone = await press_train(honest_alone, timeout_s=300)
    await load_client.close(honest_alone)
    others = [await open_student(url, 100 + i, OTHER_PAGE, steps, load_client.Student) for i in range(OTHERS)]
    idle = await step_seeds(others, until=time.monotonic() + 10)
    tabs = [await open_student(url, 1 + i, "training_lab", steps) for i in range(TABS)]
    presses = [asyncio.create_task(press_train(tab, 600, button=COMPARE)) for tab in tabs]
    await asyncio.sleep(2.0)  # the twenty runs are queued (one is training)
    honest = await open_student(url, 61, "training_lab", 300, widest=False)
    texts: list[str] = []
    busy_task = asyncio.create_task(step_seeds(others, until=time.monotonic() + 20))
    try:
        pressed: Pressed | None = await press_train(honest, timeout_s=HONEST_LIMIT_S, texts=texts)
    except TimeoutError:  # the old first-come queue: place 20, ~10 minutes; not waited for here
        pressed = None
    busy = await busy_task
    for task in presses:
        task.cancel()
    await asyncio.gather(*presses, return_exceptions=True)
    for student in [*tabs, honest, *others]:
        await load_client.close(student)
    return {
        "load_average_1min": round(os.getloadavg()[0], 1),
        "tabs_pressing_compare": TABS,
        "steps_asked_widest": steps,
        "default_run_alone_s": round(alone.seconds, 2),
        "default_run_behind_compares_s": round(pressed.seconds, 2) if pressed else f"over {HONEST_LIMIT_S:.0f}",
        "default_run_waited_s": round(max(0.0, pressed.seconds - alone.seconds), 2) if pressed else None,
        "default_run_first_text": next((t for t in texts if t.startswith(WAITING)), ""),
        "others_idle_median_s": round(statistics.median(idle), 3),
        "others_busy_median_s": round(statistics.median(busy), 3),
        "others_slowdown": round(statistics.median(busy) / statistics.median(idle), 2),
        "others_reruns": [len(idle), len(busy)],
    }


def run_fair(steps: int = MAX_STEPS_ASKED) -> dict:
    process, url = start_server()
    try:
        return asyncio.run(measure_fair(url, steps))
    finally:
        process.terminate()
        process.wait(timeout=30)


def run(quick: bool = False) -> dict:
    process, url = start_server()
    try:
        return asyncio.run(measure(url, process.pid, QUICK_STEPS if quick else MAX_STEPS_ASKED))
    finally:
        process.terminate()
        process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="runs cut to a few steps")
    parser.add_argument("--fair", action="store_true", help="issue 31's row: a default run behind ten compares")
    arguments = parser.parse_args()
    print(json.dumps(run_fair() if arguments.fair else run(arguments.quick), indent=2))


if __name__ == "__main__":
    main()
