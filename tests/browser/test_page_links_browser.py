"""A teacher's link carries each page's own controls to a student's browser (issue 13).

The query picker, the preset box, the real model's sentence and head and the training lab's
setup are in the link: the student who opens it sees the teacher's screen.
"""

from __future__ import annotations

import pytest

from core.app.settings import PRESETS
from tests.support import CHROMIUM_PATH as CHROMIUM
from tests.support import choose, wait_for_rerun

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed"),
]


def visit(page, url: str):  # noqa: ANN201 - a Playwright page
    """Open `url` in `page` and wait until the lesson has finished drawing."""
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector("h1", timeout=60_000)
    wait_for_rerun(page)
    return page


def open_as_teacher(browser, url: str):  # noqa: ANN201
    return visit(browser.new_context(viewport={"width": 1400, "height": 900}).new_page(), url)


def open_as_student(browser, url: str):  # noqa: ANN201 - a phone
    return visit(browser.new_context(viewport={"width": 390, "height": 844}).new_page(), url)


def test_the_query_token_and_the_preset_travel_in_the_link(server: str, browser) -> None:  # noqa: F811
    teacher = open_as_teacher(browser, f"{server}/trainable_weights")
    choose(teacher, "Query token", "4: with")
    teacher.wait_for_url("**query=4**", timeout=30_000)
    # The box shows the source's title; the link keeps its short key.
    choose(
        teacher,
        "Input (a source's worked example, or your own sentence)",
        PRESETS["article"].label,
        where='[data-testid="stSidebar"]',
    )
    teacher.wait_for_url("**preset=article**", timeout=30_000)
    choose(teacher, "Query token", "3: short")  # Life is short, eat dessert first
    teacher.wait_for_url("**query=3**", timeout=30_000)

    student = open_as_student(browser, teacher.url)
    query = student.locator('[data-testid="stSelectbox"]').filter(has_text="Query token").locator("input")
    assert query.input_value() == "3: short"
    preset = student.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first.locator("input")
    assert preset.input_value() == PRESETS["article"].label
    assert student.locator('[data-testid="stException"]').count() == 0


def test_the_real_models_head_and_the_training_setup_travel_in_the_link(server: str, browser) -> None:  # noqa: F811
    teacher = open_as_teacher(browser, f"{server}/real_model")
    choose(teacher, "Head", "5")
    teacher.wait_for_url("**real_head=5**", timeout=30_000)
    student = open_as_student(browser, teacher.url)
    head = student.locator('[data-testid="stSelectbox"]').filter(has_text="Head").locator("input").first
    assert head.input_value() == "5"

    visit(teacher, f"{server}/training_lab")
    choose(teacher, "Task", "induction (repeat after a random gap)")
    teacher.wait_for_url("**train_task=induction**", timeout=30_000)
    teacher.wait_for_url("**train_layers=2**", timeout=30_000)  # the task brought its depth
    student = open_as_student(browser, teacher.url)
    task = student.locator('[data-testid="stSelectbox"]').filter(has_text="Task").locator("input").first
    assert task.input_value() == "induction (repeat after a random gap)"
    layers = student.locator('[data-testid="stRadio"]').filter(has_text="Layers")
    assert layers.get_by_role("radio", name="2").is_checked()
