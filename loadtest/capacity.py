"""Students per core, ours and the reference page's: step a class up until one server on one core falls behind.

    python -m loadtest.capacity                      # 25, 50, 100, 150, 200, 250, 300 students, 60 s each
    python -m loadtest.capacity --steps 25,50 --seconds 20
    python -m loadtest.capacity --table              # 50, 100, 150 and 200 students, every step, side by side

Two apps are measured in the same run, step by step, one after the other at each class size:
Attention Lab (streamlit_app.py) and the reference page (loadtest/reference_page.py: one slider,
one 6x6 heatmap), with the same students, the same think times (the same random draws) and the
same pinning, so that their ratio cancels most of what the machine adds. A reference student
moves the slider where a lesson student steps the seed, switches page or answers a question (a
lesson student answers each predict question a page shows before anything else there, and what
the answer unlocks is checked on the answer's run: loadtest/load_client.py).

For each step a fresh `streamlit run` is pinned to core 0 (`taskset -c 0`) and this process, the
load client (loadtest/load_client.py), to core 1, so the client never takes the server's CPU. A step
*holds* when the p95 of the students' changes (seed steps, page switches and answers, sent once the
whole class has arrived) is under P95_TARGET_S and nothing went wrong (no error, no wrong number).
Capacity is the largest step that holds; stepping stops once a step is clearly overloaded
(p95 over STOP_P95_S), so that on a noisy shared machine one unlucky step does not end the curve.
Also recorded per step: the server's CPU time per change (from /proc), its peak memory, and the
CPU-bound ceiling those imply: the class size at which the core would be busy all the time,
1 / (CPU per change x changes per student per second). The ceiling depends little on what else
runs on the machine; the measured capacity does (README "Scaling out").

The run ends with both apps side by side, one row per class size (`table`): p50 and p95 ours and
the reference's, our CPU per change over the reference's, errors, mismatches, and the runs checked
whole (every question on the page answered: a check that ran, not one that found nothing to read).
`--table` measures TABLE_STEPS and every one of them, overloaded or not.
"""

from __future__ import annotations

import argparse
import asyncio
import enum
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from loadtest import load_client
from testkit.harness import start_server

P95_TARGET_S = 1.0
STOP_P95_S = 5.0  # a step this slow is overloaded: larger classes would only be slower
STEPS = (25, 50, 100, 150, 200, 250, 300)
TABLE_STEPS = (50, 100, 150, 200)  # --table: the class sizes compared side by side
SERVER_CPU = "0"  # taskset's core list for the server
CLIENT_CPU = 1  # the core this process (the client) moves to
TICKS = os.sysconf("SC_CLK_TCK")


class App(enum.StrEnum):
    """The two apps a capacity run compares."""

    LAB = "lab"  # Attention Lab, streamlit_app.py
    REFERENCE = "reference"  # loadtest/reference_page.py


SCRIPTS = {App.LAB: "streamlit_app.py", App.REFERENCE: "loadtest/reference_page.py"}
STUDENTS = {App.LAB: load_client.Student, App.REFERENCE: load_client.ReferenceStudent}
WARM_UP_PAGES = {App.LAB: ("trainable_weights",), App.REFERENCE: ("overview",)}


@dataclass(frozen=True)
class Step:
    """One class size, measured: p50/p95 of the changes after arrival, errors, server cost."""

    students: int
    changes: int
    changes_per_s: float
    p50_s: float
    p95_s: float
    max_s: float
    open_p95_s: float
    errors: int
    mismatches: int
    checked: int  # the class's runs checked whole: every question on the page answered (RunView.complete)
    answers: int  # of the changes, answers to predict questions (none on the reference page)
    server_cpu_ms_per_change: float
    server_cpu_busy: float  # fraction of the server's core in use during the class
    server_peak_rss_mib: float
    server_cpus: str  # the cores the server was allowed to use (checked, not assumed)
    client_cpu_busy: float  # fraction of its core the load client used: near 1, it would time itself
    examples: tuple[str, ...]  # the first few errors or mismatches, if any

    @property
    def holds(self) -> bool:
        return self.p95_s < P95_TARGET_S and self.errors == 0 and self.mismatches == 0

    @property
    def cpu_ceiling_students(self) -> int:
        """Students at which the server's core would be 100% busy, at this step's cost and pace."""
        per_student = self.changes_per_s / self.students
        return int(1000 / (self.server_cpu_ms_per_change * per_student)) if per_student > 0 else 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14 and 15 of stat)


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pin_client() -> None:
    """Move this process (the load client) off the server's core, where the machine has two."""
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > CLIENT_CPU:
        os.sched_setaffinity(0, {CLIENT_CPU})


def measure(
    students: int, seconds: float, env: dict[str, str] | None = None, app: App = App.LAB, profile: Path | None = None
) -> Step:
    """One step: a fresh pinned server of `app`, `students` students for `seconds` after their arrival.

    `profile`: py-spy samples the server over the measured seconds into this file (collapsed stacks,
    `python -m loadtest.profile_summary` reads them); py-spy runs on the client's core.
    """
    cpus = SERVER_CPU if (os.cpu_count() or 1) > 1 else None
    process, url = start_server(env=env, cpus=cpus, script=SCRIPTS[app])
    student_class = STUDENTS[app]
    try:
        asyncio.run(load_client.warm_up(url, WARM_UP_PAGES[app], student_class))  # imports and first runs
        arrival_s = min(0.1 * students, 20.0)
        settle_s = arrival_s + 5.0  # count changes once everyone has arrived and opened the link
        cpu_before, clock_before, client_before = None, None, None
        spy: subprocess.Popen | None = None

        async def mark_start(_recorder) -> None:
            nonlocal cpu_before, clock_before, client_before, spy
            await asyncio.sleep(settle_s)
            cpu_before, clock_before, client_before = cpu_seconds(process.pid), time.monotonic(), time.process_time()
            if profile is not None:
                spy = start_profiler(process.pid, seconds, profile)

        async def whole_class() -> load_client.ClassResult:
            marker = asyncio.create_task(mark_start(None))
            result = await load_client.run_class(
                url, students, settle_s + seconds, arrival_s=arrival_s, student_class=student_class
            )
            await marker
            return result

        result = asyncio.run(whole_class())
        if spy is not None:
            spy.wait(timeout=seconds + 60)
        cpu_used = cpu_seconds(process.pid) - cpu_before
        wall = time.monotonic() - clock_before
        client_used = time.process_time() - client_before
        summary = result.summary(after_s=settle_s)
        problems = result.errors + result.mismatches
        return Step(
            students=students,
            changes=summary["changes"],
            changes_per_s=summary["changes_per_s"],
            p50_s=summary["p50_s"],
            p95_s=summary["p95_s"],
            max_s=summary["max_s"],
            open_p95_s=summary["open_p95_s"],
            errors=summary["errors"],
            mismatches=summary["mismatches"],
            checked=summary["checked"],
            answers=summary["answers"],
            server_cpu_ms_per_change=round(1000 * cpu_used / max(summary["changes"], 1), 1),
            server_cpu_busy=round(cpu_used / wall, 2),
            server_peak_rss_mib=round(peak_rss_mib(process.pid), 1),
            server_cpus=",".join(map(str, sorted(os.sched_getaffinity(process.pid)))),
            client_cpu_busy=round(client_used / wall, 2),
            examples=tuple(problems[:5]),
        )
    finally:
        process.terminate()
        process.wait(timeout=30)


def start_profiler(pid: int, seconds: float, output: Path) -> subprocess.Popen:
    """py-spy (installed from its wheel: requirements-dev.txt) sampling `pid` for `seconds`, 100 Hz."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    command = [spy, "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", "100"]
    command += ["--format", "raw", "--output", str(output), "--nonblocking"]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def summary(measured: list[Step]) -> dict:
    """One app's curve: the largest class that held, and the cost and pace there."""
    held = [s for s in measured if s.holds]
    best = (held or measured)[-1]  # the largest class that held (or the first step)
    return {
        "students_per_core": held[-1].students if held else 0,
        "held_every_step": len(held) == len(measured),  # then the capacity is at least the last step
        "cpu_ms_per_change": best.server_cpu_ms_per_change,
        "cpu_ceiling_students": best.cpu_ceiling_students,
        "steps": [{**asdict(s), "holds": s.holds, "cpu_ceiling_students": s.cpu_ceiling_students} for s in measured],
    }


def ratios(lab: list[Step], reference: list[Step]) -> dict:
    """Ours over the reference page's, at the class sizes both measured (the machine's noise cancels
    best between the two steps of one size, measured one after the other)."""
    pairs = [(a, b) for a in lab for b in reference if a.students == b.students]
    per_change = [a.server_cpu_ms_per_change / b.server_cpu_ms_per_change for a, b in pairs]
    p95 = [a.p95_s / b.p95_s for a, b in pairs if b.p95_s > 0]
    return {
        "students": [a.students for a, _ in pairs],
        "cpu_per_change": [round(r, 2) for r in per_change],
        "cpu_per_change_median": round(sorted(per_change)[len(per_change) // 2], 2) if per_change else None,
        "p95": [round(r, 2) for r in p95],
    }


def report(app: App, step: Step) -> None:
    print(f"{app:9s} {step.students:4d} students: p50 {step.p50_s:.3f} s, p95 {step.p95_s:.3f} s, "
          f"{step.changes_per_s:.1f} changes/s, server {step.server_cpu_busy:.0%} busy, "
          f"{step.server_cpu_ms_per_change} ms CPU/change (ceiling {step.cpu_ceiling_students} students), "
          f"errors {step.errors}, mismatches {step.mismatches} ({step.checked} runs checked whole, "
          f"{step.answers} answers), server on cores {step.server_cpus}, client {step.client_cpu_busy:.0%} busy",
          flush=True)  # fmt: skip


def table(lab: list[Step], reference: list[Step]) -> list[str]:
    """Ours and the reference page's side by side, one row per class size (Markdown lines): p50 and p95
    of the changes, our CPU per change over the reference's, then what went wrong in our class (errors,
    mismatches) and how many of its runs were checked whole. A size one app did not measure shows "-"."""
    ours = {s.students: s for s in lab}
    theirs = {s.students: s for s in reference}
    lines = [
        "| students | p50 ours / ref (s) | p95 ours / ref (s) | CPU per change ours / ref (ms) | CPU ratio "
        "| errors ours / ref | mismatches ours / ref | runs checked whole (answers) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for students in sorted(ours.keys() | theirs.keys()):
        a, b = ours.get(students), theirs.get(students)
        ratio = (
            f"{a.server_cpu_ms_per_change / b.server_cpu_ms_per_change:.2f}x"
            if a is not None and b is not None and b.server_cpu_ms_per_change > 0
            else "-"
        )
        checked = "-" if a is None else f"{a.checked} ({a.answers})"
        lines.append(
            f"| {students} | {_pair(a, b, 'p50_s')} | {_pair(a, b, 'p95_s')} "
            f"| {_pair(a, b, 'server_cpu_ms_per_change')} | {ratio} | {_pair(a, b, 'errors')} "
            f"| {_pair(a, b, 'mismatches')} | {checked} |"
        )
    return lines


def _pair(ours: Step | None, reference: Step | None, name: str) -> str:
    """One field of both steps, "ours / reference" ("-" for a step not measured; seconds to 2 decimals)."""
    cells = []
    for step in (ours, reference):
        value = None if step is None else getattr(step, name)
        cells.append("-" if value is None else f"{value:.2f}" if name.endswith("_s") else str(value))
    return " / ".join(cells)


def run(
    steps: tuple[int, ...] = STEPS, seconds: float = 60.0, env: dict[str, str] | None = None, *, stop: bool = True
) -> dict:
    """Step the class up, the reference page and ours at each size; an app stops after a step that is
    clearly overloaded (`stop=False`: never, every size is measured). Returns a JSON-ready dict: each
    app's curve, their ratios, and the side-by-side table's lines."""
    pin_client()
    measured: dict[App, list[Step]] = {App.LAB: [], App.REFERENCE: []}
    stopped: set[App] = set()
    for students in steps:
        for app in (App.REFERENCE, App.LAB):
            if app in stopped:
                continue
            step = measure(students, seconds, env, app)
            measured[app].append(step)
            report(app, step)
            if stop and (step.p95_s > STOP_P95_S or step.errors):
                stopped.add(app)
        if len(stopped) == len(App):
            break
    lab, reference = summary(measured[App.LAB]), summary(measured[App.REFERENCE])
    return {
        **lab,  # our app's curve at the top level, as before
        "reference": reference,
        "ratio": ratios(measured[App.LAB], measured[App.REFERENCE]),
        "load_average_1min": os.getloadavg()[0],  # other work on the machine (a busy machine inflates p95)
        "p95_target_s": P95_TARGET_S,
        "seconds_per_step": seconds,
        "think_median_s": load_client.THINK_MEDIAN_S,
        "think_sigma": load_client.THINK_SIGMA,
        "page_switch_p": load_client.PAGE_SWITCH_P,
        "table": table(measured[App.LAB], measured[App.REFERENCE]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default=",".join(map(str, STEPS)), help="class sizes, comma-separated")
    parser.add_argument("--seconds", type=float, default=60.0, help="measured seconds per step, after arrival")
    parser.add_argument(
        "--profile", type=Path, default=None, help="profile our app's server at the first step into this file"
    )
    parser.add_argument(
        "--table", action="store_true", help=f"measure {TABLE_STEPS} (or --steps), every step, side by side"
    )
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # a `kill` stops the server it started too
    steps = tuple(int(n) for n in args.steps.split(","))
    if args.table and args.steps == parser.get_default("steps"):
        steps = TABLE_STEPS
    if args.profile is not None:  # one step of our app only, sampled
        pin_client()
        step = measure(steps[0], args.seconds, app=App.LAB, profile=args.profile)
        report(App.LAB, step)
        return
    result = run(steps, args.seconds, stop=not args.table)
    print(json.dumps(result, indent=2))
    print("\n".join(result["table"]))


if __name__ == "__main__":
    main()
