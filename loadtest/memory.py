"""Server memory under many distinct settings (issue 10, item 4).

Starts `streamlit run`, then opens every page with `count` distinct settings at the largest
sizes (24 tokens, d_in = d_out = 64, 8 heads, dropout 0.9; a new seed each time, so nothing
comes from the cache), through Streamlit's websocket protocol (bench/hostile_probe.Session).
Reports the server's RSS before and after, and st.cache_data's own byte count.

    python -m loadtest.memory             # 300 settings x 7 pages (~10 minutes on 2 cores)
    python -m loadtest.memory --count 20  # a smoke run
    python -m loadtest.memory --class --count 50  # a class: default settings, each student's own seed,
                                                  # and lessons 2, 4, 5 on both models' heads too
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from loadtest.hostile_probe import LARGEST, LARGEST_TEXT, METRICS_TTL_S, Session, cache_bytes
from testkit import harness


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


# A class at the default settings: every page with the student's own seed, then the lessons with a model weight
# source on each model (both models loaded, as in a class that visits the GPT and the encoder).
MODEL_PAGES = tuple(
    (page, weights)
    for page in ("trainable_weights", "causal_dropout", "multi_head")
    for weights in ("pretrained", "decoder")
)


def _queries(i: int, as_a_class: bool) -> list[tuple[str, dict[str, str]]]:
    """The (page, link) a session opens: the largest settings on every page, or a class's defaults."""
    if not as_a_class:
        return [(page, {**LARGEST, "text": LARGEST_TEXT, "seed": str(10_000 + i)}) for page in harness.PAGE_URLS]
    seed = {"seed": str(10_000 + i)}
    return [(page, seed) for page in harness.PAGE_URLS] + [(p, {**seed, "weights": w}) for p, w in MODEL_PAGES]


async def _visit(url: str, count: int, parallel: int, pid: int | None = None, as_a_class: bool = False) -> int:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(count):
        queue.put_nowait(i)
    failures = 0
    done = 0

    async def worker() -> None:
        nonlocal failures, done
        while not queue.empty():
            i = queue.get_nowait()
            async with Session(url) as session:  # a fresh session reads the link, as a student's tab does
                for page, query in _queries(i, as_a_class):
                    _, clean = await session.rerun(page, query)
                    failures += not clean
            done += 1
            if pid and done % 25 == 0:  # progress on stderr: a long run on a busy machine still reports
                print(f"{done} settings: RSS {rss_mib(pid):.0f} MiB", file=sys.stderr, flush=True)

    await asyncio.gather(*(worker() for _ in range(parallel)))
    return failures


def run(count: int = 300, parallel: int = 2, as_a_class: bool = False) -> dict:
    process, url = harness.start_server()
    try:
        asyncio.run(_visit(url, 1, 1, as_a_class=as_a_class))  # imports and first runs: "idle" is a warm server
        idle = rss_mib(process.pid)
        started = time.perf_counter()
        failures = asyncio.run(_visit(url, count, parallel, process.pid, as_a_class))
        seconds = time.perf_counter() - started
        time.sleep(METRICS_TTL_S)
        caches = cache_bytes(url)
        return {
            "settings": count,
            "pages": len(harness.PAGE_URLS),
            "idle_rss_mib": round(idle, 1),
            "rss_mib": round(rss_mib(process.pid), 1),
            "cache_data_mib": round(sum(caches.values()) / 2**20, 1),
            "largest_cache_mib": round(max(caches.values()) / 2**20, 1),
            "failed_runs": failures,
            "seconds": round(seconds, 1),
        }
    finally:
        process.terminate()
        process.wait(timeout=30)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--class", dest="as_a_class", action="store_true", help="a class's default settings")
    args = parser.parse_args()
    print(json.dumps(run(args.count, as_a_class=args.as_a_class), indent=2))
