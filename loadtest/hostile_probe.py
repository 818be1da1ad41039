"""What one hostile client can do to everyone on a shared server (issue 10, item 5).

A small Streamlit websocket client (the protocol the browser speaks on /_stcore/stream, with
Streamlit's own protobuf classes) and two probes against `streamlit run` on loopback:

- clear_cache: fill the caches, send the "clear cache" BackMsg from another connection, and see
  whether the next visitor's rerun is served from the cache or recomputed;
- flood: one client holds N connections that change settings as fast as the server answers;
  a victim session times its own reruns before and during the flood.

    python -m loadtest.hostile_probe            # both probes, prints JSON
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import time
import urllib.parse
import urllib.request

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from testkit import harness

LARGEST = {"preset": "custom", "d_in": "64", "d_out": "64", "num_heads": "8", "dropout": "0.9"}
METRICS_TTL_S = 5.5
LARGEST_TEXT = " ".join(f"w{i}" for i in range(24))


class Session:
    """One browser tab's worth of protocol: rerun a page with a query string, wait until done."""

    def __init__(self, url: str) -> None:
        self.ws_url = url.replace("http://", "ws://") + "/_stcore/stream"
        self.socket = None
        self.received_bytes = 0  # every message the server sent this session

    async def __aenter__(self) -> Session:
        self.socket = await websockets.connect(self.ws_url, max_size=2**26, open_timeout=60)
        return self

    async def __aexit__(self, *exc) -> None:
        await self.socket.close()

    async def send(self, message: BackMsg) -> None:
        await self.socket.send(message.SerializeToString())

    async def rerun(self, page: str, query: dict[str, str], timeout_s: float = 120) -> tuple[float, bool]:
        """(seconds until the run finished, whether it finished without an exception element)."""
        message = BackMsg()
        message.rerun_script.query_string = urllib.parse.urlencode(query)
        message.rerun_script.page_name = page
        message.rerun_script.widget_states.SetInParent()
        started = time.perf_counter()
        await self.send(message)
        clean = True
        deadline = started + timeout_s
        while True:
            raw = await asyncio.wait_for(self.socket.recv(), timeout=max(0.1, deadline - time.perf_counter()))
            self.received_bytes += len(raw)
            forward = ForwardMsg()
            forward.ParseFromString(raw)
            kind = forward.WhichOneof("type")
            if kind == "delta" and forward.delta.new_element.WhichOneof("type") == "exception":
                clean = False
            if kind == "script_finished" and forward.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                return time.perf_counter() - started, clean

    async def clear_cache(self) -> None:
        message = BackMsg()
        message.clear_cache = True
        await self.send(message)


def cache_bytes(url: str) -> dict[str, int]:
    """st.cache_data's bytes per cached function, from the server's /_stcore/metrics.

    The server recomputes this figure at most every 5 s: wait that long after a change.
    """
    with urllib.request.urlopen(url + "/_stcore/metrics", timeout=30) as response:
        text = response.read().decode()
    found = re.findall(r'cache_memory_bytes\{cache_type="st_cache_data",cache="([^"]+)"\} (\d+)', text)
    return {name: int(size) for name, size in found}


async def _cache_survives(url: str) -> dict:
    """Fill the caches from one session, send "clear cache" from another, compare the bytes."""
    async with Session(url) as first:
        await first.rerun("trainable_weights", {**LARGEST, "text": LARGEST_TEXT, "seed": "4242"})
    await asyncio.sleep(METRICS_TTL_S)
    before = sum(cache_bytes(url).values())
    async with Session(url) as attacker:
        await attacker.rerun("overview", {})
        await attacker.clear_cache()
        await asyncio.sleep(METRICS_TTL_S)
    after = sum(cache_bytes(url).values())
    return {"cache_bytes_before": before, "cache_bytes_after_clear": after, "cache_survived": after >= before}


async def _flood(url: str, connections: int) -> dict:
    """A victim's rerun times alone, then while `connections` sessions rerun as fast as served."""

    async def victim_times(count: int, first_seed: int) -> list[float]:
        async with Session(url) as victim:
            await victim.rerun("trainable_weights", {"seed": str(first_seed - 1)})  # the session's first run
            times = []
            for i in range(count):
                took, _ = await victim.rerun("trainable_weights", {"seed": str(first_seed + i)})
                times.append(took)
                await asyncio.sleep(0.3)  # a student's pace
        return times

    await victim_times(2, 1_000)  # warm the process: imports, first runs
    quiet = await victim_times(8, 7_000)
    stop = asyncio.Event()
    changes = 0

    async def attacker(index: int) -> None:
        nonlocal changes
        async with Session(url) as session:
            seed = 100_000 * (index + 1)
            while not stop.is_set():
                await session.rerun("multi_head", {**LARGEST, "text": LARGEST_TEXT, "seed": str(seed)}, 600)
                seed += 1
                changes += 1

    attackers = [asyncio.create_task(attacker(i)) for i in range(connections)]
    await asyncio.sleep(3)  # let the flood build up
    started, count = time.perf_counter(), changes
    loaded = await victim_times(8, 50_000)
    rate = (changes - count) / (time.perf_counter() - started)
    stop.set()
    for task in attackers:
        task.cancel()
    await asyncio.gather(*attackers, return_exceptions=True)
    return {
        "connections": connections,
        "victim_median_quiet_s": statistics.median(quiet),
        "victim_median_flood_s": statistics.median(loaded),
        "victim_max_flood_s": max(loaded),
        "attacker_runs_per_s": rate,
    }


def long_link(parameters: int = 45, chars: int = 10_000) -> dict[str, str]:
    """A link that fills `parameters` of the app's known parameters with `chars` characters each."""
    from core.app.links import rules

    return {name: "x" * chars for name in list(rules(["cpu"]))[:parameters]}


async def _amplification(url: str, parameters: int, chars: int) -> dict:
    """Bytes the server sends for one run of a very long link, against the bytes of the link."""
    query = long_link(parameters, chars)
    sent = len(urllib.parse.urlencode(query))
    async with Session(url) as client:  # a session reads its link on its first run
        _, clean = await client.rerun("trainable_weights", query)
    return {
        "link_bytes": sent,
        "server_sent_bytes": client.received_bytes,
        "amplification": round(client.received_bytes / sent, 2),
        "clean": clean,
    }


def probe_amplification(parameters: int = 45, chars: int = 10_000) -> dict:
    """The long-link probe against a fresh server (issue 31: 10 kB in each of 45 parameters)."""
    process, url = harness.start_server()
    try:
        return asyncio.run(_amplification(url, parameters, chars))
    finally:
        process.terminate()
        process.wait(timeout=30)


# What a browser never sends for a choice box (selectbox, radio): issue 31, item 1.
FORGED_CHOICES = (
    {"double_value": 2.5},
    {"int_value": 7},
    {"bool_value": True},
    {"trigger_value": True},
    {"bytes_value": b"\x00\xff"},
    {"string_value": "nope"},
)


async def _forged_choices(url: str) -> dict:
    """Every page's every selectbox and radio, sent each forged value once; the runs that showed
    Streamlit's raw error box (an exception element) are counted."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    from core.app import registry
    from loadtest.load_client import Action, Student
    tried, raw_boxes, failures = 0, 0, []
    for spec in registry.PAGES:
        student = Student(0, url, time.monotonic(), None, spec.slug, seed=123)
        await student.connect()
        try:
            await student.rerun(Action.OPEN)
            clean = dict(student.view.widgets)
            choices = [wid for wid, kind in student.view.kinds.items() if kind in ("selectbox", "radio")]
            for widget in choices:
                for forged in FORGED_CHOICES:
                    student.view.widgets = {**clean, widget: WidgetState(id=widget, **forged)}
                    _, view = await student.rerun(Action.SEED)
                    tried += 1
                    if any(p.startswith("exception") for p in view.problems):
                        raw_boxes += 1
                        failures.append(f"{spec.slug}:{widget.rsplit('-', 1)[-1]}:{next(iter(forged))}")
                    student.view.widgets = dict(clean)
        finally:
            await student.socket.close()
    return {"forged_runs": tried, "raw_error_boxes": raw_boxes, "examples": failures[:5]}


def probe_forged_choices() -> dict:
    """The forged-choice probe against a fresh server."""
    process, url = harness.start_server()
    try:
        return asyncio.run(_forged_choices(url))
    finally:
        process.terminate()
        process.wait(timeout=30)


def probe_clear_cache(env: dict[str, str] | None = None) -> dict:
    """The clear-cache probe against a fresh server."""
    process, url = harness.start_server(env=env)
    try:
        return asyncio.run(_cache_survives(url))
    finally:
        process.terminate()
        process.wait(timeout=30)


def probe_flood(connections: int = 32, env: dict[str, str] | None = None) -> dict:
    """The flood probe against a fresh server."""
    process, url = harness.start_server(env=env)
    try:
        return asyncio.run(_flood(url, connections))
    finally:
        process.terminate()
        process.wait(timeout=30)


def run(connections: int = 32) -> dict:
    return {"clear_cache": probe_clear_cache(), "flood": probe_flood(connections)}


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
