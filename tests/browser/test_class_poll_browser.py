"""The class poll in a real browser: the teacher's projector and a student's phone, live.

What only a browser shows: the QR code's size on a projector-sized screen, the teacher's counts
updating with no click (the fragment's timer runs in the browser), and the Reveal reaching a
student's phone with no click either. With ATTENTION_LAB_SCREENSHOTS=tests/screenshots it saves the
README's two pictures of the poll (small JPEGs).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests import support

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(support.CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]
SHOTS = os.environ.get("ATTENTION_LAB_SCREENSHOTS")
LIVE_S = 20  # the refresh runs every 2 s; a loaded test machine may take a few cycles


def settle(page) -> None:
    page.wait_for_selector(support.IDLE, timeout=60_000)
    page.wait_for_timeout(500)


def teacher_starting_a_poll(browser, url: str):
    """A projector's page at `url` (presentation mode) whose sidebar's button has started a class poll; the
    sidebar is left open."""
    teacher = browser.new_context(viewport={"width": 1280, "height": 720}, device_scale_factor=1.5).new_page()
    teacher.goto(url)
    settle(teacher)
    teacher.locator('[data-testid="stExpandSidebarButton"]').click()
    teacher.get_by_role("button", name=re.compile("Start a class poll")).click()
    settle(teacher)
    return teacher


def test_the_teachers_screen_counts_live_and_the_reveal_reaches_a_phone(server: str, browser) -> None:
    teacher = teacher_starting_a_poll(browser, f"{server}/why_scale?present=1")
    link = teacher.locator('[data-testid="stCode"]').filter(has_text="room=").first.text_content().strip()
    assert re.search(r"room=[0-9A-Z]{8}", link), link
    teacher.locator('[data-testid="stSidebarCollapseButton"] button').click()
    # Step 1 holds the question: the link's panel stays folded, so that the question and its live count stay
    # on a projector's screen (the s25 review: the open panel pushed them below the fold).
    count = teacher.get_by_text(re.compile(r"Class poll: 0 answers$")).first
    count.wait_for(timeout=30_000)
    teacher.wait_for_timeout(1000)  # the sidebar's closing slide
    reveal = teacher.get_by_role("button", name=re.compile("Reveal")).first
    for element in (count, reveal):
        box = element.bounding_box()
        assert box and box["y"] + box["height"] <= 720, box
    teacher.get_by_text("the students' link and QR code").first.click()  # the teacher opens it for the class
    qr = teacher.locator('[data-testid="stImage"] img').first
    qr.wait_for(state="visible", timeout=30_000)
    box = qr.bounding_box()
    assert box and box["width"] >= 300 and box["height"] >= 300, box  # a third of a 1280-px projector

    student = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True).new_page()
    student.goto(link)
    settle(student)
    student.get_by_text(re.compile("you follow the teacher")).first.wait_for(timeout=30_000)
    # The prediction's radio in the lesson, not the sidebar's Weights radio (greyed out on this page).
    student.locator('[data-testid="stMain"] [data-testid="stRadio"] [role="radiogroup"] label').first.click()
    student.get_by_text("Your answer is in").first.wait_for(timeout=30_000)

    # No click on the teacher's screen: the live refresh brings the count.
    teacher.get_by_text(re.compile(r"Class poll: 1 answer$")).first.wait_for(timeout=LIVE_S * 1000)
    if SHOTS:
        teacher.set_viewport_size({"width": 1280, "height": 1440})  # the QR code and the counts in one picture
        teacher.wait_for_timeout(2500)
        teacher.screenshot(path=str(Path(SHOTS) / "class_poll_teacher.jpg"), type="jpeg", quality=50)
        student.screenshot(path=str(Path(SHOTS) / "class_poll_student.jpg"), type="jpeg", quality=55)

    teacher.get_by_role("button", name=re.compile("Reveal")).click()
    revealed = teacher.get_by_text("Revealed to the class").first
    revealed.wait_for(timeout=30_000)
    # The answer above the class's bars: under them it started at a projector's fold (the s30 review).
    bars = teacher.locator('[data-testid="stVegaLiteChart"][aria-label^="The class\'s answers"]').first
    said, drawn = revealed.bounding_box(), bars.bounding_box()
    assert said and drawn and said["y"] < drawn["y"], (said, drawn)
    verdict = student.locator('[data-testid="stAlertContentSuccess"], [data-testid="stAlertContentWarning"]')
    verdict.first.wait_for(timeout=LIVE_S * 1000)  # no click on the phone: its watcher saw the reveal
    assert "Your answer is in" not in student.locator('[data-testid="stMain"]').inner_text()


def test_with_the_sidebar_left_open_the_count_and_reveal_stand_beside_the_options(server: str, browser) -> None:
    # A teacher opens the sidebar to start the poll and leaves it open: under the options, lesson 1's count and
    # Reveal ended below a projector's fold (the s26 review). Beside them, both stay on the screen, the button
    # with its label.
    teacher = teacher_starting_a_poll(browser, f"{server}/without_weights?present=1&step=2")
    count = teacher.get_by_text(re.compile(r"Class poll: 0 answers$")).first
    count.wait_for(timeout=30_000)
    reveal = teacher.get_by_role("button", name=re.compile("Reveal")).first
    options = teacher.locator('[role="radiogroup"][aria-label="Your prediction"]').first
    for element in (count, reveal):
        box = element.bounding_box()
        assert box and box["y"] + box["height"] <= 720, box
    assert reveal.inner_text().strip().endswith("Reveal")
    beside, under = count.bounding_box(), options.bounding_box()
    assert beside and under and beside["x"] > under["x"] + under["width"] / 2, (beside, under)
