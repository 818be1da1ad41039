"""One hostile client against the class poll on a real server (issue 31, items 2 and 3).

    python -m bench.poll_abuse            # ~2 minutes, loopback only, one `streamlit run`

Everything here comes from loopback, so the server sees one client address: the probe measures
what one client (one address) can do, which is also what a class behind one NAT shares.
- answers: a teacher starts a poll; one student connection answers, then sends Streamlit's
  "clear cache" message 20 times, answering after each; then the script opens new connections
  (new sessions) and answers from each, as fast as the server serves, for `window_s`;
  the teacher's page says how many answers and students it counts;
- rooms: the script opens `attempts` connections in presentation mode and presses
  "Start a class poll" on each; counted: the rooms made and the refusals.
"""

from __future__ import annotations

import asyncio
import json
import re
import time

from streamlit.proto.BackMsg_pb2 import BackMsg

from bench.class_poll import CODE_SHOWN, QUESTION_KEY, REVEAL_KEY, START_KEY, client, joined
from bench.harness import start_server
from bench.load_client import Action

SHOWN = re.compile(r"Class poll: (\d+) answers?\*\* from (\d+) joined")


async def clear_cache(pupil) -> None:
    message = BackMsg()
    message.clear_cache = True
    await pupil.socket.send(message.SerializeToString())


async def counted(teacher) -> tuple[int, int]:
    """(answers, students joined) as the teacher's page shows them."""
    _, view = await teacher.refresh(REVEAL_KEY)
    found = SHOWN.search(joined(view))
    return (int(found.group(1)), int(found.group(2))) if found else (-1, -1)


async def answers(url: str, window_s: float) -> dict:
    teacher = client(-1, url, "present=1")
    await teacher.connect()
    await teacher.rerun(Action.OPEN)
    code = "".join(CODE_SHOWN.search(joined(await teacher.click(START_KEY))).groups())
    link = f"present=true&room={code}"
    pupil = client(0, url, link)
    await pupil.connect()
    await pupil.rerun(Action.OPEN)
    await pupil.choose(QUESTION_KEY, 0)
    for cycle in range(20):
        await clear_cache(pupil)
        await pupil.rerun(Action.OPEN)
        await pupil.choose(QUESTION_KEY, cycle % 2)
    after_clears = await counted(teacher)
    await pupil.socket.close()
    started, made, notes = time.monotonic(), 0, set()
    while time.monotonic() - started < window_s:
        extra = client(1 + made, url, link)
        await extra.connect()
        _, view = await extra.rerun(Action.OPEN)
        if QUESTION_KEY in " ".join(view.widget_ids):
            _, view = await extra.choose(QUESTION_KEY, 1)
        notes |= {t for t in view.texts if "network" in t}
        await extra.socket.close()
        made += 1
    final = await counted(teacher)
    await teacher.socket.close()
    return {
        "answers_after_20_clear_caches": after_clears[0],
        "new_connections": made,
        "seconds": round(time.monotonic() - started, 1),
        "answers_shown_at_end": final[0],
        "joined_shown_at_end": final[1],
        "notes_seen": sorted(notes)[:3],
    }


async def rooms(url: str, attempts: int) -> dict:
    made, refused, notes = set(), 0, set()
    for index in range(attempts):
        tab = client(5000 + index, url, "present=1")
        await tab.connect()
        await tab.rerun(Action.OPEN)
        view = await tab.click(START_KEY)
        found = CODE_SHOWN.search(joined(view))
        if found:
            made.add("".join(found.groups()))
        else:
            refused += 1
            notes |= {t for t in view.texts if "poll" in t.lower()}
        await tab.socket.close()
    return {"attempts": attempts, "rooms_made": len(made), "refused": refused, "notes_seen": sorted(notes)[:2]}


async def measure(url: str, window_s: float, attempts: int) -> dict:
    return {"answers": await answers(url, window_s), "rooms": await rooms(url, attempts)}


def run(window_s: float = 45.0, attempts: int = 30) -> dict:
    process, url = start_server()
    try:
        return asyncio.run(measure(url, window_s, attempts))
    finally:
        process.terminate()
        process.wait(timeout=30)


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
