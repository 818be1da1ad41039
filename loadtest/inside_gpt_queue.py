"""Twenty students type their own prompts into lesson 10 at once: the GPT's work on a real server (issue 40).

    python -m loadtest.inside_gpt_queue            # ~2.5 minutes: 60 s of load
    python -m loadtest.inside_gpt_queue --quick    # ~1.5 minutes: 30 s of load

One `streamlit run` on loopback (127.0.0.1 only), driven over its websocket (loadtest/load_client.py),
in one run, so that every figure is a ratio of times measured side by side on the same server:
0. warm-up: lesson 10 opened once with its default example (the model loads, the example is computed)
   and the multi-head page once;
1. idle: OTHERS students rerun for IDLE_S seconds: half step the seed on the multi-head page, half read
   lesson 10's default example and change its top-k filter (no new model run) -> their median rerun with
   nobody prompting;
   NEWCOMERS_IDLE new students open lesson 10's default example, one after the other -> its idle open time;
2. load: PROMPTERS students each open lesson 10 with their own prompt (a distinct text, 15-30 tokens: the
   prompt's analysis is new work; the RoPE check and the KV cache are lesson 12's since it split off), wait
   for the page, then open the next distinct prompt (at most PROMPTS_EACH), for LOAD_S seconds; meanwhile the
   OTHERS go on rerunning and, every NEWCOMER_EVERY_S, a new student opens lesson 10's default example.
   Measured: (a) the OTHERS' reruns, median and p95, over their idle median (target: at most 2x); (b) the
   newcomers' open time (target: at most 3 s); the places the waiting prompters were shown;
3. the prompters close their tabs; SETTLE_S later the server's RSS is read: (c) its peak (VmHWM over the whole
   run) and its final RSS (target: both under 1 GiB).
Every loop is bounded by a count and a deadline, and every client stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import json
import os
import random
import re
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

from loadtest import load_client
from testkit.harness import percentile, start_server

PROMPTERS = 20
PROMPTS_EACH = 10  # each prompter's distinct prompts, at most: 200 in all
OTHERS = 4  # half on the multi-head page, half reading lesson 10's default example
NEWCOMERS_IDLE = 3
NEWCOMER_EVERY_S = 6.0
IDLE_S = 15.0
LOAD_S = 60.0
SETTLE_S = 10.0
THINK_S = 0.5  # the OTHERS' pause between two reruns
PROMPT_PAUSE_S = 1.0  # a prompter's pause before its next prompt
RUN_LIMIT_S = 150.0  # one run's limit (a prompt's run waits in the queue on a busy server)
PAGE = "inside_gpt"
OTHER_PAGE = "multi_head"
PLACE = re.compile(r"place (\d+)")
ANALYSED = "tokens, as the model reads them"  # lesson 10's caption above the tokens, once the prompt is analysed
TOP_KS = ("0", "5", "20", "50")  # lesson 10's top-k choices, as its select box labels them
# Words for the prompters' texts: seeded, so both runs (before and after a change) send the same prompts.
WORDS = re.findall(
    r"\w+",
    "the a little old young quiet bright river mountain city garden teacher student robot cat dog bird "
    "walked found painted counted remembered built asked wrote under over near behind before after "
    "because while every morning evening story question number colour winter summer",
)


def prompt_text(student: int, index: int) -> str:
    """Student `student`'s `index`-th prompt: 6 to 20 words (about 15 to 30 tokens), distinct from every other one
    (its numbers). Under 32 tokens: the 270-head grid of a longer prompt can exceed Streamlit's 2 MB message."""
    rng = random.Random(1000 * student + index)
    words = [rng.choice(WORDS) for _ in range(rng.randint(6, 20))]
    return f"Student {student}, prompt {index}: " + " ".join(words)


@dataclass
class GptStudent(load_client.Student):
    """A student on lesson 10 whose link carries its own prompt ("" for the default example)."""

    text: str = ""

    @property
    def query_string(self) -> str:
        return urlencode({"gpt_prompt": "own", "gpt_text": self.text}) if self.text else ""

    def set_seed(self, seed: int) -> None:
        """Change lesson 10's top-k filter (a rerun that needs no new model run: the sampling seed would, as
        the generation reads it)."""
        self.seed = seed
        for widget_id, state in self.view.widgets.items():
            if widget_id.endswith("-gpt_top_k"):
                state.string_value = TOP_KS[seed % len(TOP_KS)]

    def problems(self, view: load_client.RunView) -> list[str]:
        return list(view.problems)  # exceptions and error boxes (the page shows no sidebar seed)


def rss_mib(pid: int, field_name: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def progress_texts(view: load_client.RunView) -> list[str]:
    return [t for t in view.texts if PLACE.search(t)]


# A prompter's progress texts, also of a run cut short at the end (each prompter is its own asyncio task).
SHOWN: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("shown", default=None)


def read_progress_too(read=load_client.read_message):
    """load_client's reader, which keeps markdown and notes, plus the progress bars' texts (a queue's place)."""

    def read_message(message, view: load_client.RunView) -> None:
        read(message, view)
        if message.WhichOneof("type") != "delta":
            return
        element, shown = message.delta.new_element, SHOWN.get()
        if element.WhichOneof("type") == "progress":
            view.texts.append(element.progress.text)
            if shown is not None:
                shown.append(element.progress.text)
        elif shown is not None and element.WhichOneof("type") == "markdown" and ANALYSED in element.markdown.body:
            shown.append(ANALYSED)  # the prompt's analysis is on the page (its tokens' caption)

    return read_message


async def open_student(url: str, index: int, page: str, text: str = "") -> load_client.Student:
    """A new tab on `page` (lesson 10 with `text` as its own prompt, or the default example): opened, run once."""
    if page == PAGE:
        rng = random.Random(index)
        student: load_client.Student = GptStudent(index, url, time.monotonic(), rng, page, 0, text=text)
    else:
        student = load_client.Student(index, url, time.monotonic(), random.Random(index), page, 1000 * (index + 1))
    await student.connect()
    return student


async def timed_open(url: str, index: int, text: str = "") -> tuple[float, list[str], list[str]]:
    """A new student opens lesson 10: (seconds from the rerun sent to its end, problems, progress texts)."""
    student = await open_student(url, index, PAGE, text)
    try:
        seconds, view = await student.rerun(load_client.Action.OPEN)
        return seconds, student.problems(view), progress_texts(view)
    finally:
        await load_client.close(student)


async def rerun_loop(students: list[load_client.Student], until: float) -> dict[str, list[float]]:
    """Each student reruns (steps its seed) with a short pause until `until`; seconds per page."""
    times: dict[str, list[float]] = {}
    problems: list[str] = []

    async def one(student: load_client.Student) -> None:
        while time.monotonic() < until:
            student.set_seed(student.seed + 1)
            seconds, view = await student.rerun(load_client.Action.SEED)
            problems.extend(student.problems(view))
            times.setdefault(student.page, []).append(seconds)
            await asyncio.sleep(THINK_S)

    await asyncio.gather(*(one(s) for s in students))
    if problems:
        times["problems"] = [float(len(problems))]
        print("others' problems:", problems[:5])
    return times


@dataclass
class Prompting:
    """What the prompters saw."""

    finished: list[float] = field(default_factory=list)  # seconds per prompt run that ended
    timed_out: int = 0
    places: list[int] = field(default_factory=list)  # the largest place each waiting run was shown
    shown_a_place: int = 0  # runs that showed a place in the queue (finished or cut at the end)
    runs: int = 0  # prompt runs started
    analysed: int = 0  # runs whose analysis reached the page (finished or cut at the end)
    problems: list[str] = field(default_factory=list)
    last_text: str = ""


async def within(student: load_client.Student, run, seconds: float):
    """`await run`, or None after `seconds`: then the student's tab closes (asyncio.wait_for on Python 3.11 can
    swallow its own cancellation when the awaited receive completes at the same moment, and the run went on)."""
    task = asyncio.ensure_future(run)
    done, _ = await asyncio.wait({task}, timeout=max(seconds, 0.0))
    if task in done:
        return task.result()
    await load_client.close(student)  # the run's receive fails, as a browser's does when its tab closes
    task.cancel()
    with contextlib.suppress(BaseException):
        await task
    return None


async def prompter(url: str, index: int, until: float, seen: Prompting) -> None:
    """Open distinct prompts one after the other until `until` (each in a new tab), at most PROMPTS_EACH."""
    texts: list[str] = []
    SHOWN.set(texts)  # this task's own context: read_progress_too adds the bars' texts here
    for number in range(PROMPTS_EACH):
        if time.monotonic() >= until:
            return
        texts.clear()
        seen.runs += 1
        student = await open_student(url, index, PAGE, prompt_text(index, number))
        try:
            ran = await within(student, student.rerun(load_client.Action.OPEN), until - time.monotonic())
            if ran is None:
                seen.timed_out += 1
            else:
                seen.finished.append(ran[0])
                seen.problems.extend(student.problems(ran[1]))
        finally:
            await load_client.close(student)
            seen.analysed += ANALYSED in texts
            places = [int(m.group(1)) for t in texts if (m := PLACE.search(t))]
            if places:
                seen.shown_a_place += 1
                seen.places.append(max(places))
                seen.last_text = next(t for t in reversed(texts) if PLACE.search(t))
        await asyncio.sleep(PROMPT_PAUSE_S)


def summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "median_s": round(statistics.median(values), 3),
        "p95_s": round(percentile(values, 0.95), 3),
        "max_s": round(max(values), 3),
    }


async def measure(url: str, pid: int, load_s: float) -> dict:
    load_client.RUN_TIMEOUT_S = RUN_LIMIT_S  # a queued run may send nothing for a while on the old code
    load_client.read_message = read_progress_too()  # this process only: the waiting students' places
    for page in (PAGE, OTHER_PAGE):  # the model loads, the default example is computed
        warm = await open_student(url, -1, page)
        await warm.rerun(load_client.Action.OPEN)
        await load_client.close(warm)
    idle_rss = rss_mib(pid)
    others = [await open_student(url, 100 + i, OTHER_PAGE if i % 2 == 0 else PAGE) for i in range(OTHERS)]
    for student in others:
        await student.rerun(load_client.Action.OPEN)
    idle = await rerun_loop(others, time.monotonic() + IDLE_S)
    idle_opens = [await timed_open(url, 200 + i) for i in range(NEWCOMERS_IDLE)]

    started = time.monotonic()
    until = started + load_s
    seen = Prompting()
    prompters = [asyncio.create_task(prompter(url, i, until, seen)) for i in range(PROMPTERS)]
    busy_task = asyncio.create_task(rerun_loop(others, until))
    newcomers: list[tuple[float, list[str], list[str]]] = []
    number = 0
    while time.monotonic() + NEWCOMER_EVERY_S < until:
        await asyncio.sleep(NEWCOMER_EVERY_S)
        newcomers.append(await timed_open(url, 300 + number))
        number += 1
    busy = await busy_task
    await asyncio.gather(*prompters, return_exceptions=True)
    load_end_rss = rss_mib(pid)
    for student in others:
        await load_client.close(student)
    await asyncio.sleep(SETTLE_S)  # the tabs are closed: what the server keeps
    final_rss, peak_rss = rss_mib(pid), rss_mib(pid, "VmHWM")

    groups = {}
    for page_name in (OTHER_PAGE, PAGE):
        idle_median = statistics.median(idle[page_name])
        busy_values = busy.get(page_name, [])
        groups[page_name] = {
            "idle": summary(idle[page_name]),
            "busy": summary(busy_values),
            "median_ratio": round(statistics.median(busy_values) / idle_median, 2) if busy_values else None,
            "p95_ratio": round(percentile(busy_values, 0.95) / idle_median, 2) if busy_values else None,
        }
    newcomer_seconds = [s for s, _, _ in newcomers]
    return {
        "load_average_1min": round(os.getloadavg()[0], 1),  # other work on the machine meanwhile
        "cores": len(os.sched_getaffinity(0)),
        "prompters": PROMPTERS,
        "load_s": load_s,
        "a_others_reruns": groups,
        "a_worst_median_ratio": max(g["median_ratio"] or 0 for g in groups.values()),
        "b_newcomer_open_idle": summary([s for s, _, _ in idle_opens]),
        "b_newcomer_open_busy": summary(newcomer_seconds),
        "b_newcomers_shown_a_place": sum(bool(p) for _, _, p in newcomers),
        "c_rss_mib": {
            "idle": round(idle_rss, 1),
            "end_of_load": round(load_end_rss, 1),
            "peak": round(peak_rss, 1),
            "final": round(final_rss, 1),
        },
        "prompt_runs_started": seen.runs,
        "prompt_runs_analysed": seen.analysed,
        "prompt_runs_finished": summary(seen.finished),
        "prompt_runs_cut_at_the_end": seen.timed_out,
        "prompt_runs_shown_a_place": seen.shown_a_place,
        "largest_place_shown": max(seen.places, default=0),
        "a_waiting_prompter_saw": seen.last_text,
        "problems": len(seen.problems) + sum(len(p) for _, p, _ in [*idle_opens, *newcomers]),
        "problem_examples": (seen.problems + [q for _, p, _ in newcomers for q in p])[:3],
    }


def run(load_s: float = LOAD_S) -> dict:
    process, url = start_server()
    try:
        return asyncio.run(measure(url, process.pid, load_s))
    finally:
        process.terminate()
        with contextlib.suppress(Exception):
            process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="30 s of load instead of 60")
    arguments = parser.parse_args()
    print(json.dumps(run(LOAD_S / 2 if arguments.quick else LOAD_S), indent=2))


if __name__ == "__main__":
    main()
