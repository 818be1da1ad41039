"""A class on a cold server: how long the first student to open lessons 10, 7 and 11 waits (issue 40).

    python -m loadtest.cold_open              # ~6 minutes: six fresh servers, one busy core
    python -m loadtest.cold_open --talk 60    # the teacher talks 60 s on the overview (default 30)

For each of lessons 10, 7 and 11, two fresh `streamlit run` servers on loopback, one after the other, in one
run, each with BUSY busy loops beside it (a class's server is never idle):
- "warm-up": the teacher opens the overview, as a class starts (it starts lessons 10 and 11's default views
  and lesson 7's translator in the background, ui.cache.warm_up_from_overview), and talks for TALK_S seconds;
  then a student opens the lesson (lesson 10 at its default example), timed from its rerun to its end; then
  a second student (warm: everything computed);
- "no warm-up": the same with ATTENTION_LAB_WARM_UP=0 (the overview starts nothing, as before the change).
Each lesson's row: its first open in both arms and its warm open, and the first over the warm (the target of
issue 40: a new student opening lesson 10's default example waits at most 3 s).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import subprocess
import sys
import time

from loadtest import load_client
from loadtest.inside_gpt_queue import GptStudent
from testkit.harness import start_server

TALK_S = 30.0  # the teacher on the overview before the first student opens a lesson
BUSY = 1  # busy loops beside the server: one of a 2-core class server's cores taken by something else
LESSONS = ("inside_gpt", "cross_attention", "to_the_answer")  # the cold opens issue 40 names
OPEN_LIMIT_S = 300.0  # one open's longest wait for the server's next message (a cold lesson 10 took 94 s)


def student(url: str, page: str, index: int) -> load_client.Student:
    if page == "inside_gpt":  # its default example (no prompt of its own in the link)
        return GptStudent(index, url, time.monotonic(), random.Random(index), page, 0)
    return load_client.Student(index, url, time.monotonic(), random.Random(index), page, 123)


async def timed_open(url: str, page: str, index: int) -> tuple[float, int]:
    """A new tab on `page`: (seconds from its first rerun to the run's end, problems shown)."""
    tab = student(url, page, index)
    await tab.connect()
    try:
        seconds, view = await tab.rerun(load_client.Action.OPEN)
        return seconds, len(view.problems)
    finally:
        await load_client.close(tab)


async def one_class(url: str, page: str, talk_s: float) -> dict[str, float | int]:
    load_client.RUN_TIMEOUT_S = OPEN_LIMIT_S
    overview_s, problems = await timed_open(url, "overview", 0)
    await asyncio.sleep(talk_s)
    first, found = await timed_open(url, page, 1)
    warm, found_warm = await timed_open(url, page, 2)
    return {"overview_s": overview_s, "first_s": first, "warm_s": warm, "problems": problems + found + found_warm}


def measure(page: str, warm_up: bool, talk_s: float, busy: int) -> dict[str, float | int]:
    """A fresh server for one lesson's first open: lessons 10 and 11 start each other's default views (both run
    ui.gpt_queue.warm_up), so a lesson opened after another on the same server would not be its first open."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    process, url = start_server(env={"ATTENTION_LAB_WARM_UP": "1" if warm_up else "0"}, timeout_s=120)
    try:
        return asyncio.run(one_class(url, page, talk_s))
    finally:
        process.terminate()
        with contextlib.suppress(Exception):
            process.wait(timeout=30)
        for loop in loops:
            loop.kill()


def run(talk_s: float = TALK_S, busy: int = BUSY) -> dict[str, object]:
    rows, problems, overview = {}, 0, []
    for page in LESSONS:
        with_warm_up, without = measure(page, True, talk_s, busy), measure(page, False, talk_s, busy)
        rows[page] = {
            "first_open_s": round(with_warm_up["first_s"], 2),
            "first_open_without_warm_up_s": round(without["first_s"], 2),
            "warm_open_s": round(with_warm_up["warm_s"], 2),
            "first_over_warm": round(with_warm_up["first_s"] / with_warm_up["warm_s"], 2),
            "without_over_with": round(without["first_s"] / with_warm_up["first_s"], 2),
        }
        problems += int(with_warm_up["problems"]) + int(without["problems"])
        overview += [with_warm_up["overview_s"], without["overview_s"]]
    return {
        "cores": len(os.sched_getaffinity(0)),
        "busy_loops": busy,
        "talk_s": talk_s,
        "lessons": rows,
        "overview_open_s": {"min": round(min(overview), 2), "max": round(max(overview), 2)},
        "problems": problems,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--talk", type=float, default=TALK_S, help="seconds on the overview before the lessons")
    parser.add_argument("--busy", type=int, default=BUSY, help="busy loops beside the server")
    arguments = parser.parse_args()
    print(json.dumps(run(arguments.talk, arguments.busy), indent=2))


if __name__ == "__main__":
    main()
