"""Students per core: step a simulated class up until one server process on one core falls behind.

    python -m bench.capacity                      # 25, 50, 100, 150, 200, 250, 300 students, 60 s each
    python -m bench.capacity --steps 25,50 --seconds 20

For each step a fresh `streamlit run` is pinned to core 0 (`taskset -c 0`) and this process, the
load client (bench/load_client.py), to core 1, so the client never takes the server's CPU. A step
*holds* when the p95 of the students' changes (seed steps and page switches, sent once the whole
class has arrived) is under P95_TARGET_S and nothing went wrong (no error, no wrong number).
Capacity is the largest step that holds; stepping stops once a step is clearly overloaded
(p95 over STOP_P95_S), so that on a noisy shared machine one unlucky step does not end the curve.
Also recorded per step: the server's CPU time per change (from /proc), its peak memory, and the
CPU-bound ceiling those imply: the class size at which the core would be busy all the time,
1 / (CPU per change x changes per student per second). The ceiling depends little on what else
runs on the machine; the measured capacity does (README "Scaling out").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench import load_client
from bench.harness import start_server

P95_TARGET_S = 1.0
STOP_P95_S = 5.0  # a step this slow is overloaded: larger classes would only be slower
STEPS = (25, 50, 100, 150, 200, 250, 300)
SERVER_CPU = "0"  # taskset's core list for the server
CLIENT_CPU = 1  # the core this process (the client) moves to
TICKS = os.sysconf("SC_CLK_TCK")


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


def measure(students: int, seconds: float, env: dict[str, str] | None = None) -> Step:
    """One step: a fresh pinned server, `students` students for `seconds` after their arrival."""
    process, url = start_server(env=env, cpus=SERVER_CPU if (os.cpu_count() or 1) > 1 else None)
    try:
        asyncio.run(load_client.warm_up(url))  # imports and first runs, before the class arrives
        arrival_s = min(0.1 * students, 20.0)
        settle_s = arrival_s + 5.0  # count changes once everyone has arrived and opened the link
        cpu_before, clock_before, client_before = None, None, None

        async def mark_start(_recorder) -> None:
            nonlocal cpu_before, clock_before, client_before
            await asyncio.sleep(settle_s)
            cpu_before, clock_before, client_before = cpu_seconds(process.pid), time.monotonic(), time.process_time()

        async def whole_class() -> load_client.ClassResult:
            marker = asyncio.create_task(mark_start(None))
            result = await load_client.run_class(url, students, settle_s + seconds, arrival_s=arrival_s)
            await marker
            return result

        result = asyncio.run(whole_class())
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


def run(steps: tuple[int, ...] = STEPS, seconds: float = 60.0, env: dict[str, str] | None = None) -> dict:
    """Step the class up; stop after the first step that does not hold. Returns a JSON-ready dict."""
    pin_client()
    measured: list[Step] = []
    for students in steps:
        step = measure(students, seconds, env)
        measured.append(step)
        print(f"{students:4d} students: p50 {step.p50_s:.3f} s, p95 {step.p95_s:.3f} s, "
              f"{step.changes_per_s:.1f} changes/s, server {step.server_cpu_busy:.0%} busy, "
              f"{step.server_cpu_ms_per_change} ms CPU/change (ceiling {step.cpu_ceiling_students} students), "
              f"errors {step.errors}, mismatches {step.mismatches}, server on cores {step.server_cpus}, "
              f"client {step.client_cpu_busy:.0%} busy",
              flush=True)  # fmt: skip
        if step.p95_s > STOP_P95_S or step.errors:
            break
    held = [s.students for s in measured if s.holds]
    return {
        "students_per_core": max(held) if held else 0,
        # at the largest class that held (or the first step): cost and pace of a class that is keeping up
        "cpu_ceiling_students": ([s for s in measured if s.holds] or measured)[-1].cpu_ceiling_students,
        "p95_target_s": P95_TARGET_S,
        "seconds_per_step": seconds,
        "think_median_s": load_client.THINK_MEDIAN_S,
        "think_sigma": load_client.THINK_SIGMA,
        "page_switch_p": load_client.PAGE_SWITCH_P,
        "steps": [{**asdict(s), "holds": s.holds, "cpu_ceiling_students": s.cpu_ceiling_students} for s in measured],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default=",".join(map(str, STEPS)), help="class sizes, comma-separated")
    parser.add_argument("--seconds", type=float, default=60.0, help="measured seconds per step, after arrival")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # a `kill` stops the server it started too
    result = run(tuple(int(n) for n in args.steps.split(",")), args.seconds)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
