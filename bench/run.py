"""Run every benchmark and regenerate the performance table and plots in bench/README.md.

    python -m bench.run                    # everything: ~35 minutes on 2 cores (capacity: two apps)
    python -m bench.run --quick            # fewer repeats, small classes (a smoke run)
    python -m bench.run --only capacity    # one part again; the rest is kept from bench/results.json
    python -m bench.run --only replicas
    python -m bench.run --only scale       # lesson 9: plain vs tiled memory, the KV cache, the page's rerun
    python -m bench.run --only none        # re-render the table and plots from bench/results.json
    python -m bench.run --only capacity,training_queue --quick --capacity-steps 25,50,100 --capacity-seconds 30

Writes bench/results.json, bench/results.md, bench/results.png (latency) and bench/capacity.png
(p50/p95 against students), and replaces the part of bench/README.md between the "bench:start" and
"bench:end" markers. CUDA timings are added when a GPU is present. The 40-tab browser load run
(loadtest/load.py) is no longer part of it: a browser per student measured Chromium, not the app;
CI keeps a small browser run as the end-to-end check (tests/deployment/test_load.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import signal
import sys
from pathlib import Path

import altair as alt
import pandas as pd
import torch

from bench import (
    attention_at_scale,
    attribution,
    core_speed,
    latency,
    monte_carlo,
    pretrained,
    real_model,
    smollm2,
    training,
)
from loadtest import (
    capacity,
    class_poll,
    cold_open,
    hostile_probe,
    inside_gpt_queue,
    memory,
    replicas,
    training_queue,
)

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"  # the tables live beside the benchmarks, not in the main README
START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    gpu = f", {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ""
    return f"{os.cpu_count()} cores ({cpu}), torch {torch.__version__}{gpu}"


# latency last: it runs the app in this process. capacity pins this process to core 1 while it runs.
PARTS = (
    "core", "monte_carlo", "real_model", "memory", "hostile", "training", "training_queue", "gpt_queue", "cold_open",
    "scale", "capacity", "replicas", "class_poll", "pretrained", "gpt", "attribution", "latency",
)  # fmt: skip


def run_all(
    quick: bool, only: set[str], capacity_steps: tuple[int, ...] | None = None, capacity_seconds: float | None = None
) -> dict:
    """Run the chosen parts; the others are kept from the previous bench/results.json.

    capacity_steps / capacity_seconds: a shorter capacity run than the full one (a busy machine)."""
    previous = HERE / "results.json"
    results: dict = json.loads(previous.read_text()) if only != set(PARTS) and previous.exists() else {}
    today = dt.date.today().isoformat()
    if only == set(PARTS):
        results["date"] = today
    # Each part's own date: a part run again later keeps the others' date honest in the table's first line.
    results["part_dates"] = {**results.get("part_dates", {}), **dict.fromkeys(only & set(PARTS), today)}
    results["machine"] = machine()
    if "core" in only:
        results["core_cpu"] = core_speed.run("cpu", repeats=2 if quick else 5)
        if torch.cuda.is_available():
            results["core_cuda"] = core_speed.run("cuda", repeats=10)
    if "monte_carlo" in only:
        results["monte_carlo"] = monte_carlo.run(100_000)
    if "real_model" in only:
        results["real_model"] = real_model.run(repeats=10 if quick else 30)
    if "memory" in only:
        results["memory"] = memory.run(count=30 if quick else 300)
    if "hostile" in only:
        results["hostile"] = hostile_probe.run(connections=8 if quick else 32)
    if "training" in only:
        results["training"] = training.run(quick)
    if "training_queue" in only:
        results["training_queue"] = training_queue.run(quick)
    if "gpt_queue" in only:
        results["gpt_queue"] = inside_gpt_queue.run(inside_gpt_queue.LOAD_S / 2 if quick else inside_gpt_queue.LOAD_S)
    if "cold_open" in only:
        results["cold_open"] = cold_open.run()
    if "scale" in only:
        results["scale"] = attention_at_scale.run(quick)
    if "capacity" in only:
        all_cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
        steps = capacity_steps or ((10, 25) if quick else capacity.STEPS)
        results["capacity"] = capacity.run(steps, seconds=capacity_seconds or (20 if quick else 60))
        if all_cores:
            os.sched_setaffinity(0, all_cores)  # the later parts get both cores back
    if "replicas" in only:
        run = replicas.run(replicas=2, students=4 if quick else 12, seconds=25 if quick else 40)
        results["replicas"] = run.summary()
    if "class_poll" in only:
        results["class_poll"] = class_poll.run(students=20 if quick else 100, answer_window_s=3.0).summary()
    if "pretrained" in only:
        results["pretrained"] = pretrained.run(repeats=5 if quick else 10)
    if "gpt" in only:
        results["gpt"] = smollm2.run(repeats=4 if quick else 10)
    if "attribution" in only:
        results["attribution"] = {
            "float32": attribution.run(repeats=3 if quick else 5),
            "app": attribution.run(repeats=3 if quick else 5, app=True),
        }
    if "latency" in only:
        results["latency"] = latency.run(repeats=5 if quick else 15)
    return results


def measured_line(results: dict) -> str:
    """The table's first line: the date of the full run, and the parts run again since on a later date."""
    later: dict[str, list[str]] = {}
    for part, date in results.get("part_dates", {}).items():
        if date != results["date"]:
            later.setdefault(date, []).append(part)
    again = "".join(
        f"; the {', '.join(parts)} rows {date} (`--only {','.join(parts)}`)" for date, parts in sorted(later.items())
    )
    return f"Measured {results['date']} on {results['machine']} (`python -m bench.run`){again}."


def table(results: dict) -> str:
    lat, core, mc = results["latency"], results["core_cpu"], results["monte_carlo"]
    worst_default = max(lat["pages"].items(), key=lambda kv: kv[1]["default_ratio"])
    worst_largest = max(lat["pages"].items(), key=lambda kv: kv[1]["largest_ratio"])
    ok = lambda good: "met" if good else "**not met**"  # noqa: E731
    rows = [
        (
            "Interaction latency, default settings (worst page, median rerun / reference)",
            f"{worst_default[1]['default_ratio']:.2f}x ({worst_default[0]})",
            "<= 4x",
            ok(worst_default[1]["default_ratio"] <= 4),
        ),
        (
            "Interaction latency, largest settings (worst page)",
            f"{worst_largest[1]['largest_ratio']:.2f}x ({worst_largest[0]})",
            "<= 12x",
            ok(worst_largest[1]["largest_ratio"] <= 12),
        ),
        (
            "Core speed: fused MultiHeadAttention / same projections + F.sdpa (CPU)",
            f"{core['fused_vs_sdpa']:.3f}",
            "<= 1.05 (within 5%)",
            ok(core["fused_vs_sdpa"] <= 1.05),
        ),
        (
            "Core speed: fused MultiHeadAttention / nn.MultiheadAttention (CPU)",
            f"{core['fused_vs_torch_mha']:.2f}",
            "(reported)",
            "",
        ),
        (
            "Traced path: time / fused, memory it keeps, extra peak RSS (CPU)",
            f"{core['traced_vs_fused']:.1f}x, {core['trace_kept_mib']:,.0f} MiB, "
            f"+{core['peak_extra_mib']['ours_traced']:,.0f} MiB",
            "(reported)",
            "",
        ),
    ]
    if "core_cuda" in results:
        cuda = results["core_cuda"]
        rows.append(
            (
                "Core speed: fused / F.sdpa (CUDA)",
                f"{cuda['fused_vs_sdpa']:.3f}",
                "within 5%",
                ok(cuda["fused_vs_sdpa"] <= 1.05),
            )
        )
    rows += real_model_rows(results.get("real_model"))
    rows += pretrained.rows(results.get("pretrained"), ok)
    rows += smollm2.rows(results.get("gpt"), ok)
    rows += [
        (
            "Monte Carlo: 10 dims x 100,000 trials, speed-up over the sources' loop",
            f"{mc['speedup_vs_loop']:.0f}x ({mc['ours_s']:.3f} s vs {mc['loop_s']:.1f} s)",
            ">= 10x",
            ok(mc["speedup_vs_loop"] >= 10),
        ),
        *public_link_rows(results, ok),
        *capacity_rows(results["capacity"], ok),
        *replica_rows(results["replicas"], ok),
        *class_poll_rows(results.get("class_poll"), ok),
    ]
    if "training" in results:
        rows += training_rows(results["training"], ok)
    if "training_queue" in results:
        rows += training_queue_rows(results["training_queue"], ok)
    if "gpt_queue" in results:
        rows += gpt_queue_rows(results["gpt_queue"], ok)
    if "cold_open" in results:
        rows += cold_open_rows(results["cold_open"], ok)
    if "scale" in results:
        rows += attention_at_scale.rows(results["scale"], ok)
    if "attribution" in results:
        rows += attribution.rows(results["attribution"], ok)
    lines = [
        measured_line(results),
        "",
        "| figure | measured | target | |",
        "| --- | --- | --- | --- |",
        *[f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows],
        "",
        "![Rerun latency per page relative to the reference page](results.png)",  # relative to bench/README.md
        "",
        "![Students' changes, p50 and p95 against the number of students, one server on one core](capacity.png)",
    ]
    return "\n".join(lines)


def real_model_rows(measured: dict | None) -> list[tuple[str, str, str, str]]:
    """The real model's rows (none until `--only real_model` has run once)."""
    if not measured:
        return []
    ok = lambda good: "met" if good else "**not met**"  # noqa: E731
    speed, memory, server = measured["speed"], measured["memory"], measured.get("server")
    rows = [
        (
            "Real model: our traced forward / transformers' eager BertModel, 32 word pieces, 1 thread",
            f"{speed['ours_vs_transformers']:.2f}x ({speed['median_s']['ours'] * 1e3:.1f} ms "
            f"vs {speed['median_s']['transformers'] * 1e3:.1f} ms)",
            "<= 1.2x",
            ok(speed["ours_vs_transformers"] <= 1.2),
        ),
        (
            "Real model: extra RSS once loaded and one sentence run (fresh process)",
            f"+{memory['extra_mib']:.0f} MiB (load {memory['load_s']:.2f} s, sha256 included)",
            "<= 150 MiB",
            ok(memory["extra_mib"] <= 150),
        ),
    ]
    if server:
        rows.append(
            (
                "Real model: server RSS idle / after the overview / after the real-model page",
                f"{server['idle_mib']:.0f} / {server['after_overview_mib']:.0f} / "
                f"{server['after_real_model_mib']:.0f} MiB (+{server['page_extra_mib']:.0f})",
                "(reported)",
                "",
            )
        )
    return rows


def public_link_rows(results: dict, ok) -> list[tuple[str, str, str, str]]:
    """Rows for the public-link benchmarks (loadtest/memory.py, loadtest/hostile_probe.py), when measured."""
    rows = []
    if "memory" in results:
        mem = results["memory"]
        rows.append(
            (
                f"Memory: server RSS after {mem['settings']} distinct largest settings on every page (st.cache_data)",
                f"{mem['rss_mib']:,.0f} MiB, idle {mem['idle_rss_mib']:,.0f} "
                f"({mem['cache_data_mib']:.0f} MiB of st.cache_data)",
                "caches < 150 MiB",
                ok(mem["cache_data_mib"] < 150),
            )
        )
    if "hostile" in results:
        clear, flood = results["hostile"]["clear_cache"], results["hostile"]["flood"]
        rows += [
            (
                "Public link: caches kept after a client sends Streamlit's clear-cache message",
                f"{clear['cache_bytes_after_clear'] / 2**20:.1f} of {clear['cache_bytes_before'] / 2**20:.1f} MiB kept",
                "all kept",
                ok(clear["cache_survived"]),
            ),
            (
                f"Public link: a student's rerun while one client floods {flood['connections']} connections",
                f"median {flood['victim_median_flood_s']:.2f} s (alone {flood['victim_median_quiet_s']:.2f} s)",
                "(reported; see Public link)",
                "",
            ),
        ]
    return rows


def training_rows(tr: dict, ok) -> list[tuple[str, str, str, str]]:
    """The training lab's rows (bench/training.py): run times on one core, other pages while one trains."""
    worst = "extrapolated from a fifth of its steps" if tr["worst_run_extrapolated"] else "measured"
    ref, page = tr["latency"]["reference"], tr["latency"]["multi_head"]
    return [
        ("Training lab: default run (previous token): CPU time of one core (wall)",
         f"{tr['default_run_cpu_s']:.1f} s ({tr['default_run_s']:.1f} s)", "<= 5 s", ok(tr["default_run_cpu_s"] <= 5)),
        ("Training lab: two-layer induction run (page defaults): CPU (wall)",
         f"{tr['induction_run_cpu_s']:.1f} s ({tr['induction_run_s']:.1f} s)", "<= 30 s",
         ok(tr["induction_run_cpu_s"] <= 30)),
        (f"Training lab: worst run the caps allow ({tr['worst_config']}; {worst}): CPU (wall)",
         f"{tr['worst_run_cpu_s']:.1f} s ({tr['worst_run_s']:.1f} s)", "<= 30 s", ok(tr["worst_run_cpu_s"] <= 30)),
        ("Training lab: rerun of the reference page / the multi-head page while another session trains "
         "(median, relative to the same page idle)", f"{ref['slowdown']:.2f}x / {page['slowdown']:.2f}x "
         f"(p95 {ref['training_p95_s']:.2f} s vs {ref['idle_p95_s']:.2f} s idle)",
         "<= 2x (slower by at most one normal rerun)", ok(max(ref["slowdown"], page["slowdown"]) <= 2)),
    ]  # fmt: skip


def training_queue_rows(tq: dict, ok) -> list[tuple[str, str, str, str]]:
    """The training queue's rows (loadtest/training_queue.py): twenty widest runs pressed at once on one server."""
    widest = f"{tq['pressers']} students press Train at once at the widest setting ({tq['steps_asked']} steps asked)"
    if "load_average_1min" in tq:  # a busy machine stretches every time here; the ratios less so
        widest += f", machine load average {tq['load_average_1min']:g} on {os.cpu_count()} cores"
    return [
        (f"Training queue: {widest}: server peak RSS growth", f"+{tq['peak_growth_mib']:.0f} MiB "
         f"(from {tq['rss_before_mib']:.0f} to {tq['peak_rss_mib']:.0f})", "< 600 MiB",
         ok(tq["peak_growth_mib"] < 600)),
        ("Training queue: the first student's run on the page / the same run alone (same server, same run)",
         f"{tq['first_vs_alone']:.2f}x ({tq['first_result_s']:.1f} s vs {tq['alone_s']:.1f} s)",
         "about 1x (<= 1.3x)", ok(tq["first_vs_alone"] <= 1.3)),
        (f"Training queue: {tq['others']} other students' reruns (multi-head page) while the queue works, "
         "median / the same students idle", f"{tq['others_slowdown']:.2f}x ({tq['others_busy_median_s']:.2f} s "
         f"vs {tq['others_idle_median_s']:.2f} s)", "<= 2x", ok(tq["others_slowdown"] <= 2)),
        ("Training queue: waiting students shown their place; the last one to press saw",
         f"{tq['pressers_shown_a_place']} of {tq['pressers'] - 1} (places up to {tq['largest_place_shown']}); "
         f"\"{tq['last_presser_saw']}\"", "every waiting student",
         ok(tq["pressers_shown_a_place"] >= tq["pressers"] - 1)),
        ("Training queue: server CPU in the 5 s after every presser closed their tab",
         f"{tq['server_cpu_after_tabs_closed']:.0%} of a core", "~0 (their runs dropped)",
         ok(tq["server_cpu_after_tabs_closed"] < 0.2)),
    ]  # fmt: skip


def gpt_queue_rows(gq: dict, ok) -> list[tuple[str, str, str, str]]:
    """Lesson 10's model queue (loadtest/inside_gpt_queue.py): twenty students open their own prompts at once."""
    load = f"{gq['prompters']} students open their own prompts on lesson 10 for {gq['load_s']:.0f} s"
    load += f", machine load average {gq['load_average_1min']:g} on {gq['cores']} cores"
    others = gq["a_others_reruns"]
    reruns = "; ".join(
        f"{page} {g['median_ratio']:.2f}x median, {g['p95_ratio']:.2f}x p95 ({g['busy']['median_s']:.2f} / "
        f"{g['busy']['p95_s']:.2f} s vs {g['idle']['median_s']:.2f} s idle)"
        for page, g in others.items()
    )
    busy, idle, rss = gq["b_newcomer_open_busy"], gq["b_newcomer_open_idle"], gq["c_rss_mib"]
    return [
        (f"GPT queue: {load}: other students' reruns (multi-head page; lesson 10's default example, top-k "
         "changed), busy / their idle median", reruns, "<= 2x",
         ok(max(g["median_ratio"] for g in others.values()) <= 2)),
        ("GPT queue: a new student opens lesson 10's default example meanwhile (median, max)",
         f"{busy['median_s']:.2f} s, {busy['max_s']:.2f} s (idle {idle['median_s']:.2f} s)", "<= 3 s",
         ok(busy["max_s"] <= 3)),
        ("GPT queue: server RSS idle / peak / 10 s after the prompters left",
         f"{rss['idle']:.0f} / {rss['peak']:.0f} / {rss['final']:.0f} MiB", "< 1 GiB",
         ok(max(rss["peak"], rss["final"]) < 1024)),
        ("GPT queue: prompt runs shown their place in the queue; the largest place",
         f"{gq['prompt_runs_shown_a_place']} of {gq['prompt_runs_started']} (up to {gq['largest_place_shown']}); "
         f"{gq['prompt_runs_analysed']} analysed and {gq['prompt_runs_finished'].get('n', 0)} finished in the window",
         "(reported)", ""),
    ]  # fmt: skip


def cold_open_rows(co: dict, ok) -> list[tuple[str, str, str, str]]:
    """A class on a cold server (loadtest/cold_open.py): the first student to open lessons 10, 7 and 11."""
    names = {"inside_gpt": "lesson 10's default example", "cross_attention": "lesson 7", "to_the_answer": "lesson 11"}
    setting = (
        f"fresh server, {co['busy_loops']} busy loop(s) on {co['cores']} cores, the teacher {co['talk_s']:.0f} s "
        "on the overview first"
    )
    return [
        (
            f"Cold open: {setting}: the first student to open {names.get(page, page)}, with the overview's warm-up / "
            "without it / a second student (warm)",
            f"{row['first_open_s']:.2f} s / {row['first_open_without_warm_up_s']:.2f} s / {row['warm_open_s']:.2f} s",
            "<= 3 s",
            ok(row["first_open_s"] <= 3),
        )
        for page, row in co["lessons"].items()
    ]


def capacity_rows(cap: dict, ok) -> list[tuple[str, str, str, str]]:
    """The capacity figures, ours beside the reference page's: students per core, CPU per change, memory."""
    steps = cap["steps"]
    held = [s for s in steps if s["holds"]]
    best = held[-1] if held else steps[0]
    beyond = next((s for s in steps if s["students"] > best["students"] and not s["holds"]), None)
    past = (
        f"; {beyond['students']} students: p95 {beyond['p95_s']:.2f} s with the core "
        f"{beyond['server_cpu_busy']:.0%} busy, {beyond['errors']} errors"
        if beyond
        else ""
    )
    think = f"think time lognormal, median {cap['think_median_s']:g} s"
    if "load_average_1min" in cap:  # other work on the machine takes the server's core: the p95 suffers first
        think += (
            f"; {cap['seconds_per_step']:g} s steps, machine load average {cap['load_average_1min']:.0f} on 2 cores"
        )
    rows = [
        (
            f"Capacity: students one server process on one core holds (p95 change < 1 s, 0 errors; {think})",
            f"**{cap['students_per_core']}** (p95 {best['p95_s']:.2f} s, p50 {best['p50_s']:.2f} s{past})",
            ">= 150",
            ok(cap["students_per_core"] >= 150),
        ),
        (
            "Capacity: server CPU per change (seed step or page switch) -> class size that keeps one core 100% busy",
            f"{best['server_cpu_ms_per_change']:.0f} ms ({best['changes_per_s']:.1f} changes/s from "
            f"{best['students']} students, core {best['server_cpu_busy']:.0%} busy) -> "
            f"{cap.get('cpu_ceiling_students', 0)} students",
            "(reported)",
            "",
        ),
    ]
    if "reference" in cap:
        rows += reference_rows(cap, ok)
    rows += [
        (
            f"Memory: server peak RSS with {best['students']} students",
            f"{best['server_peak_rss_mib']:,.0f} MiB",
            "(reported; container ~1 GB)",
            ok(best["server_peak_rss_mib"] < 1024),
        ),
        (
            "Capacity: wrong numbers (another student's seed, the wrong page) in any step, the overloaded one too",
            f"{sum(s['mismatches'] for s in steps)}",
            "0",
            ok(sum(s["mismatches"] for s in steps) == 0),
        ),
    ]
    return rows


def reference_rows(cap: dict, ok) -> list[tuple[str, str, str, str]]:
    """The reference page (one slider, one heatmap) measured in the same run, and our ratios to it."""
    ref, ratio = cap["reference"], cap["ratio"]
    at_least = "at least " if ref["held_every_step"] else ""
    ours, theirs = cap["students_per_core"], ref["students_per_core"]
    per_core = f"{ours / theirs:.2f}{' (or less)' if at_least else ''}" if theirs else "n/a (no reference step held)"
    per_change = ratio["cpu_per_change_median"]
    return [
        (
            "Capacity, reference page (loadtest/reference_page.py), same class, think times and pinning, same run: "
            "students per core; CPU per change",
            f"{at_least}{theirs or 'none of the steps'}; {ref['cpu_ms_per_change']:.0f} ms "
            f"(-> {ref['cpu_ceiling_students']} students keep the core busy)",
            "(reported)",
            "",
        ),
        (
            "Capacity, ours / reference page: students per core; CPU per change (median over the class sizes "
            f"both ran: {', '.join(map(str, ratio['students']))})",
            f"{per_core}; **{per_change:.2f}x** ({' / '.join(f'{r:.2f}' for r in ratio['cpu_per_change'])})",
            "CPU per change <= 1.5x",
            ok(per_change is not None and per_change <= 1.5),
        ),
    ]


def replica_rows(rep: dict, ok) -> list[tuple[str, str, str, str]]:
    """The replica run: affinity held, and a killed replica lost only its own students."""
    moved = rep["killed_students"]
    only_theirs = sorted(rep["lost_students"]) == sorted(moved) and rep["recovered_students"] == moved
    return [
        (
            f"Replicas: {rep['students']} students, 2 replicas behind HAProxy (cookie affinity); "
            "sessions on two replicas / cookie disagrees with the replica / wrong numbers",
            f"{rep['sessions_on_two_replicas']} / {rep['cookie_disagrees']} / "
            f"{rep['mismatches'] + rep['foreign_seeds']} "
            f"(students per replica {rep['students_per_replica']})",
            "0 / 0 / 0",
            ok(not (rep["sessions_on_two_replicas"] or rep["cookie_disagrees"] or rep["mismatches"])),
        ),
        (
            f"Replicas: {rep['killed']} killed mid-run: students who lost their session / moved and carried on",
            f"{len(rep['lost_students'])} (all on {rep['killed']}) / {len(rep['recovered_students'])}"
            if only_theirs
            else f"{rep['lost_students']} / {rep['recovered_students']} (on {rep['killed']}: {moved})",
            f"only {rep['killed']}'s / all of them",
            ok(only_theirs and bool(moved)),
        ),
    ]


def class_poll_rows(poll: dict | None, ok) -> list[tuple[str, str, str, str]]:
    """The class poll's load run (none until `--only class_poll` has run once)."""
    if not poll:
        return []
    exact = poll["shown_answers"] == poll["students"] and poll["split_right"]
    refresh = poll["teacher_refresh_busy_p95_s"]
    return [
        (
            f"Class poll: {poll['students']} students on 2 replicas sharing Redis answer within "
            f"{poll['answers_window_s']:.1f} s; errors / answers on the teacher's page / split per option",
            f"{poll['errors']} / {poll['shown_answers']} / {'exact' if poll['split_right'] else 'wrong'} "
            f"(students per replica {poll['students_per_replica']}; answer p95 {poll['answer_p95_s']} s)",
            f"0 / {poll['students']} / exact",
            ok(poll["errors"] == 0 and exact),
        ),
        (
            "Class poll: the teacher's live counts refreshed (their fragment) while the class answers, p95 (quiet p95)",
            f"{refresh} s ({poll['teacher_refresh_quiet_p95_s']} s: "
            f"{refresh / poll['teacher_refresh_quiet_p95_s']:.1f}x), {poll['teacher_refreshes_busy']} refreshes; "
            f"load average {poll.get('load_average', '?')} on {os.cpu_count()} cores",
            "< 1 s (the capacity rule's p95)",
            ok(refresh is not None and refresh < 1.0),
        ),
    ]


def capacity_plot(cap: dict) -> alt.Chart:
    """p50 and p95 of the students' changes against the class size, ours and the reference page's, with the target."""
    curves = {"Attention Lab": cap["steps"], "reference page": cap.get("reference", {}).get("steps", [])}
    frame = pd.DataFrame(
        [
            {"students": s["students"], "app": app, "quantile": name, "seconds": s[f"{name}_s"]}
            for app, steps in curves.items()
            for s in steps
            for name in ("p50", "p95")
        ]
    )
    lines = (
        alt.Chart(frame)
        .mark_line(point=True)
        .encode(
            x=alt.X("students:Q", title="simulated students (one server process, one core)"),
            y=alt.Y("seconds:Q", title="change -> script finished (s)", scale=alt.Scale(type="symlog")),
            color=alt.Color("app:N", scale=alt.Scale(scheme="tableau10")),
            strokeDash=alt.StrokeDash("quantile:N", sort=["p95", "p50"]),
        )
    )
    target = (
        alt.Chart(pd.DataFrame({"seconds": [cap["p95_target_s"]]})).mark_rule(strokeDash=[6, 4]).encode(y="seconds:Q")
    )
    # How busy our server's core was: a slow step with a half-idle core waited for a CPU others were using.
    busy = pd.DataFrame(
        [
            {"students": s["students"], "seconds": s["p95_s"], "label": f"core {s['server_cpu_busy']:.0%} busy"}
            for s in cap["steps"]
        ]
    )
    labels = alt.Chart(busy).mark_text(dy=-12, fontSize=11).encode(x="students:Q", y="seconds:Q", text="label:N")
    return (lines + target + labels).properties(
        width=560,
        height=260,
        title="Students per core, ours and the reference page's (dashed rule: p95 target; labels: our core's use)",
    )


def plot(results: dict) -> alt.Chart:
    frame = pd.DataFrame(
        [
            {"page": name, "settings": kind, "ratio": values[f"{kind}_ratio"]}
            for name, values in results["latency"]["pages"].items()
            for kind in ("default", "largest")
        ]
    )
    targets = pd.DataFrame({"settings": ["default", "largest"], "target": [4, 12]})
    bars = (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("page:N", title=None, axis=alt.Axis(labelAngle=-30)),
            xOffset="settings:N",
            y=alt.Y("ratio:Q", title="median rerun / reference page"),
            color=alt.Color("settings:N", scale=alt.Scale(scheme="tableau10")),
        )
    )
    rules = alt.Chart(targets).mark_rule(strokeDash=[6, 4]).encode(y="target:Q", color="settings:N")
    return (bars + rules).properties(width=560, height=260, title="Rerun latency (dashed: targets)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and a small load test")
    parser.add_argument("--only", default=",".join(PARTS), help=f"comma-separated subset of {', '.join(PARTS)}")
    parser.add_argument("--capacity-steps", default="", help="class sizes for the capacity part, e.g. 25,50,100")
    parser.add_argument("--capacity-seconds", type=float, default=None, help="measured seconds per capacity step")
    args = parser.parse_args()
    # A `kill` then unwinds like Ctrl-C, so the servers and balancers the parts started are stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    steps = tuple(int(n) for n in args.capacity_steps.split(",")) if args.capacity_steps else None
    results = run_all(args.quick, set(args.only.split(",")), steps, args.capacity_seconds)
    (HERE / "results.json").write_text(json.dumps(results, indent=2))
    markdown = table(results)
    (HERE / "results.md").write_text(markdown + "\n")
    plot(results).save(str(HERE / "results.png"), scale_factor=1.5)
    capacity_plot(results["capacity"]).save(str(HERE / "capacity.png"), scale_factor=1.5)
    text = README.read_text()
    if START in text and END in text:
        head, rest = text.split(START, 1)
        _, tail = rest.split(END, 1)
        README.write_text(f"{head}{START}\n{markdown}\n{END}{tail}")
    print(markdown)


if __name__ == "__main__":
    main()
