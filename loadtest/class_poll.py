"""The class poll across replicas, and a class of 100 answering at once.

    python -m loadtest.class_poll --students 100            # the load row: a class answers within ~3 s
    python -m loadtest.class_poll --students 6 --restart-redis  # what tests/deployment/test_class_poll_replicas.py runs

Two app processes behind HAProxy share one redis-server (loadtest/replicas.py starts them). Everyone
speaks Streamlit's own websocket protocol (loadtest/load_client.py):
- the teacher opens the why-scale lesson in presentation mode on one replica and clicks
  "Start a class poll"; the room's code is read from the teacher's page;
- the students open the lesson with ?room=<code> (the balancer spreads them over both replicas),
  then all answer the predict question within `answer_window_s`, each option chosen by a known rule;
- meanwhile the teacher's live counts are refreshed every REFRESH_S as the browser's timer does (a
  rerun of that st.fragment) and timed; a quiet baseline of refreshes is timed first; a student's
  answer is a rerun of the question's own fragment, as a browser sends it;
- checked: no error, every student told "Your answer is in", and the teacher's page shows
  "<N> answers" and the exact split (from the chart's description);
- with `restart_redis`: Redis is stopped mid-poll (the teacher's page and a student's answer say the
  poll is unavailable; the lesson still runs), started again, and the poll carries on.
Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field

from streamlit.proto.WidgetStates_pb2 import WidgetState

from loadtest import load_client, replicas
from loadtest.load_client import Action, RunView
from testkit.harness import percentile

PAGE = "why_scale"
QUESTION_KEY = "predict_why_scale"
START_KEY = "class_poll_start"
REVEAL_KEY = f"class_poll_reveal_{PAGE}:{QUESTION_KEY}"  # the Reveal button, in the teacher's live counts
CODE_SHOWN = re.compile(r"Code \*\*([0-9A-Z]{4})-([0-9A-Z]{4})\*\*")
ANSWERS_SHOWN = re.compile(r"Class poll: (\d+) answers?\*\*")
REFRESH_S = 0.2  # the browser refreshes every 2 s; more often here, for a p95 from more than a handful


def split_text(counts: dict[str, int]) -> str:
    """Counts per option as one line, options in alphabetical order: "label: count; ..."."""
    return "; ".join(f"{label}: {count}" for label, count in sorted(counts.items()))


def question_key(view: RunView, key: str) -> str:
    """The prediction radio's full widget key: the page adds the question's fingerprint to `key`."""
    return next((name for name in view.widget_ids if name == key or name.startswith(f"{key}_")), key)


@dataclass
class PollClient(load_client.Student):
    """A simulated teacher or student: a load_client.Student whose link carries its own parameters."""

    link: str = ""

    @property
    def query_string(self) -> str:  # overrides Student's seed-only link
        return self.link

    async def click(self, key: str) -> RunView:
        """Press the button with this key (one rerun carrying its trigger)."""
        widget = self.view.widget_ids[key]
        self.view.widgets[widget] = WidgetState(id=widget, trigger_value=True)
        try:
            _, view = await self.rerun(Action.POLL)
        finally:
            self.view.widgets.pop(widget, None)  # a trigger is sent once
        return view

    async def choose(self, key: str, option: int) -> tuple[float, RunView]:
        """Choose option `option` of the radio with this key (its label is the widget's value)."""
        key = question_key(self.view, key)
        widget = self.view.widget_ids[key]
        label = self.view.radio_options[widget][option]
        self.view.widgets[widget] = WidgetState(id=widget, string_value=label)
        return await self.rerun(Action.POLL, fragment_id=self.view.fragments.get(key, ""))  # the box, as a browser

    async def refresh(self, key: str) -> tuple[float, RunView]:
        """Rerun the st.fragment that holds the widget with this key, as its run_every timer does."""
        return await self.rerun(Action.POLL, fragment_id=self.view.fragments[key])


def choice_of(student: int) -> int:
    """Student i's answer: 0 for every third student, else 1 (a split with a known count)."""
    return 0 if student % 3 == 0 else 1


@dataclass
class PollRun:
    """What the teacher and the students saw."""

    students: int
    code: str = ""
    replicas_of_students: dict[str, int] = field(default_factory=dict)
    teacher_replica: str = ""
    answer_seconds: list[float] = field(default_factory=list)  # each student's answer: sent -> run finished
    answers_window_s: float = 0.0  # first answer sent -> last answer finished
    baseline_refresh_s: list[float] = field(default_factory=list)  # the teacher's page, nobody answering
    busy_refresh_s: list[float] = field(default_factory=list)  # ... while the class answers
    errors: list[str] = field(default_factory=list)
    shown_answers: int | None = None  # "N answers" on the teacher's page at the end
    shown_split: str = ""  # the chart's description on the teacher's page at the end
    expected_split: str = ""
    unavailable_teacher: bool | None = None  # with restart_redis: the note on the teacher's page
    unavailable_student: bool | None = None  # ... and on a student's, after an answer
    recovered_answers: int | None = None  # "N answers" once Redis is back and one more student answered
    load_average: float | None = None  # the machine's 1-minute load average at the end (a shared machine)

    def summary(self) -> dict:
        quantile = lambda values, q: round(percentile(values, q), 3) if values else None  # noqa: E731
        return {
            "students": self.students,
            "students_per_replica": self.replicas_of_students,
            "teacher_replica": self.teacher_replica,
            "answers_window_s": round(self.answers_window_s, 2),
            "answer_p50_s": quantile(self.answer_seconds, 0.5),
            "answer_p95_s": quantile(self.answer_seconds, 0.95),
            "teacher_refresh_quiet_p95_s": quantile(self.baseline_refresh_s, 0.95),
            "teacher_refresh_busy_p95_s": quantile(self.busy_refresh_s, 0.95),
            "teacher_refreshes_busy": len(self.busy_refresh_s),
            "errors": len(self.errors),
            "shown_answers": self.shown_answers,
            "split_right": self.shown_split.endswith(self.expected_split) if self.expected_split else None,
            "unavailable_teacher": self.unavailable_teacher,
            "unavailable_student": self.unavailable_student,
            "recovered_answers": self.recovered_answers,
            "load_average": self.load_average,
        }


def client(index: int, url: str, link: str) -> PollClient:
    return PollClient(index, url, time.monotonic(), random.Random(index), PAGE, seed=0, link=link)


def joined(view: RunView) -> str:
    return "\n".join(view.texts)


async def teacher_view(teacher: PollClient, run: PollRun) -> RunView:
    _, view = await teacher.rerun(Action.POLL)
    if view.problems:
        run.errors += [f"teacher: {p}" for p in view.problems]
    return view


async def class_answers(
    url: str, students: int, answer_window_s: float, run: PollRun, cluster: replicas.Cluster | None = None
) -> None:
    teacher = client(-1, url, "present=1")
    await teacher.connect()
    await teacher.rerun(Action.OPEN)
    run.teacher_replica = teacher.cookie.partition("=")[2]
    view = await teacher.click(START_KEY)
    found = CODE_SHOWN.search(joined(view))
    if not found:
        raise RuntimeError(f"no room code on the teacher's page: {joined(view)[:500]}")
    run.code = "".join(found.groups())
    for _ in range(20):  # the quiet baseline
        seconds, _ = await teacher.refresh(REVEAL_KEY)
        run.baseline_refresh_s.append(seconds)

    pupils = [client(i, url, f"present=true&room={run.code}") for i in range(students)]

    async def arrive(pupil: PollClient) -> None:
        await asyncio.sleep(pupil.index * 0.05)  # a class opening the link over a few seconds
        await pupil.connect()
        await pupil.rerun(Action.OPEN)

    await asyncio.gather(*(arrive(p) for p in pupils))
    run.replicas_of_students = dict(Counter(p.cookie.partition("=")[2] for p in pupils))

    first_sent: list[float] = []
    last_done: list[float] = []

    async def answer(pupil: PollClient) -> None:
        await asyncio.sleep(pupil.rng.random() * answer_window_s)
        first_sent.append(time.monotonic())
        try:
            seconds, view = await pupil.choose(QUESTION_KEY, choice_of(pupil.index))
        except (load_client.ConnectionLost, TimeoutError, OSError) as error:
            run.errors.append(f"student {pupil.index}: {type(error).__name__}: {error}")
            return
        last_done.append(time.monotonic())
        run.answer_seconds.append(seconds)
        if view.problems or "Your answer is in" not in joined(view):
            run.errors.append(f"student {pupil.index}: {view.problems or joined(view)[-300:]}")

    done = asyncio.Event()

    async def teacher_refreshes() -> None:
        while not done.is_set():
            seconds, _ = await teacher.refresh(REVEAL_KEY)
            run.busy_refresh_s.append(seconds)
            await asyncio.sleep(REFRESH_S)

    refreshing = asyncio.create_task(teacher_refreshes())
    await asyncio.gather(*(answer(p) for p in pupils))
    done.set()
    await refreshing
    run.answers_window_s = max(last_done) - min(first_sent) if last_done else 0.0

    final = joined(await teacher_view(teacher, run))
    shown = ANSWERS_SHOWN.search(final)
    run.shown_answers = int(shown.group(1)) if shown else None
    split = Counter(choice_of(p.index) for p in pupils)
    options = teacher.view.radio_options[teacher.view.widget_ids[question_key(teacher.view, QUESTION_KEY)]]
    # Students see the options in the question's shuffled order, the teacher's chart lists them in the
    # lesson's: compare the counts per option, in one canonical order.
    run.expected_split = split_text({option: split[index] for index, option in enumerate(options)})
    shown = next((t for t in teacher.view.texts if t.startswith("The class's answers")), "")
    parts = [part.rsplit(": ", 1) for part in shown.split("; ")[1:]]  # after "The class's answers: N answers"
    run.shown_split = split_text({label: int(count) for label, count in parts if count.isdigit()})

    if cluster is not None and cluster.redis is not None:
        cluster.redis.stop()
        run.unavailable_teacher = "unavailable" in joined(await teacher_view(teacher, run))
        late = pupils[0]
        _, view = await late.choose(QUESTION_KEY, 1 - choice_of(late.index))
        run.unavailable_student = "unavailable" in joined(view) and not view.problems
        cluster.redis.start()
        await late.choose(QUESTION_KEY, choice_of(late.index))  # back to the answer counted before
        newcomer = client(students, url, f"present=true&room={run.code}")
        await newcomer.connect()
        await newcomer.rerun(Action.OPEN)
        await newcomer.choose(QUESTION_KEY, 0)
        shown = ANSWERS_SHOWN.search(joined(await teacher_view(teacher, run)))
        run.recovered_answers = int(shown.group(1)) if shown else None
        await load_client.close(newcomer)
    for someone in [teacher, *pupils]:
        await load_client.close(someone)


def run(students: int = 100, answer_window_s: float = 3.0, restart_redis: bool = False) -> PollRun:
    """Two replicas, one Redis, one teacher, `students` students answering within `answer_window_s`."""
    cluster = replicas.start(2)
    if cluster.redis is None:
        cluster.stop()
        raise RuntimeError("redis-server is not installed")
    result = PollRun(students)
    try:
        asyncio.run(class_answers(cluster.url, students, answer_window_s, result, cluster if restart_redis else None))
        result.load_average = round(os.getloadavg()[0], 1)
    finally:
        cluster.stop()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--answer-window-s", type=float, default=3.0)
    parser.add_argument("--restart-redis", action="store_true")
    args = parser.parse_args()
    result = run(args.students, args.answer_window_s, args.restart_redis)
    print(json.dumps(result.summary(), indent=2))
    for line in result.errors[:20]:
        print(line)


if __name__ == "__main__":
    main()
