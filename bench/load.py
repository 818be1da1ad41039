"""Memory and load: many browser sessions against `streamlit run` on loopback.

One Chromium (Debian's, /usr/bin/chromium) with N pages, each its own Streamlit session:
1. every session opens every page (then the server's peak RSS is read from /proc);
2. for `seconds`, each session sits on a different page and keeps stepping its own seed
   up (the sidebar's "+"), timing each click until the rerun has finished;
3. cross-talk check: after every rerun a session must still show its own seed, and at the
   end each one opens the trainable-weights page and must show the numbers `core`
   computes for its own settings.
All traffic stays on 127.0.0.1; every loop is bounded by `seconds` and stops by itself.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from dataclasses import replace
from pathlib import Path

from bench.harness import CHROMIUM, CHROMIUM_ARGS, PAGE_URLS, start_server
from core import lessons
from core.settings import settings_for_preset

PAGES = PAGE_URLS
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
SEED_BOX = '[data-testid="stSidebar"] [data-testid="stNumberInputField"]'
ARRIVAL_GAP_S = 0.5  # seconds between two sessions' arrivals


def rss_mib(pid: int) -> dict[str, float]:
    """Current and peak resident memory of the server process (Linux /proc)."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return {"rss_mib": fields["VmRSS"], "peak_rss_mib": fields["VmHWM"]}


def expected_z(seed: int) -> str:
    lesson = lessons.trainable_lesson(replace(settings_for_preset("book"), seed=seed), 1)
    return ", ".join(f"{v:.4f}" for v in lesson.values["query_context"])


async def wait_idle(page, timeout_ms: float = 120_000) -> None:
    await page.wait_for_selector(IDLE, timeout=timeout_ms)


async def go_to(page, name: str) -> None:
    """Switch page inside the app, as a student does: the sidebar link, no reload."""
    await page.locator(f'[data-testid="stSidebarNav"] a[href$="/{name}"]').first.click()
    await page.wait_for_function(f"location.pathname.endsWith('/{name}')")
    await wait_idle(page)


async def open_every_page(page, url: str, seed: int) -> None:
    await page.goto(f"{url}/{PAGES[1]}?seed={seed}", wait_until="domcontentloaded")
    await page.wait_for_selector("h1")
    await wait_idle(page)
    for name in PAGES[2:] + ([] if os.environ.get("SKIP_OVERVIEW") else PAGES[:1]):
        if name == PAGES[0]:  # the overview is the default page, served at /
            await page.locator('[data-testid="stSidebarNav"] a').first.click()
            await wait_idle(page)
        else:
            await go_to(page, name)


async def session(browser, url: str, index: int, seconds: float, stats: dict) -> None:
    await asyncio.sleep(ARRIVAL_GAP_S * index)  # students arrive over a few seconds, not at once
    context = await browser.new_context(viewport={"width": 1200, "height": 800})
    context.set_default_timeout(180_000)
    page = await context.new_page()
    page.on("pageerror", lambda error: stats["js_errors"].append(str(error)))
    seed = 1000 * (index + 1)
    try:
        await open_every_page(page, url, seed)
        stats["opened_all"] += 1
        await stats["all_open"].wait()  # measure memory once everyone has opened every page
        name = PAGES[index % len(PAGES)]
        if name == PAGES[0]:
            await page.locator('[data-testid="stSidebarNav"] a').first.click()
            await wait_idle(page)
        else:
            await go_to(page, name)
        # The idle marker can still be the previous page's: wait for this page to show our seed.
        # Under load a session can come back from a page switch without the seed its link set
        # (a known issue, see README "Performance"): count it, type the seed back, carry on.
        try:
            await page.wait_for_function(
                "([box, seed]) => document.querySelector(box)?.value === seed",
                arg=[SEED_BOX, str(seed)],
                timeout=20_000,
            )
        except Exception:  # noqa: BLE001 - a timeout here is the finding being counted
            stats["link_seed_lost"] += 1
            await page.locator(SEED_BOX).fill(str(seed))
            await page.locator(SEED_BOX).press("Enter")
            await page.wait_for_function(
                "([box, seed]) => document.querySelector(box)?.value === seed", arg=[SEED_BOX, str(seed)]
            )
        await wait_idle(page)
        step_up = page.locator('[data-testid="stSidebar"] [data-testid="stNumberInputStepUp"]')
        seed_box = page.locator(SEED_BOX)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            start = time.perf_counter()
            await step_up.click()
            seed += 1
            # Done when the script is idle and the box no longer shows the previous seed. (The idle
            # marker can lag the click, so a wait can end early: latencies are a lower bound.)
            await page.wait_for_function(
                """([idle, box, previous]) => document.querySelector(idle) !== null
                    && document.querySelector(box)?.value !== previous""",
                arg=[IDLE, SEED_BOX, str(seed - 1)],
                timeout=120_000,
            )
            stats["latencies"].append(time.perf_counter() - start)
            if await seed_box.input_value() != str(seed):
                stats["cross_talk"].append(f"session {index}: seed box shows {await seed_box.input_value()}")
            if await page.locator('[data-testid="stException"]').count():
                stats["exceptions"] += 1
        await go_to(page, "trainable_weights")  # the same session, so its own state is what we check
        expected = f"[{expected_z(seed)}]"
        try:  # the page may still be finishing its last run: give the right numbers time to appear
            await page.wait_for_function("(z) => document.body.innerText.includes(z)", arg=expected, timeout=30_000)
        except Exception:  # noqa: BLE001 - not appearing is the finding
            shown = await page.locator(SEED_BOX).input_value()
            if shown == "123" and seed != 123:  # the default: the known loss of a link-set value
                stats["link_seed_lost_at_end"] += 1
            else:
                stats["cross_talk"].append(f"session {index}: seed box {shown}, own seed {seed}, numbers differ")
    except Exception as error:  # noqa: BLE001 - every failure counts as an error in the report
        stats["errors"].append(f"session {index}: {type(error).__name__}: {str(error)[:900]}")
    finally:
        await context.close()


async def _run(url: str, pid: int, sessions: int, seconds: float) -> dict:
    from playwright.async_api import async_playwright

    stats: dict = {
        "latencies": [],
        "js_errors": [],
        "cross_talk": [],
        "errors": [],
        "exceptions": 0,
        "link_seed_lost": 0,
        "link_seed_lost_at_end": 0,
        "opened_all": 0,
        "all_open": asyncio.Event(),
    }
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        tasks = [asyncio.create_task(session(browser, url, i, seconds, stats)) for i in range(sessions)]
        while stats["opened_all"] + len(stats["errors"]) < sessions and not all(t.done() for t in tasks):
            await asyncio.sleep(0.5)
        memory = rss_mib(pid)
        stats["all_open"].set()
        await asyncio.gather(*tasks)
        await browser.close()
    latencies = sorted(stats["latencies"])
    return {
        "sessions": sessions,
        "seconds": seconds,
        "reruns": len(latencies),
        "median_s": statistics.median(latencies) if latencies else None,
        "p95_s": latencies[min(len(latencies) - 1, round(0.95 * (len(latencies) - 1)))] if latencies else None,
        "errors": stats["errors"],
        "js_errors": stats["js_errors"][:5],
        "exceptions": stats["exceptions"],
        "cross_talk": stats["cross_talk"],
        "link_seed_lost": stats["link_seed_lost"],
        "link_seed_lost_at_end": stats["link_seed_lost_at_end"],
        "memory_after_all_pages": memory,
        "memory_after_load": rss_mib(pid),
    }


def run(sessions: int = 40, seconds: float = 60.0) -> dict:
    process, url = start_server()
    try:
        baseline = rss_mib(process.pid)
        result = asyncio.run(_run(url, process.pid, sessions, seconds))

        result["memory_idle_server"] = baseline
        return result
    finally:
        process.terminate()
        process.wait(timeout=30)


if __name__ == "__main__":
    import json

    n = int(os.environ.get("SESSIONS", "8"))
    print(json.dumps(run(n, float(os.environ.get("SECONDS", "15"))), indent=2))
