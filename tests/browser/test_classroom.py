"""A class on a busy server, in real browsers: every answer counted (issue 40, items 1 and 6).

The class poll lost every answer of three students on a loaded 2-core server (0 of 9): a student's
choice reached the server before its box was registered again, and the forged-value check dropped it
("A control sent a value the app cannot read"). These tests run the way a class does: a teacher's
projector, students in Chromium (one on a phone), and busy loops on every core.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import support

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(support.CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]
WAIT_MS = 90_000  # a loaded 2-core machine: a student's answer, the teacher's count, a reveal
ROUNDS = 3
STUDENTS = 3
PROJECTOR = {"viewport": {"width": 1280, "height": 800}}
LAPTOP = {"viewport": {"width": 1366, "height": 768}}
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
CANNOT_READ = "cannot read"


@contextlib.contextmanager
def busy_machine(loops: int | None = None) -> Iterator[None]:
    """A loop on every core at normal priority, as a class's shared server never idles."""
    processes = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(loops or os.cpu_count() or 2)
    ]
    try:
        yield
    finally:
        for process in processes:
            process.kill()
            process.wait(timeout=10)


def settle(page) -> None:
    page.wait_for_selector(support.IDLE, timeout=WAIT_MS)
    page.wait_for_timeout(300)


def start_poll(teacher, server: str, slug: str) -> str:
    """The teacher opens `slug` in presentation mode and starts a poll; the students' link."""
    teacher.goto(f"{server}/{slug}?present=1")
    settle(teacher)
    teacher.locator('[data-testid="stExpandSidebarButton"]').click()
    teacher.get_by_role("button", name=re.compile("Start a class poll")).click()
    settle(teacher)
    link = teacher.locator('[data-testid="stCode"]').filter(has_text="room=").first.text_content().strip()
    assert re.search(r"room=[0-9A-Z]{8}", link), link
    teacher.locator('[data-testid="stSidebarCollapseButton"] button').click()
    return link


def prediction_options(page):
    return page.locator(
        '[data-testid="stMain"] [role="radiogroup"][aria-label="Your prediction"] [data-testid="stRadioOption"]'
    )


FRAMES: dict[int, list[str]] = {}  # id(page) -> its websocket's messages, one line each (`record_frames`)


def record_frames(page) -> None:
    """With ATTENTION_LAB_FAILURE_SHOTS set: note every message on the page's websocket (its kind, and for a run
    its id, page, fragment and end), so that a failure saves what the browser was told, in order."""
    if not os.environ.get("ATTENTION_LAB_FAILURE_SHOTS"):
        return
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    lines, start = FRAMES.setdefault(id(page), []), time.monotonic()

    def received(payload: bytes | str) -> None:
        if isinstance(payload, str):
            return
        message = ForwardMsg()
        message.ParseFromString(payload)
        kind, session = message.WhichOneof("type"), message.new_session
        detail = {
            "new_session": lambda: f"page {session.page_script_hash[:8]}",
            "delta": lambda: f"{list(message.metadata.delta_path)} {message.delta.WhichOneof('type')}",
            "script_finished": lambda: ForwardMsg.ScriptFinishedStatus.Name(message.script_finished),
            "session_status_changed": lambda: f"running={message.session_status_changed.script_is_running}",
            "auto_rerun": lambda: f"fragment {message.auto_rerun.fragment_id[:12]} every {message.auto_rerun.interval}",
            "stop_auto_rerun": lambda: f"fragment {message.stop_auto_rerun.fragment_id[:12]}",
        }.get(kind or "", lambda: "")()
        run = message.metadata.run  # which script run (and fragments) the message belongs to
        fragments = [fragment[:12] for fragment in run.fragment_ids]
        where = f"run {run.script_run_id[:6]}" + (f" fragments {fragments}" if fragments else "")
        lines.append(f"{time.monotonic() - start:8.2f} <- {kind} {detail} ({where})")

    def sent(payload: bytes | str) -> None:
        if isinstance(payload, str):
            return
        message = BackMsg()
        message.ParseFromString(payload)
        kind, rerun = message.WhichOneof("type"), message.rerun_script
        detail = f"page {rerun.page_script_hash[:8]} fragment {rerun.fragment_id[:12]} auto={rerun.is_auto_rerun}"
        lines.append(f"{time.monotonic() - start:8.2f} -> {kind} {detail if kind == 'rerun_script' else ''}")

    page.on("websocket", lambda socket: (socket.on("framereceived", received), socket.on("framesent", sent)))


def answer(student, option: int) -> None:
    options = prediction_options(student)
    try:
        options.first.wait_for(state="visible", timeout=WAIT_MS)
    except playwright_api.TimeoutError:
        if shots := os.environ.get("ATTENTION_LAB_FAILURE_SHOTS"):
            student.screenshot(path=str(Path(shots) / "student_no_question.png"), full_page=True)
            (Path(shots) / "student_no_question.html").write_text(student.content())
            (Path(shots) / "student_no_question_frames.txt").write_text("\n".join(FRAMES.get(id(student), [])))
        raise AssertionError(f"a student never saw the question: {page_text(student)[:600]}") from None
    options.nth(option).click()


def page_text(page) -> str:
    return page.locator('[data-testid="stApp"]').inner_text()


def no_raw_box_or_dropped_value(page, who: str) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0, f"{who}: Streamlit's raw error box"
    assert CANNOT_READ not in page_text(page), f"{who}: a genuine answer was dropped as unreadable"


VERDICT = '[data-testid="stAlertContentSuccess"], [data-testid="stAlertContentWarning"]'


def answer_is_in(student) -> bool:
    try:
        student.get_by_text("Your answer is in").first.wait_for(timeout=WAIT_MS)
    except playwright_api.TimeoutError:
        if shots := os.environ.get("ATTENTION_LAB_FAILURE_SHOTS"):
            student.screenshot(path=str(Path(shots) / "student_not_told_in.png"), full_page=True)
            (Path(shots) / "student_not_told_in.html").write_text(student.content())
            (Path(shots) / "student_not_told_in_frames.txt").write_text("\n".join(FRAMES.get(id(student), [])))
        return False
    return True


def teacher_count(teacher, expected: int) -> int:
    """The teacher's "Class poll: N answers", once it reads `expected` (or what it reads after the wait)."""
    with contextlib.suppress(playwright_api.TimeoutError):
        teacher.get_by_text(re.compile(rf"Class poll: {expected} answers?\b")).first.wait_for(timeout=WAIT_MS)
    found = re.search(r"Class poll: (\d+) answers?", page_text(teacher))
    return int(found.group(1)) if found else 0


def after_the_reveal(student, who: str) -> list[str]:
    """What went wrong on a browser student's page once the teacher revealed: the verdict never came (no
    click on the student's side), or a raw box or a dropped value shows."""
    problems = []
    try:
        student.locator(VERDICT).first.wait_for(timeout=WAIT_MS)
    except playwright_api.TimeoutError:
        problems.append(f"{who}: the reveal did not arrive")
    try:
        no_raw_box_or_dropped_value(student, who)
    except AssertionError:
        problems.append(f"{who}: a raw box or a dropped value")
    return problems


def test_every_answer_of_three_browser_students_counts_on_a_busy_machine(server: str, browser) -> None:
    told_in, counted, problems = [], [], []
    with busy_machine():
        for round_ in range(ROUNDS):
            teacher_context = browser.new_context(**PROJECTOR)
            teacher = teacher_context.new_page()
            link = start_poll(teacher, server, "why_scale")
            contexts = [browser.new_context(**(PHONE if i == 0 else LAPTOP)) for i in range(STUDENTS)]
            students = [context.new_page() for context in contexts]
            for student in students:
                record_frames(student)
                student.goto(link)
            for student in students:
                settle(student)
                student.get_by_text(re.compile("you follow the teacher")).first.wait_for(timeout=WAIT_MS)
            for index, student in enumerate(students):  # the class answers together
                answer(student, index % 2)
            told_in.append(sum(answer_is_in(student) for student in students))
            counted.append(teacher_count(teacher, STUDENTS))
            teacher.get_by_role("button", name=re.compile("Reveal")).click()
            for index, student in enumerate(students):
                problems += after_the_reveal(student, f"round {round_ + 1}, student {index + 1}")
            for context in [teacher_context, *contexts]:
                context.close()
    print(f"\nanswers told 'in' per round: {told_in}; counted on the teacher's screen: {counted} (of {STUDENTS})")
    assert counted == [STUDENTS] * ROUNDS, (counted, told_in, problems)
    assert told_in == [STUDENTS] * ROUNDS, (counted, told_in, problems)
    assert not problems, problems


# ---------------------------------------------------------------- a lecture (issue 40, item 6)
LECTURE_LESSONS = 3  # the lecture path's first lessons, each with its question polled
BROWSER_STUDENTS = 2  # in Chromium, one of them on a phone
WEBSOCKET_STUDENTS = 40  # following and answering over Streamlit's own protocol (loadtest/lecture.py)
MAX_STEPS = 12


def lecture_lessons() -> list[str]:
    """The lecture path walks the registry's lessons in order (core/lessons/overview.py)."""
    from core.app import registry

    return [spec.slug for spec in registry.lessons()[:LECTURE_LESSONS]]


def teacher_opens(teacher, slug: str) -> None:
    """Through the sidebar's lesson list, as a teacher does: the session (and its poll) stays."""
    teacher.locator('[data-testid="stExpandSidebarButton"]').click()
    teacher.locator(f'[data-testid="stSidebarNavLink"][href$="/{slug}"]').first.click()
    teacher.wait_for_url(re.compile(rf"/{slug}(\?|$)"), timeout=WAIT_MS)  # the switch has happened, then its run
    settle(teacher)
    teacher.locator('[data-testid="stSidebarCollapseButton"] button').click()


def step_box(teacher):
    return teacher.locator('[data-testid="stMain"] [data-testid="stNumberInputField"]').first


def teacher_reaches_the_question(teacher) -> None:
    """Next, step by step, until the step with the lesson's question (its tally: "Class poll: 0 answers")."""
    seen = []
    for _ in range(MAX_STEPS):
        text = page_text(teacher)
        seen.append(text[:300])
        if re.search(r"Class poll: 0 answers", text):
            return
        forward = teacher.get_by_role("button", name=re.compile("Next")).first
        if forward.is_disabled():
            break
        step = int(step_box(teacher).input_value())
        forward.click()
        # The app reads "not running" until the click's rerun starts: on a busy machine a read right after the
        # click saw the old step, and the teacher walked past the question. Wait for the step to move first.
        playwright_api.expect(step_box(teacher)).to_have_value(str(step + 1), timeout=WAIT_MS)
        settle(teacher)
    if shots := os.environ.get("ATTENTION_LAB_FAILURE_SHOTS"):
        teacher.screenshot(path=str(Path(shots) / "teacher_no_question.png"), full_page=True)
    raise AssertionError(f"the teacher never reached a question: {seen}")


# In the slow layer since session 25, after six runs in a row had passed on a 2-core machine with busy loops on
# every core (42 of 42 counted and revealed in each of 3 lessons, 74-78 s a run). Fixed before: the blank page
# after following the teacher (ui/class_poll._watch_room; 4 in 7 runs failed without it) and the page left half
# drawn by a full run cut short (class_poll.full_run).
def test_a_lecture_with_a_poll_on_every_question_counts_every_answer(server: str, browser) -> None:
    from loadtest.lecture import Lecture

    lessons = lecture_lessons()
    total = BROWSER_STUDENTS + WEBSOCKET_STUDENTS
    counted, revealed_to, problems = {}, {}, []
    with busy_machine():
        teacher = browser.new_context(**PROJECTOR).new_page()
        link = start_poll(teacher, server, lessons[0])
        code = re.search(r"room=([0-9A-Z]{8})", link).group(1)
        browsers = [browser.new_context(**(PHONE if i == 0 else LAPTOP)).new_page() for i in range(BROWSER_STUDENTS)]
        for student in browsers:
            record_frames(student)
            student.goto(link)
            settle(student)
        lecture = Lecture(server, lessons[0], code, WEBSOCKET_STUDENTS)
        try:
            lecture.join()
            for number, slug in enumerate(lessons):
                if number:
                    teacher_opens(teacher, slug)
                teacher_reaches_the_question(teacher)
                on_pages = lecture.follow(slug)  # the watcher's reruns: every student reaches the teacher's step
                assert set(on_pages) == {slug}, on_pages
                for index, student in enumerate(browsers):
                    answer(student, index % 2)
                lecture.answer(f"predict_{slug}")
                for student in browsers:
                    assert answer_is_in(student), f"{slug}: a browser student was not told the answer is in"
                counted[slug] = teacher_count(teacher, total)
                teacher.get_by_role("button", name=re.compile("Reveal")).click()
                settle(teacher)
                seen = lecture.saw_reveal()
                for index, student in enumerate(browsers):
                    found = after_the_reveal(student, f"{slug}: browser student {index + 1}")
                    seen += not any("did not arrive" in problem for problem in found)
                    problems += found
                revealed_to[slug] = seen
                no_raw_box_or_dropped_value(teacher, f"{slug}, the teacher")
            problems += lecture.problems()
        finally:
            lecture.close()
    print(f"\nlecture of {total} students: counted {counted}, reveal seen by {revealed_to}")
    assert counted == dict.fromkeys(lessons, total), (counted, problems[:10])
    assert revealed_to == dict.fromkeys(lessons, total), (revealed_to, problems[:10])
    assert not problems, problems[:10]
