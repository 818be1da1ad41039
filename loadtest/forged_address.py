"""One client forging X-Forwarded-For through the shipped HAProxy recipe: how many rooms and answers it adds.

    python -m loadtest.forged_address               # through HAProxy (loadtest/replicas.py), one replica
    python -m loadtest.forged_address --direct      # straight to one server on loopback, no proxy named

Every connection of the client carries a new made-up address in X-Forwarded-For (198.51.100.x), as a
script would. Measured (issue 40, item 4):
- rooms: the client presses "Start a class poll" on `room_attempts` fresh sessions; how many rooms it got;
- answers: the client's `answer_attempts` fresh sessions each join a real teacher's room and answer; how
  many answers the teacher's page counts.
Through the recipe, the replicas count the entry HAProxy appended (this machine), so the forged addresses
change nothing: at most the per-address bounds (12 rooms an hour; 250 students a room). Direct, on
loopback with no proxy named, every session counts on its own (the host's proxy case: Community Cloud).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from dataclasses import dataclass

from loadtest import class_poll, load_client, replicas
from loadtest.class_poll import CODE_SHOWN, QUESTION_KEY, START_KEY, PollClient, joined
from loadtest.load_client import Action
from testkit.harness import start_server


@dataclass
class ForgingClient(PollClient):
    """A PollClient whose websocket handshake says it comes from `forwarded`."""

    forwarded: str = ""

    async def connect(self) -> None:
        await self.fetch_page()
        ws_url = self.base_url.replace("http://", "ws://", 1) + "/_stcore/stream"
        headers = {"X-Forwarded-For": self.forwarded}
        if self.cookie:
            headers["Cookie"] = self.cookie
        self.socket = await load_client.websockets.connect(
            ws_url, subprotocols=["streamlit"], additional_headers=headers, max_size=None, open_timeout=60
        )
        self.view = load_client.RunView()


def forger(index: int, url: str, link: str) -> ForgingClient:
    return ForgingClient(
        index, url, time.monotonic(), random.Random(index), class_poll.PAGE, seed=0, link=link,
        forwarded=f"198.51.100.{index % 250 + 1}",
    )  # fmt: skip


async def _start_room(client: PollClient) -> str | None:
    """Open the lesson in presentation mode and press Start; the room's code, or None when refused."""
    await client.connect()
    try:
        await client.rerun(Action.OPEN)
        view = await client.click(START_KEY)
        found = CODE_SHOWN.search(joined(view))
        return "".join(found.groups()) if found else None
    finally:
        await load_client.close(client)


async def _answer(client: PollClient, code: str) -> bool:
    """Join the room through its link and answer; whether the page said the answer is in."""
    client.link = f"present=true&room={code}"
    await client.connect()
    try:
        await client.rerun(Action.OPEN)
        _, view = await client.choose(QUESTION_KEY, 1)
        return "Your answer is in" in joined(view)
    finally:
        await load_client.close(client)


async def _probe(url: str, room_attempts: int, answer_attempts: int) -> dict:
    # A real teacher first: on loopback it shares the forger's address, whose hourly rooms the forger then uses up.
    teacher = class_poll.client(-1, url, "present=1")
    await teacher.connect()
    await teacher.rerun(Action.OPEN)
    found = CODE_SHOWN.search(joined(await teacher.click(START_KEY)))
    if not found:
        raise RuntimeError("the real teacher got no room")
    code = "".join(found.groups())

    started = time.monotonic()
    rooms = 0
    for index in range(room_attempts):
        rooms += await _start_room(forger(index, url, "present=1")) is not None
    rooms_s = time.monotonic() - started

    started = time.monotonic()
    told_in = 0
    for index in range(answer_attempts):
        told_in += await _answer(forger(1000 + index, url, ""), code)
    answers_s = time.monotonic() - started
    _, view = await teacher.rerun(Action.POLL)
    counted = class_poll.ANSWERS_SHOWN.search(joined(view))
    await load_client.close(teacher)
    return {
        "rooms": rooms,
        "rooms_of": room_attempts,
        "rooms_s": round(rooms_s, 1),
        "answers_told_in": told_in,
        "answers_counted": int(counted.group(1)) if counted else 0,
        "answers_of": answer_attempts,
        "answers_s": round(answers_s, 1),
    }


def run(room_attempts: int = 20, answer_attempts: int = 200, direct: bool = False) -> dict:
    """The probe against the shipped recipe (HAProxy in front of one replica), or one server directly."""
    if direct:
        process, url = start_server()
        try:
            asyncio.run(load_client.warm_up(url))
            return {"through": "direct", **asyncio.run(_probe(url, room_attempts, answer_attempts))}
        finally:
            process.terminate()
            process.wait(timeout=20)
    cluster = replicas.start(replicas=1, redis=False)
    try:
        return {"through": "haproxy", **asyncio.run(_probe(cluster.url, room_attempts, answer_attempts))}
    finally:
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rooms", type=int, default=20, help="sessions that try to start a room")
    parser.add_argument("--answers", type=int, default=200, help="sessions that try to join and answer")
    parser.add_argument("--direct", action="store_true")
    arguments = parser.parse_args()
    print(json.dumps(run(arguments.rooms, arguments.answers, arguments.direct), indent=2))


if __name__ == "__main__":
    main()
