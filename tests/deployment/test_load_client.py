"""The load client's protocol pieces, without a server: what it sends, what it reads, what it flags."""

from __future__ import annotations

import random
import statistics

from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.NumberInput_pb2 import NumberInput
from streamlit.proto.Slider_pb2 import Slider

from loadtest import load_client
from loadtest.load_client import RunView, check, read_message, widget_state


def element(message: ForwardMsg, kind: str):
    return getattr(message.delta.new_element, kind)


def navigation(view: RunView, current: str) -> None:
    message = ForwardMsg()
    for path, page_hash in (("", "h-default"), ("overview", "h-overview"), ("multi_head", "h-multi")):
        page = message.navigation.app_pages.add()
        page.url_pathname, page.page_script_hash = path, page_hash
    message.navigation.page_script_hash = current
    read_message(message, view)


def code(view: RunView, text: str) -> None:
    message = ForwardMsg()
    element(message, "code").code_text = text
    read_message(message, view)


def test_a_run_with_the_students_own_seed_passes() -> None:
    view = RunView()
    navigation(view, "h-multi")
    code(view, "g = torch.Generator().manual_seed(5003)\n")
    assert check(view, "multi_head", 5003) == []
    assert view.pages["overview"] == "h-default"  # "/" first: the default page, not its hidden alias


def test_another_students_seed_a_missing_seed_and_the_wrong_page_are_flagged() -> None:
    view = RunView()
    navigation(view, "h-overview")
    code(view, "seed = 7001\n")
    problems = check(view, "multi_head", 5003)
    assert any("asked for page multi_head, got overview" in p for p in problems)
    assert any("Code box seeds [7001]" in p for p in problems)
    assert any("without seed 5003" in p for p in problems)


def test_an_exception_element_is_a_problem() -> None:
    view = RunView()
    message = ForwardMsg()
    element(message, "exception").message = "boom"
    read_message(message, view)
    assert view.problems and "boom" in view.problems[0]


def test_widget_states_are_what_a_browser_would_send() -> None:
    seed_box = NumberInput(
        id="$$ID-x-seed", default=123.0, value=5000.0, set_value=True, data_type=NumberInput.DataType.FLOAT
    )
    assert widget_state("number_input", seed_box, None).double_value == 5000.0
    previous = widget_state("number_input", seed_box, None)
    previous.double_value = 5001.0  # the student clicked "+"; the server does not set it again
    unset = NumberInput(id="$$ID-x-seed", default=123.0, data_type=NumberInput.DataType.FLOAT)
    assert widget_state("number_input", unset, previous).double_value == 5001.0
    # An integer box's value goes as int_value, as the browser sends it (the server drops any other field).
    heads_box = NumberInput(id="$$ID-x-train_heads", default=2.0, data_type=NumberInput.DataType.INT)
    assert widget_state("number_input", heads_box, None).WhichOneof("value") == "int_value"
    assert widget_state("number_input", heads_box, None).int_value == 2
    select_slider = Slider(id="$$ID-x-trials", options=["1000", "20000", "100000"], default=[1.0])
    assert list(widget_state("slider", select_slider, None).string_array_value.data) == ["20000"]
    plain_slider = Slider(id="$$ID-x-d_out", default=[2.0])
    assert list(widget_state("slider", plain_slider, None).double_array_value.data) == [2.0]


def test_think_time_is_lognormal_with_the_documented_median() -> None:
    rng = random.Random(0)
    pauses = [load_client.think_time(rng) for _ in range(20_000)]
    assert 4.8 < statistics.median(pauses) < 5.2
    assert 5.7 < statistics.mean(pauses) < 6.3  # median · exp(sigma² / 2) = 5.99
    assert min(pauses) > 0


def test_a_run_that_never_finishes_is_reported_as_such() -> None:
    import asyncio

    class SilentSocket:  # accepts the rerun, never answers
        async def send(self, data: bytes) -> None:
            pass

        async def recv(self) -> bytes:
            await asyncio.sleep(3600)

        async def close(self) -> None:
            pass

    async def one_student() -> load_client.Recorder:
        recorder = load_client.Recorder(started=0.0)
        student = load_client.Student(0, "http://127.0.0.1:1", 0.0, random.Random(0), "overview", seed=1000)

        async def connect() -> None:
            student.socket = SilentSocket()

        student.connect = connect
        await load_client.attend(student, recorder, ends_at=asyncio.get_running_loop().time() + 0.5)
        return recorder

    original = load_client.RUN_TIMEOUT_S
    load_client.RUN_TIMEOUT_S = 0.1
    try:
        recorder = asyncio.run(one_student())
    finally:
        load_client.RUN_TIMEOUT_S = original
    assert recorder.errors and all("no script_finished" in e for e in recorder.errors), recorder.errors
    assert recorder.reconnects == 0  # a slow server is not a lost connection


def test_a_reference_student_moves_its_slider_and_checks_only_errors() -> None:
    """The capacity run's yardstick class (loadtest/capacity.py): same random draws, one slider, one page."""
    student = load_client.ReferenceStudent(0, "http://127.0.0.1:1", 0.0, random.Random(0), "overview", seed=1000)
    message = ForwardMsg()
    slider = element(message, "slider")
    slider.id, slider.default[:] = "$$ID-abc-value", [50.0]
    read_message(message, student.view)
    student.set_seed(1007)
    assert list(student.view.widgets["$$ID-abc-value"].double_array_value.data) == [1007 % 101]
    navigation(student.view, "h-multi")  # no page or seed checks on the reference page
    assert student.problems(student.view) == []
    assert load_client.ReferenceStudent.first_page("multi_head") == "overview"
    assert load_client.Student.first_page("multi_head") == "multi_head"


def test_a_button_is_read_by_its_label() -> None:
    view = RunView()
    message = ForwardMsg()
    button = element(message, "button")
    button.id, button.label = "$$ID-xyz-train_button", "Train"
    read_message(message, view)
    assert view.buttons == {"Train": "$$ID-xyz-train_button"}
