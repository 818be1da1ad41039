"""Websocket students who follow a teacher's lecture through a class poll (tests/browser/test_classroom.py).

Each is a loadtest.class_poll.PollClient on the room's link: `follow` reruns its page as the poll's watcher
does when the teacher moves (the server switches it to the teacher's lesson and step), `answer` chooses an
option of the question drawn on that step, and `sees_reveal` reruns and reads the verdict the reveal shows.
A `Lecture` runs them on an event loop of its own thread, so a test driving Chromium (Playwright's
synchronous API) can move the class between its own steps.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from streamlit.proto.WidgetStates_pb2 import WidgetState

from loadtest import class_poll, load_client
from loadtest.class_poll import PollClient
from loadtest.load_client import Action, RunView

T = TypeVar("T")
IN = "Your answer is in"
VERDICTS = ("Right.", "Not quite", "The teacher revealed")


@dataclass
class LectureStudent(PollClient):
    """A student on the poll's link whose page and step follow the teacher's."""

    problems: list[str] = field(default_factory=list)

    def questions(self, view: RunView) -> list[str]:
        """The keys of the predict questions this run drew (the page adds each one's fingerprint)."""
        return [key for key in view.widget_ids if key.startswith("predict_")]

    async def follow(self) -> RunView:
        """Rerun as the watcher does; keep only this run's controls (an earlier step's question is gone)."""
        self.view.widget_ids, self.view.radio_options, self.view.fragments = {}, {}, {}
        _, view = await self.rerun(Action.POLL)
        self.page = view.page_names.get(view.page_hash, self.page)
        self._note(view, "follow")
        return view

    async def answer(self, question: str, option: int) -> RunView:
        """Choose option `option` (by its place on screen) of the question whose key starts with `question`."""
        view = self.view
        key = next((k for k in self.questions(view) if k.startswith(question)), None)
        if key is None:
            self.problems.append(f"student {self.index}: no question {question} on {self.page}")
            return view
        widget = view.widget_ids[key]
        options = view.radio_options[widget]
        self.view.widgets[widget] = WidgetState(id=widget, string_value=options[option % len(options)])
        _, view = await self.rerun(Action.POLL, fragment_id=view.fragments.get(key, ""))  # the box, as a browser
        self._note(view, "answer")
        if IN not in class_poll.joined(view):
            self.problems.append(f"student {self.index}: not told '{IN}' on {self.page}")
        return view

    async def sees_reveal(self) -> bool:
        view = await self.follow()
        return any(verdict in class_poll.joined(view) for verdict in VERDICTS)

    def _note(self, view: RunView, what: str) -> None:
        for problem in view.problems:
            self.problems.append(f"student {self.index} ({what}): {problem}")
        if any("cannot read" in text for text in view.texts):
            self.problems.append(f"student {self.index} ({what}): a value was dropped as unreadable")


def student(index: int, url: str, page: str, code: str) -> LectureStudent:
    return LectureStudent(
        index, url, time.monotonic(), random.Random(index), page, seed=0, link=f"present=true&room={code}"
    )


class Lecture:
    """`students` websocket students on their own event loop; each method runs all of them at once."""

    def __init__(self, url: str, page: str, code: str, students: int) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.students = [student(i, url, page, code) for i in range(students)]

    def _run(self, coroutine: Coroutine[Any, Any, T], timeout_s: float = 600) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout_s)

    def _each(self, action: Callable[[LectureStudent], Awaitable[T]], timeout_s: float = 600) -> list[T]:
        """`action` for every student at once, on the lecture's own loop."""

        async def everyone() -> list[T]:
            return list(await asyncio.gather(*(action(p) for p in self.students)))

        return self._run(everyone(), timeout_s)

    def join(self) -> None:
        async def arrive(pupil: LectureStudent) -> None:
            await asyncio.sleep(pupil.index * 0.05)  # a class opening the link over a few seconds
            await pupil.connect()
            _, view = await pupil.rerun(Action.OPEN)
            pupil.page = view.page_names.get(view.page_hash, pupil.page)

        self._each(arrive)

    def follow(self, page: str, ticks: int = 5) -> list[str]:
        """Every student reruns as its watcher does, tick after tick (a browser's every 2 s) until it shows
        `page` or `ticks` have passed; the pages they end on."""

        async def until_there(pupil: LectureStudent) -> str:
            for _ in range(ticks):
                await pupil.follow()
                if pupil.page == page:
                    break
            return pupil.page

        return self._each(until_there)

    def answer(self, question: str) -> None:
        self._each(lambda p: p.answer(question, p.index % 2))

    def saw_reveal(self) -> int:
        return sum(self._each(LectureStudent.sees_reveal))

    def problems(self) -> list[str]:
        return [problem for p in self.students for problem in p.problems]

    def close(self) -> None:
        try:
            self._each(load_client.close, timeout_s=60)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)
