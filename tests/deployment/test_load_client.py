"""The load client's protocol pieces, without a server: what it sends, what it reads, what it flags."""

from __future__ import annotations

import asyncio
import random
import statistics

from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.NumberInput_pb2 import NumberInput
from streamlit.proto.Slider_pb2 import Slider
from streamlit.proto.WidgetStates_pb2 import WidgetState

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
    view = RunView(whole=True)  # the whole page ran (not a fragment alone), with no question on it
    navigation(view, "h-multi")
    code(view, "g = torch.Generator().manual_seed(5003)\n")
    assert check(view, "multi_head", 5003) == []
    assert view.pages["overview"] == "h-default"  # "/" first: the default page, not its hidden alias


def test_another_students_seed_a_missing_seed_and_the_wrong_page_are_flagged() -> None:
    view = RunView(whole=True)
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


# ---------------------------------------------------- a student answers before what the answer unlocks is checked
class OneQuestionPage:
    """A server socket for one lesson, speaking just enough of Streamlit's protocol for a student.

    Like lesson 9's cost section, the page asks a predict question (a radio keyed `predict_...` in its own
    st.fragment) and draws its Code box, with the student's seed, only once the rerun carries an answer.
    As on the real server, a choice reruns the fragment, which reruns the page (FINISHED_EARLY_FOR_RERUN,
    then a whole run); every whole run moves the fragment's id (what an answer unlocks above a box moves
    it), and a rerun of a fragment id the page no longer has gets no answer at all. `reset_on_seed`: the
    question's key changes with the seed (its fingerprint), so a seed step asks it again.
    """

    PAGE = "attention_at_scale"
    OPTIONS = ("2 times", "4 times", "8 times")

    def __init__(self, reset_on_seed: bool = False) -> None:
        self.replies: asyncio.Queue[bytes] = asyncio.Queue()
        self.reset_on_seed = reset_on_seed
        self.runs = 0  # whole runs so far
        self.fragment_reruns: list[tuple[str, str]] = []  # (fragment id, the answer it carried)

    def radio_id(self, seed: int) -> str:
        return f"$$ID-abc-predict_cost_{seed if self.reset_on_seed else 'fixed'}"

    def fragment_id(self) -> str:
        return f"fragment-{self.runs}"

    async def send(self, data: bytes) -> None:
        from streamlit.proto.BackMsg_pb2 import BackMsg

        message = BackMsg()
        message.ParseFromString(data)
        rerun = message.rerun_script
        seed = int(rerun.query_string.removeprefix("seed="))
        answers = {w.id: w.string_value for w in rerun.widget_states.widgets if w.WhichOneof("value") == "string_value"}
        answer = answers.get(self.radio_id(seed), "")
        if rerun.fragment_id:
            if rerun.fragment_id != self.fragment_id():
                return  # Streamlit: a fragment this page no longer has is never run
            self.fragment_reruns.append((rerun.fragment_id, answer))
            self.put(self.radio(seed, answer))
            self.finished(ForwardMsg.ScriptFinishedStatus.FINISHED_EARLY_FOR_RERUN)  # st.rerun(scope="app")
        self.whole_run(seed, answer)

    def whole_run(self, seed: int, answer: str) -> None:
        self.runs += 1
        message = ForwardMsg()
        message.navigation.page_script_hash = "h-scale"
        page = message.navigation.app_pages.add()
        page.url_pathname, page.page_script_hash = self.PAGE, "h-scale"
        self.put(message)
        self.put(self.radio(seed, answer))
        if answer in self.OPTIONS:  # the Code box waits for the answer
            code = ForwardMsg()
            element(code, "code").code_text = f"seed = {seed}\n"
            self.put(code)
        self.finished(ForwardMsg.ScriptFinishedStatus.FINISHED_SUCCESSFULLY)

    def radio(self, seed: int, answer: str) -> ForwardMsg:
        message = ForwardMsg()
        message.delta.fragment_id = self.fragment_id()
        radio = element(message, "radio")
        radio.id, radio.options[:] = self.radio_id(seed), self.OPTIONS
        return message

    def finished(self, status) -> None:
        message = ForwardMsg()
        message.script_finished = status
        self.put(message)

    def put(self, message: ForwardMsg) -> None:
        self.replies.put_nowait(message.SerializeToString())

    async def recv(self) -> bytes:
        return await self.replies.get()

    async def close(self) -> None:
        pass


def attend_one_question_page(monkeypatch, server: OneQuestionPage, seconds: float = 0.3) -> load_client.Recorder:
    """One student on `server`'s page for `seconds`, thinking about a millisecond, never switching page."""
    monkeypatch.setattr(load_client, "THINK_MEDIAN_S", 0.001)
    monkeypatch.setattr(load_client, "PAGE_SWITCH_P", 0.0)
    monkeypatch.setattr(load_client, "RUN_TIMEOUT_S", 2.0)

    async def one_student() -> load_client.Recorder:
        recorder = load_client.Recorder(started=0.0)
        student = load_client.Student(0, "http://127.0.0.1:1", 0.0, random.Random(0), server.PAGE, seed=1000)

        async def connect() -> None:
            student.socket = server

        student.connect = connect
        await load_client.attend(student, recorder, ends_at=asyncio.get_running_loop().time() + seconds)
        return recorder

    return asyncio.run(one_student())


def test_a_code_box_that_waits_for_its_answer_is_no_mismatch(monkeypatch) -> None:
    """Lesson 9's cost box appears only once its question is answered: the student answers, then it is checked."""
    server = OneQuestionPage()
    recorder = attend_one_question_page(monkeypatch, server)
    assert recorder.errors == [] and recorder.mismatches == [], (recorder.errors, recorder.mismatches)
    actions = [i.action for i in recorder.interactions]
    assert actions[:3] == [load_client.Action.OPEN, load_client.Action.ANSWER, load_client.Action.SEED], actions
    assert actions.count(load_client.Action.ANSWER) == 1  # answered once: the answer goes with every seed step
    assert recorder.checked == len(actions) - 1  # every run after the answer was checked whole, seeds included


def test_the_student_answers_as_a_browser_does_before_it_checks(monkeypatch) -> None:
    """The answer is one of the radio's options, sent as a rerun of the box's fragment (its latest id); a
    question asked again after a seed step (a new fingerprint) is answered again before the next check."""
    server = OneQuestionPage(reset_on_seed=True)
    recorder = attend_one_question_page(monkeypatch, server)
    assert recorder.errors == [] and recorder.mismatches == [], (recorder.errors, recorder.mismatches)
    actions = [i.action for i in recorder.interactions]
    assert len(actions) >= 5, actions
    assert actions[0] == load_client.Action.OPEN
    after_seed_steps = [actions[i + 1] for i in range(len(actions) - 1) if actions[i] == load_client.Action.SEED]
    assert after_seed_steps and set(after_seed_steps) == {load_client.Action.ANSWER}, actions  # a new question
    assert len(server.fragment_reruns) == actions.count(load_client.Action.ANSWER)
    assert all(answer in OneQuestionPage.OPTIONS for _, answer in server.fragment_reruns)
    answered_seeds = {i.seed for i in recorder.interactions if i.action == load_client.Action.ANSWER}
    assert {i.seed for i in recorder.interactions[:-1]} <= answered_seeds  # each seed's Code box, once answered
    assert recorder.checked == len(answered_seeds)  # checked whole: the answers' runs


def test_what_an_answer_unlocks_is_required_only_once_every_question_is_answered() -> None:
    view = RunView()
    navigation(view, "h-multi")
    message = ForwardMsg()
    radio = element(message, "radio")
    radio.id, radio.options[:] = "$$ID-r-predict_multi_head_ab12", ["yes", "no"]
    read_message(message, view)
    view.whole = True
    assert view.unanswered == ["$$ID-r-predict_multi_head_ab12"] and not view.complete
    assert check(view, "multi_head", 5003) == []  # no Code box yet: it may wait for the answer
    code(view, "seed = 7001\n")
    assert any("Code box seeds [7001]" in p for p in check(view, "multi_head", 5003))  # wrong numbers: any run
    answered = RunView(pages=view.pages, page_names=view.page_names, page_hash="h-multi", whole=True)
    answered.widgets["$$ID-r-predict_multi_head_ab12"] = WidgetState(id="$$ID-r-predict_multi_head_ab12")
    read_message(message, answered)
    assert answered.complete
    assert any("without seed 5003" in p for p in check(answered, "multi_head", 5003))  # answered: now required
    fragment_alone = RunView(page_names=view.page_names, page_hash="h-multi", widgets=answered.widgets)
    read_message(message, fragment_alone)
    assert not fragment_alone.complete  # a fragment's own run draws only its box


def test_a_wrong_z_is_flagged_answered_or_not_a_missing_one_only_once_answered() -> None:
    view = RunView(page_names={"h-tw": "trainable_weights"}, page_hash="h-tw", whole=True)
    view.questions.append("$$ID-r-predict_trainable_weights_ab12")
    code(view, "seed = 5003\n")
    assert check(view, "trainable_weights", 5003) == []  # unanswered: z may not be drawn yet
    view.z = "[0.0000, 0.0000]"
    assert any(p.startswith("z = [0.0000, 0.0000]") for p in check(view, "trainable_weights", 5003))
    view.z = None
    view.widgets["$$ID-r-predict_trainable_weights_ab12"] = WidgetState(id="$$ID-r-predict_trainable_weights_ab12")
    assert any(p.startswith("z = None") for p in check(view, "trainable_weights", 5003))


def test_an_error_box_is_a_problem() -> None:
    from streamlit.proto.Alert_pb2 import Alert

    view = RunView()
    message = ForwardMsg()
    alert = element(message, "alert")
    alert.body, alert.format = "Something went wrong on this page.", Alert.ERROR
    read_message(message, view)
    assert view.problems == ["error box: Something went wrong on this page."]
    assert view.texts == ["Something went wrong on this page."]  # still read as text (loadtest/poll_abuse.py)
    warning = ForwardMsg()
    element(warning, "alert").body = "A note."
    read_message(warning, view)
    assert len(view.problems) == 1


def test_a_question_left_behind_is_asked_again() -> None:
    """A radio's choice is forgotten once a whole run no longer draws it (the student left the page), as in a
    browser: back on the page, the question is unanswered and the student answers it again."""
    student = load_client.Student(0, "http://127.0.0.1:1", 0.0, random.Random(0), "multi_head", seed=1000)
    server = OneQuestionPage()

    async def visit() -> None:
        student.socket = server
        await student.rerun(load_client.Action.OPEN)
        await student.answer()
        assert student.question() is None and student.view.complete
        server.radio_id = lambda seed: "$$ID-abc-predict_other_page"  # another page's question
        await student.rerun(load_client.Action.PAGE, "h-other")
        assert student.question() == "$$ID-abc-predict_other_page"
        assert "$$ID-abc-predict_cost_fixed" not in student.view.widgets

    asyncio.run(visit())


def test_the_capacity_table_puts_ours_beside_the_reference() -> None:
    from loadtest import capacity

    def step(students: int, p95_s: float, cpu_ms: float) -> capacity.Step:
        return capacity.Step(
            students=students,
            changes=100,
            changes_per_s=1.0,
            p50_s=p95_s / 2,
            p95_s=p95_s,
            max_s=p95_s,
            open_p95_s=p95_s,
            errors=0,
            mismatches=0,
            checked=90,
            answers=30,
            server_cpu_ms_per_change=cpu_ms,
            server_cpu_busy=0.5,
            server_peak_rss_mib=500.0,
            server_cpus="0",
            client_cpu_busy=0.1,
            examples=(),
        )

    lines = capacity.table([step(50, 0.4, 60.0), step(150, 0.8, 99.0)], [step(50, 0.2, 50.0)])
    assert lines[0].startswith("| students | p50 ours / ref (s) | p95 ours / ref (s) |")
    assert lines[2] == "| 50 | 0.20 / 0.10 | 0.40 / 0.20 | 60.0 / 50.0 | 1.20x | 0 / 0 | 0 / 0 | 90 (30) |"
    assert lines[3] == "| 150 | 0.40 / - | 0.80 / - | 99.0 / - | - | 0 / - | 0 / - | 90 (30) |"
