"""Run every benchmark and regenerate the README's performance table and plot.

    python -m bench.run                 # everything: ~10 minutes on 2 cores
    python -m bench.run --quick         # fewer repeats, 8 sessions for 15 s (a smoke run)
    python -m bench.run --only load     # one part again; the rest is kept from bench/results.json

Writes bench/results.json, bench/results.md and bench/results.png, and replaces the part of
README.md between the "bench:start" and "bench:end" markers. CUDA timings are added when a
GPU is present.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
from pathlib import Path

import altair as alt
import pandas as pd
import torch

from bench import core_speed, hostile_probe, latency, load, memory, monte_carlo, real_model, training

HERE = Path(__file__).resolve().parent
README = HERE.parent / "README.md"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    gpu = f", {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ""
    return f"{os.cpu_count()} cores ({cpu}), torch {torch.__version__}{gpu}"


PARTS = ("core", "monte_carlo", "real_model", "load", "memory", "hostile", "training", "latency")  # latency last


def run_all(quick: bool, only: set[str]) -> dict:
    """Run the chosen parts; the others are kept from the previous bench/results.json."""
    previous = HERE / "results.json"
    results: dict = json.loads(previous.read_text()) if only != set(PARTS) and previous.exists() else {}
    results.update(date=dt.date.today().isoformat(), machine=machine())
    if "core" in only:
        results["core_cpu"] = core_speed.run("cpu", repeats=2 if quick else 5)
        if torch.cuda.is_available():
            results["core_cuda"] = core_speed.run("cuda", repeats=10)
    if "monte_carlo" in only:
        results["monte_carlo"] = monte_carlo.run(100_000)
    if "real_model" in only:
        results["real_model"] = real_model.run(repeats=10 if quick else 30)
    if "load" in only:
        results["load"] = load.run(sessions=8 if quick else 40, seconds=15 if quick else 60)
    if "memory" in only:
        results["memory"] = memory.run(count=30 if quick else 300)
    if "hostile" in only:
        results["hostile"] = hostile_probe.run(connections=8 if quick else 32)
    if "training" in only:
        results["training"] = training.run(quick)
    if "latency" in only:
        results["latency"] = latency.run(repeats=5 if quick else 15)
    return results


def table(results: dict) -> str:
    lat, core, mc, ld = results["latency"], results["core_cpu"], results["monte_carlo"], results["load"]
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
    rows += [
        (
            "Monte Carlo: 10 dims x 100,000 trials, speed-up over the sources' loop",
            f"{mc['speedup_vs_loop']:.0f}x ({mc['ours_s']:.3f} s vs {mc['loop_s']:.1f} s)",
            ">= 10x",
            ok(mc["speedup_vs_loop"] >= 10),
        ),
        (
            f"Memory: server peak RSS after {ld['sessions']} sessions opened every page",
            f"{ld['memory_after_all_pages']['peak_rss_mib']:,.0f} MiB (idle {ld['memory_idle_server']['rss_mib']:.0f})",
            "(reported; container ~1 GB)",
            ok(ld["memory_after_all_pages"]["peak_rss_mib"] < 1024),
        ),
        *public_link_rows(results, ok),
        (
            f"Load: {ld['sessions']} browser sessions x {ld['seconds']:.0f} s, p95 slider change -> rerun done",
            f"{ld['p95_s']:.2f} s (median {ld['median_s']:.2f} s, {ld['reruns']} reruns)",
            "(reported)",
            "",
        ),
        (
            "Load, server side (run log): sessions computed with a lost link's default / another session's seed",
            f"{len(ld['server_link_lost'])} / {len(ld['server_cross_talk'])} "
            f"({ld['server_runs']} finished runs, p95 {ld['server_run_p95_s']:.2f} s each)",
            "0 / 0",
            ok(not (ld["server_link_lost"] or ld["server_cross_talk"])),
        ),
        (
            "Load, in the tabs: box without the link's seed after 7 in-app page switches",
            f"{len(ld['link_seed_lost'])} of {ld['sessions']} (slowest switch {ld['slowest_page_switch_s']:.1f} s)",
            "0",
            ok(not ld["link_seed_lost"]),
        ),
        (
            "Load, in the tabs, once clicking stops: numbers of an older seed / another session's / none yet",
            f"{len(ld['stale'])} / {len(ld['cross_talk'])} / {len(ld['unpainted'])}",
            "0 / 0 / 0",
            ok(not (ld["stale"] or ld["cross_talk"] or ld["unpainted"])),
        ),
        (
            "Load: errors / exceptions / JavaScript errors",
            f"{len(ld['errors'])} / {ld['exceptions']} / {len(ld['js_errors'])}",
            "all 0",
            ok(not (ld["errors"] or ld["exceptions"] or ld["js_errors"])),
        ),
    ]
    if "training" in results:
        rows += training_rows(results["training"], ok)
    lines = [
        f"Measured {results['date']} on {results['machine']} (`python -m bench.run`).",
        "",
        "| figure | measured | target | |",
        "| --- | --- | --- | --- |",
        *[f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows],
        "",
        "![Rerun latency per page relative to the reference page](bench/results.png)",
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
    """Rows for the public-link benchmarks (bench/memory.py, bench/hostile_probe.py), when measured."""
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
    args = parser.parse_args()
    results = run_all(args.quick, set(args.only.split(",")))
    (HERE / "results.json").write_text(json.dumps(results, indent=2))
    markdown = table(results)
    (HERE / "results.md").write_text(markdown + "\n")
    plot(results).save(str(HERE / "results.png"), scale_factor=1.5)
    text = README.read_text()
    if START in text and END in text:
        head, rest = text.split(START, 1)
        _, tail = rest.split(END, 1)
        README.write_text(f"{head}{START}\n{markdown}\n{END}{tail}")
    print(markdown)


if __name__ == "__main__":
    main()
