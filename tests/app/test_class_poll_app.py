"""The class poll on the page (AppTest): a teacher, three students, the reveal, and bad links.

All sessions run in this process and share its in-process store (st.cache_resource), as the
sessions of one server do. AppTest runs a fragment with its page, so a `run()` of the teacher's
session is what the teacher's live refresh does every two seconds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import SimpleNamespace

import pyarrow as pa
import pytest
from streamlit.runtime.app_session import AppSession
from streamlit.testing.v1 import AppTest

from core.app import registry
from services import class_poll
from tests.support import app, assert_clean

PAGE = registry.page("why_scale")


@pytest.fixture(autouse=True)
def fresh_store() -> Iterator[None]:
    """Each test its own in-process store: the sessions of one test share it, as one server's do."""
    from ui import class_poll as class_poll_ui

    class_poll_ui.store.clear()
    yield
    class_poll_ui.store.clear()


QUESTION = "predict_why_scale"


def start_poll() -> tuple[AppTest, class_poll.Room]:
    teacher = app(PAGE.file, present="1")
    (start,) = [b for b in teacher.sidebar.button if "class poll" in b.label]
    start.click().run()
    assert_clean(teacher)
    room = teacher.session_state["class_poll_room"]
    assert class_poll.parse_code(room.code) == room.code
    return teacher, room


def test_the_step_bar_starts_a_poll_without_the_sidebar_and_a_refusal_is_said_there() -> None:
    """The s28 review: a sidebar opened to press "Start a class poll" stays open (Streamlit keeps the reader's
    choice), squeezing the projected options and pushing the tally below the fold. "Poll" in the step bar starts
    one with the sidebar closed; once the room is open it gives way to the room's panel."""
    teacher = app(PAGE.file, present="1")
    (poll,) = [b for b in teacher.main.button if b.key == "class_poll_start_bar"]
    assert not [b for b in teacher.sidebar.button if b.key == "class_poll_start_bar"]
    poll.click().run()
    assert_clean(teacher)
    room = teacher.session_state["class_poll_room"]
    assert room.code.replace("-", "") in page_text(teacher).replace("-", "")  # the room's code, in the bar
    assert not [b for b in teacher.main.button if b.key == "class_poll_start_bar"]
    assert [b for b in teacher.sidebar.button if "End the class poll" in b.label]
    # A student following the room has no step bar of their own, so no "Poll" either.
    student = app(PAGE.file, room=room.code)
    assert not [b for b in student.main.button if b.key == "class_poll_start_bar"]


def test_a_poll_started_on_a_step_without_a_question_offers_the_next_question() -> None:
    """The s29 and s29b reviews: started on lesson 1's opening step, the poll gave the class nothing to answer and
    nothing told the teacher. The panel offers the next question's step, one click away; on it, no such button."""
    teacher = app(registry.page("without_weights").file, present="1")
    next(b for b in teacher.main.button if b.key == "class_poll_start_bar").click().run()
    (go,) = [b for b in teacher.main.button if b.key == "class_poll_next_question"]
    assert "go to step 2, the next question" in go.label
    go.click().run()
    assert_clean(teacher)
    assert teacher.session_state["step"] == 2
    assert not [b for b in teacher.main.button if b.key == "class_poll_next_question"]
    teacher.session_state["step"] = 3  # past the first question: no such line on the projector
    teacher.run()
    assert_clean(teacher)
    assert not [b for b in teacher.main.button if b.key == "class_poll_next_question"]


def test_a_room_refused_from_the_step_bar_is_said_in_the_step_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    from ui import class_poll as class_poll_ui

    def refuse(**_: object) -> class_poll.Room:
        raise class_poll.PollUnavailable()

    teacher = app(PAGE.file, present="1")
    monkeypatch.setattr(class_poll_ui.store(), "create_room", refuse)
    next(b for b in teacher.main.button if b.key == "class_poll_start_bar").click().run()
    assert_clean(teacher)
    assert [i.value for i in teacher.main.info if "unavailable right now" in i.value]
    assert not [i.value for i in teacher.sidebar.info if "unavailable right now" in i.value]


def question(at: AppTest):
    """The page's predict radio: its widget key is QUESTION plus the question's fingerprint."""
    return next(r for r in at.radio if r.key and r.key.startswith(f"{QUESTION}_"))


def page_text(at: AppTest) -> str:
    return "\n".join(e.value for kind in (at.markdown, at.info, at.success, at.warning, at.caption) for e in kind)


def test_a_class_answers_the_teacher_sees_the_split_and_the_reveal_reaches_everyone() -> None:
    teacher, room = start_poll()
    shown = page_text(teacher)
    assert f"Code **{class_poll.spoken(room.code)}**" in shown
    link = next(c.value for c in teacher.code if f"room={room.code}" in c.value)
    assert "present=true" in link and room.code in link and room.secret not in link
    assert teacher.get("image"), "no QR code drawn"
    assert "0 answers" in shown
    assert not [c for c in teacher.get("vega_lite_chart") if "The class's answers" in c.proto.alt]  # no empty axis

    students = [app(None, room=room.code, present="true") for _ in range(3)]  # they land on the overview
    for student in students:
        assert_clean(student)
        assert student.title[0].value == teacher.title[0].value  # ... and follow the teacher's lesson
        assert not [b for b in student.button if b.label == "Reveal"]
    options = question(teacher).options
    for student, choice in zip(students, (0, 1, 1), strict=True):
        question(student).set_value(choice).run()
        assert_clean(student)
        assert "Your answer is in" in page_text(student)
        assert not student.success and not any("Not quite" in w.value for w in student.warning)  # not yet
    question(students[0]).set_value(1).run()  # a change of mind counts once
    question(students[0]).set_value(0).run()

    teacher.run()  # the live refresh
    shown = page_text(teacher)
    assert "3 answers" in shown
    (chart,) = [c for c in teacher.get("vega_lite_chart") if "The class's answers" in c.proto.alt]
    # the split, as the chart's text says, and its bars in the radio's (shuffled) order, numbered as shown
    assert f"{options[0]}: 1;" in chart.proto.alt + ";" and f"{options[1]}: 2;" in chart.proto.alt + ";"
    (dataset,) = chart.proto.datasets
    bars = pa.ipc.open_stream(dataset.data.data).read_all().to_pylist()
    assert [bar["option"] for bar in bars] == [f"{number}. {text}" for number, text in enumerate(options, start=1)]
    assert [bar["students"] for bar in bars[:2]] == [1, 2]

    (reveal,) = [b for b in teacher.button if b.label == "Reveal"]
    reveal.click().run()
    assert_clean(teacher)
    assert any("Revealed to the class" in s.value for s in teacher.success)
    for student in students:
        student.run()  # what the student's watcher triggers once the room changed
        verdicts = [s.value for s in student.success] + [w.value for w in student.warning if "Not quite" in w.value]
        assert len(verdicts) == 1, verdicts  # the right answer (or "Not quite: it is ...") reached them
    late = app(None, room=room.code, present="true")  # a student who never answered sees it too
    assert any("The teacher revealed" in i.value for i in late.info)


def test_the_students_follow_the_teachers_step() -> None:
    teacher, room = start_poll()
    student = app(None, room=room.code, present="true")
    teacher.number_input(key="step").set_value(3).run()
    student.run()
    assert student.number_input(key="step").value == 3


def test_a_made_up_code_or_a_malformed_one_is_a_note_and_the_lesson_works() -> None:
    for value, expected in (("K7QM-2HXD", "There is no class poll with this code"), ("<b>x</b>", "not a class poll")):
        at = app(None, room=value)
        assert_clean(at)
        notes = [i.value for i in at.info]
        assert any(expected in note for note in notes), notes
        assert not any("<b>" in m.value for m in at.markdown)  # never markup from a link
        at.switch_page(PAGE.file).run()
        assert_clean(at)
        question(at).set_value(0).run()
        assert at.success or at.warning  # the question reveals as usual: no poll


def test_a_student_who_edits_the_link_cannot_reveal() -> None:
    teacher, room = start_poll()
    forged = app(None, room=room.code, present="true", secret=room.code, teacher="1", reveal="1")
    assert_clean(forged)
    assert not [b for b in forged.button if b.label == "Reveal"]
    assert not [b for b in forged.sidebar.button if "End the class poll" in b.label]
    assert "class_poll_room" not in forged.session_state
    question(forged).set_value(0).run()
    teacher.run()
    assert not class_poll_store().room(room.code).revealed
    assert not forged.success and not any("Not quite" in w.value for w in forged.warning)


def test_a_full_room_and_a_room_that_ends_are_plain_notes(monkeypatch: pytest.MonkeyPatch) -> None:
    teacher, room = start_poll()
    store = class_poll_store()
    student = app(None, room=room.code, present="true")
    monkeypatch.setattr(store, "max_answers", 3)
    for index in range(3):  # the class fills the room to its bound
        store.answer(room.code, "why_scale:filler", f"filler-{index}", 0, 2)
    question(student).set_value(0).run()
    assert_clean(student)
    assert any("This class poll is full" in i.value for i in student.info), [i.value for i in student.info]
    assert not student.success and not student.warning  # in a poll, the answer waits for the reveal

    (end,) = [b for b in teacher.sidebar.button if "End the class poll" in b.label]
    end.click().run()
    assert "class_poll_room" not in teacher.session_state
    student.run()
    assert_clean(student)
    assert any("There is no class poll with this code" in i.value for i in student.info)


def class_poll_store() -> class_poll.PollStore:
    from ui import class_poll as class_poll_ui

    return class_poll_ui.store()


def verdicts(at: AppTest) -> list[str]:
    """What reveals the right answer on a student's page: "Right." or "Not quite" or the teacher's reveal."""
    return [s.value for s in at.success] + [w.value for w in at.warning if "Not quite" in w.value]


def clear_cache(at: AppTest) -> None:
    """What Streamlit runs for this session's "clear cache" message (with the app's guard in place),
    then the next run, which sends no widget values (AppTest would read them from the cleared state)."""
    from ui import hardening

    hardening.keep_shared_caches()
    AppSession._handle_clear_cache_request(SimpleNamespace(_session_state=at._session_state._state))
    at._run()


def test_a_students_id_survives_clear_cache_so_they_answer_once() -> None:
    """Issue 31, item 3: each clear_cache gave the session a new anonymous id, and one more answer."""
    teacher, room = start_poll()
    student = app(None, room=room.code, present="true")
    question(student).set_value(0).run()
    for _ in range(3):
        clear_cache(student)
        question(student).set_value(1).run()
        question(student).set_value(0).run()
    assert_clean(student)
    assert sum(class_poll_store().counts(room.code, "why_scale:" + QUESTION, 4)) == 1
    assert class_poll_store().room(room.code).joined == 1
    teacher.run()
    assert "Class poll: 1 answer** from 1 joined" in page_text(teacher)


def test_a_teachers_clear_cache_keeps_their_one_room() -> None:
    teacher, room = start_poll()
    clear_cache(teacher)
    assert teacher.session_state["class_poll_room"] == room  # still the teacher of the same room
    assert class_poll_store().room(room.code)


def test_the_teacher_sees_how_many_joined_and_answered() -> None:
    teacher, room = start_poll()
    students = [app(None, room=room.code, present="true") for _ in range(3)]
    question(students[0]).set_value(0).run()
    teacher.run()
    assert "Class poll: 1 answer** from 3 joined" in page_text(teacher)


def unavailable(*args: object, **kwargs: object) -> None:
    raise class_poll.PollUnavailable()


def test_during_an_outage_a_student_never_sees_the_answer_before_the_reveal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 31, item 4: "Right. ..." showed under "The class poll is unavailable"."""
    teacher, room = start_poll()
    student = app(None, room=room.code, present="true")
    store = class_poll_store()
    for method in ("room", "answer", "counts", "join"):
        monkeypatch.setattr(store, method, unavailable)
    for choice in (0, 1, 2):
        question(student).set_value(choice).run()
        assert not student.exception, [e.value for e in student.exception]
        assert not verdicts(student), verdicts(student)
        assert any("stays hidden" in i.value for i in student.info), [i.value for i in student.info]
    monkeypatch.undo()
    teacher.run()
    (reveal,) = [b for b in teacher.button if b.label == "Reveal"]
    reveal.click().run()
    student.run()
    assert len(verdicts(student)) == 1  # the reveal reached the student once the store was back


def test_a_student_who_opens_the_link_during_an_outage_joins_when_the_store_returns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 31, item 5: ?room= was read once per session, and the note stayed."""
    teacher, room = start_poll()
    store = class_poll_store()
    monkeypatch.setattr(store, "room", unavailable)
    monkeypatch.setattr(store, "join", unavailable)
    student = app(None, room=room.code, present="true")
    assert not student.exception
    assert any("tries again" in i.value for i in student.info), [i.value for i in student.info]
    student.switch_page(PAGE.file).run()
    question(student).set_value(0).run()
    assert not verdicts(student)  # waiting to join is in the poll too: the answer stays hidden
    monkeypatch.undo()
    student.run()  # the retry (a fragment AppTest runs with the page)
    assert_clean(student)
    assert student.session_state["class_poll_following"] == room.code
    assert not any("tries again" in i.value for i in student.info)
    assert store.room(room.code).joined == 1


def test_a_new_lesson_opens_at_step_1_for_the_teacher_and_the_class() -> None:
    # Issue 30, defect 2: the teacher at step 3 of one lesson switched lesson and landed on step 3 of the new
    # one, past its question; every student followed. Students also saw Back/Next and a step box that did nothing.
    teacher, room = start_poll()
    student = app(None, room=room.code, present="true")
    teacher.number_input(key="step").set_value(3).run()
    student.run()
    assert student.session_state["step"] == 3
    teacher.switch_page(registry.page("without_weights").file).run()
    assert_clean(teacher)
    assert teacher.number_input(key="step").value == 1
    assert class_poll_store().room(room.code).step == 1
    student.run()  # the watcher's rerun: the student follows to the new lesson
    student.run()
    assert_clean(student)
    assert student.title[0].value == teacher.title[0].value
    assert student.session_state["step"] == 1
    assert student.query_params.get("step") in (None, "1", ["1"])  # the link shows the teacher's step, not 3
    assert not [b for b in student.button if b.label in ("← Back", "Next →")]
    assert any("as the teacher shows it" in c.value for c in student.caption)
    assert [b for b in teacher.button if b.label == "Next →"]  # the teacher keeps them


def test_the_teachers_reveal_unlocks_what_the_answer_gives_away_on_the_projected_screen() -> None:
    # The teacher presses Reveal without choosing an answer: the bars that answer the question were still
    # locked on the projector ("appear once you have answered").
    teacher, room = start_poll()
    teacher.number_input(key="step").set_value(2).run()
    assert any("once you have answered" in c.value for c in teacher.caption)
    (reveal,) = [b for b in teacher.button if b.label == "Reveal"]
    reveal.click().run()
    assert_clean(teacher)
    assert not any("once you have answered" in c.value for c in teacher.caption)
    assert [m for m in teacher.metric if "largest weight" in m.label]


def test_a_watcher_tick_from_the_lesson_the_student_left_reruns_the_app(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a busy server the browser queues the poll watcher's ticks; after the first one switched the student to
    the teacher's next lesson, the others ran with the old lesson's page, and the browser, told that page again,
    cleared the new lesson for good (issue 40, item 6: a blank page under the step bar in 4 of 7 lecture runs).
    A tick whose page is not the one that drew the watcher reruns the whole app."""
    from ui import class_poll as poll_ui

    class Rerun(Exception):
        pass

    def rerun(*, scope: str = "app") -> None:
        raise Rerun(scope)

    monkeypatch.setattr(poll_ui.st, "rerun", rerun)
    monkeypatch.setattr(poll_ui, "_page_id", lambda: "the lesson the student left")
    watch = poll_ui._watch_room.__wrapped__  # the watcher's body, without Streamlit's fragment around it
    with pytest.raises(Rerun, match="app"):
        watch("ABCD2345", None, "the teacher's new lesson")


def test_a_watcher_tick_after_a_full_run_cut_short_reruns_the_app(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 40, item 6: on a busy server a student's full run drew the sidebar and the lesson's opening, then
    gave way to a run of the poll watcher alone (the websocket record: no end of the full run, a fragment run
    after it), and the page stayed half drawn for 90 s. `full_run` notes a run cut short for another; the
    watcher's next tick reruns the whole app. A run that ends, or stops on purpose (st.stop), is left alone."""
    from streamlit.runtime.scriptrunner_utils.exceptions import RerunException, StopException

    from ui import class_poll as poll_ui

    class Rerun(Exception):
        pass

    def rerun(*, scope: str = "app") -> None:
        raise Rerun(scope)

    state: dict = {}
    monkeypatch.setattr(poll_ui.st, "session_state", state)
    monkeypatch.setattr(poll_ui.st, "rerun", rerun)
    monkeypatch.setattr(poll_ui, "_page_id", lambda: "lesson 3")
    monkeypatch.setattr(poll_ui, "_fragment_run", lambda: True)  # a tick, not the watcher drawn in a full run

    class Unchanged:  # the room as the watcher last saw it: no other reason to rerun
        def room(self, code: str) -> None:
            return None

    monkeypatch.setattr(poll_ui, "store", lambda: pytest.fail("the tick should rerun before it reads the room"))
    watch = poll_ui._watch_room.__wrapped__
    with pytest.raises(RerunException), poll_ui.full_run():
        raise RerunException(None)  # a full run preempted by another run
    with pytest.raises(Rerun, match="app"):
        watch("ABCD2345", None, "lesson 3")
    for ending in (None, StopException(), ValueError("a page error Streamlit shows")):
        with contextlib.suppress(StopException, ValueError), poll_ui.full_run():
            if ending is not None:
                raise ending
        assert state[poll_ui._FULL_RUN_DRAWN] is True, ending  # ended: the watcher goes on as before
    monkeypatch.setattr(poll_ui, "store", Unchanged)
    watch("ABCD2345", None, "lesson 3")  # no rerun: the page was drawn and the room has not changed
    monkeypatch.setattr(poll_ui, "_fragment_run", lambda: False)  # the watcher drawn inside a full run
    state[poll_ui._FULL_RUN_DRAWN] = False  # ... which is still running: it must not rerun itself
    watch("ABCD2345", None, "lesson 3")


def test_an_answer_sent_from_the_box_s_own_run_is_told_again_by_a_full_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 40: on a busy server a student's answer was counted while the box still read "choose an answer" (1 in
    9 answers in a CI run, 1 in 45 here). The websocket record: the box's run sent its first messages, then nothing,
    not even its end; Streamlit dropped the rest when a watcher tick started a new script runner before the event
    loop had passed them on (class_poll._page_may_be_stale). An answer sent from the box's own run (a fragment's)
    makes the watcher's next tick redraw the whole page, once; an answer sent in a full run needs nothing more."""
    from services.poll_memory import MemoryPollStore
    from ui import class_poll as poll_ui

    class Rerun(Exception):
        pass

    def rerun(*, scope: str = "app") -> None:
        raise Rerun(scope)

    store = MemoryPollStore()
    room = store.create_room()
    state: dict = {poll_ui._FOLLOWING: room.code}
    monkeypatch.setattr(poll_ui.st, "session_state", state)
    monkeypatch.setattr(poll_ui.st, "rerun", rerun)
    monkeypatch.setattr(poll_ui.st, "info", lambda *args, **kwargs: None)
    monkeypatch.setattr(poll_ui.st, "caption", lambda *args, **kwargs: None)
    monkeypatch.setattr(poll_ui, "store", lambda: store)
    monkeypatch.setattr(poll_ui, "_page_id", lambda: "lesson 3")
    prediction = SimpleNamespace(options=("a", "b", "c"))
    watch = poll_ui._watch_room.__wrapped__  # the watcher's body, without Streamlit's fragment around it
    seen = store.room(room.code)

    with poll_ui.full_run():  # a full run: it draws every box itself
        monkeypatch.setattr(poll_ui, "_fragment_run", lambda: False)
        assert poll_ui.predict_in_poll("why_scale", "predict", prediction, 0) is False
    monkeypatch.setattr(poll_ui, "_fragment_run", lambda: True)
    watch(room.code, seen, "lesson 3")  # no rerun: the full run told the answer

    assert poll_ui.predict_in_poll("why_scale", "predict", prediction, 1) is False  # the box's own run: changed
    assert store.counts(room.code, "why_scale:predict", 3) == (0, 1, 0)
    with pytest.raises(Rerun, match="app"):
        watch(room.code, seen, "lesson 3")  # the next tick redraws the page ...
    with poll_ui.full_run():
        monkeypatch.setattr(poll_ui, "_fragment_run", lambda: False)
        poll_ui.predict_in_poll("why_scale", "predict", prediction, 1)  # ... which tells the answer (not sent again)
    monkeypatch.setattr(poll_ui, "_fragment_run", lambda: True)
    watch(room.code, seen, "lesson 3")  # and once only


def test_a_students_lock_lines_wait_for_the_reveal_not_for_their_own_answer() -> None:
    # The s28 review: a student who had answered still read "appears once you have answered the question above",
    # while in a poll only the teacher's Reveal unlocks it.
    teacher, room = start_poll()
    student = app(None, room=room.code, present="true")
    question(student).set_value(0).run()
    assert_clean(student)
    locks = [c.value for c in student.caption if ":material/lock:" in c.value]
    assert locks and all("once the teacher reveals the answer to the question" in line for line in locks), locks
    assert not [line for line in locks if "once you have answered" in line]
    alone = app(PAGE.file)  # outside a poll, the student's own choice unlocks it
    assert any("once you have answered the question above" in c.value for c in alone.caption)
