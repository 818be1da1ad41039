"""One hostile client against the class poll on a real server (issue 31, items 2 and 3).

    python -m loadtest.poll_abuse            # ~2 minutes, loopback only, one `streamlit run`
    python -m loadtest.poll_abuse --outage   # ~30 s: the poll on Redis, stopped and started again

Everything here comes from loopback, so the server sees one client address: the probe measures
what one client (one address) can do, which is also what a class behind one NAT shares.
- answers: a teacher starts a poll; one student connection answers, then sends Streamlit's
  "clear cache" message 20 times, answering after each; then the script opens new connections
  (new sessions) and answers from each, as fast as the server serves, for `window_s`;
  the teacher's page says how many answers and students it counts;
- rooms: the script opens `attempts` connections in presentation mode and presses
  "Start a class poll" on each; counted: the rooms made and the refusals.
- outage (items 4 and 5): the server's poll on a redis-server; a student has joined; Redis stops;
  the student answers, and another opens the link; what each sees; Redis starts again; the second
  student's page reruns (as its retry timer makes it) and the teacher reveals.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time

from streamlit.proto.BackMsg_pb2 import BackMsg

from loadtest.class_poll import CODE_SHOWN, QUESTION_KEY, REVEAL_KEY, START_KEY, client, joined
from loadtest.load_client import Action
from testkit.harness import start_server

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


VERDICT = re.compile(r"^(Right\.|Not quite)")


def verdict_shown(view) -> bool:
    """Whether the page shows the right answer's verdict ("Right. ..." or "Not quite: it is ...")."""
    return any(VERDICT.match(text) for text in view.texts)


async def outage(url: str, redis) -> dict:
    teacher = client(-1, url, "present=1")
    await teacher.connect()
    await teacher.rerun(Action.OPEN)
    code = "".join(CODE_SHOWN.search(joined(await teacher.click(START_KEY))).groups())
    link = f"present=true&room={code}"
    first = client(0, url, link)
    await first.connect()
    await first.rerun(Action.OPEN)
    redis.stop()
    _, during = await first.choose(QUESTION_KEY, 1)
    late = client(1, url, link)
    await late.connect()
    _, late_during = await late.rerun(Action.OPEN)
    redis.start()
    await asyncio.sleep(1.0)
    await late.rerun(Action.POLL)  # what its retry (every 2 s) does: it joins
    _, late_after = await late.rerun(Action.POLL)
    await first.choose(QUESTION_KEY, 1)  # sent again now that the store answers
    await teacher.click(REVEAL_KEY)
    _, after = await first.rerun(Action.POLL)
    for one in (teacher, first, late):
        await one.socket.close()
    return {
        "student_during_outage_sees_verdict": verdict_shown(during),
        "student_during_outage_notes": [t for t in during.texts if "unavailable" in t][:1],
        "late_student_during_outage_notes": [t for t in late_during.texts if "Joining class poll" in t][:1],
        "late_student_joined_after": "you follow the teacher" in joined(late_after),
        "student_sees_verdict_after_reveal": verdict_shown(after),
        "problems": during.problems + late_during.problems + late_after.problems + after.problems,
    }


def run_outage() -> dict:
    from tests.support import RedisServer

    redis = RedisServer().start()
    process, url = start_server(env={"ATTENTION_LAB_REDIS_URL": redis.url})
    try:
        return asyncio.run(outage(url, redis))
    finally:
        process.terminate()
        process.wait(timeout=30)
        redis.stop()


def run(window_s: float = 45.0, attempts: int = 30) -> dict:
    process, url = start_server()
    try:
        return asyncio.run(measure(url, window_s, attempts))
    finally:
        process.terminate()
        process.wait(timeout=30)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outage", action="store_true", help="the poll on Redis through an outage")
    print(json.dumps(run_outage() if parser.parse_args().outage else run(), indent=2))
