"""The class poll's store (services/class_poll.py): one suite, run against both implementations.

`store` is the in-process store and, where Debian's redis-server is installed, the Redis store
against a redis-server started on a free loopback port (skipped cleanly without it).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator

import pytest

from core.charts.poll import Tally
from services import class_poll
from services.class_poll import Answered, NotTeacher, PollStore, RoomGone
from services.poll_memory import MemoryPollStore
from services.poll_redis import RedisPollStore
from tests.support import RedisServer, redis_available

QUESTION = "why_scale:predict"


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    if not redis_available():
        pytest.skip("Debian's redis-server is not installed")
    with RedisServer() as server:
        yield server.url


@pytest.fixture(params=["memory", "redis"])
def make_store(request) -> Callable[..., PollStore]:
    """A factory for a fresh store of either kind, with the bounds a test asks for."""
    if request.param == "memory":
        return lambda **bounds: MemoryPollStore(**bounds)
    url = request.getfixturevalue("redis_url")
    counter = iter(range(10**6))
    # a fresh key prefix per store: tests never see each other's rooms in the shared server
    return lambda **bounds: RedisPollStore(url, prefix=f"test:{request.node.name}:{next(counter)}:", **bounds)


def test_codes_have_40_random_bits_and_read_back_however_typed() -> None:
    assert len(class_poll.ALPHABET) ** class_poll.CODE_LENGTH >= 2**40
    codes = {class_poll.new_code() for _ in range(2000)}
    assert len(codes) == 2000  # no repeats in 2000 draws of 40 bits
    code = "K7QM2HXD"
    assert class_poll.spoken(code) == "K7QM-2HXD"
    for typed in ("K7QM-2HXD", "k7qm 2hxd", " K7QM2HXD "):
        assert class_poll.parse_code(typed) == code
    assert class_poll.parse_code("1o0l-abcd") == "1001ABCD"  # O/L read as 0/1
    for bad in ("", "K7QM2HX", "K7QM2HXDD", "K7QM2HXU", "<b>K7QM</b>", "K7QM2HXD" * 5, "ＫＫＫＫ２２２２"):
        assert class_poll.parse_code(bad) is None, bad


def test_a_room_follows_its_teacher_and_only_its_teacher(make_store) -> None:
    store = make_store()
    room = store.create_room()
    assert class_poll.parse_code(room.code) == room.code
    assert room.secret not in repr(room)
    state = store.room(room.code)
    assert (state.page, state.step, state.revealed) == ("", 1, frozenset())
    store.move(room.code, room.secret, "why_scale", 3)
    assert (store.room(room.code).page, store.room(room.code).step) == ("why_scale", 3)
    with pytest.raises(NotTeacher):
        store.move(room.code, "a guess", "overview", 1)
    assert store.room(room.code).page == "why_scale"


def test_answers_count_once_per_student_and_may_change_until_the_reveal(make_store) -> None:
    store = make_store()
    room = store.create_room()
    assert store.answer(room.code, QUESTION, "s1", 0, 3) is Answered.RECORDED
    assert store.answer(room.code, QUESTION, "s1", 0, 3) is Answered.UNCHANGED
    assert store.answer(room.code, QUESTION, "s2", 0, 3) is Answered.RECORDED
    assert store.answer(room.code, QUESTION, "s1", 2, 3) is Answered.CHANGED
    assert store.counts(room.code, QUESTION, 3) == (1, 0, 1)
    assert store.counts(room.code, "another:question", 3) == (0, 0, 0)
    with pytest.raises(ValueError):
        store.answer(room.code, QUESTION, "s3", 3, 3)  # no such option
    store.reveal(room.code, room.secret, QUESTION)
    assert store.room(room.code).revealed == frozenset({QUESTION})
    assert store.answer(room.code, QUESTION, "s1", 1, 3) is Answered.CLOSED
    assert store.counts(room.code, QUESTION, 3) == (1, 0, 1)  # frozen at the reveal


def test_a_reveal_or_close_without_the_teachers_secret_is_refused(make_store) -> None:
    store = make_store()
    room = store.create_room()
    other = store.create_room()
    for secret in ("", "x" * 43, other.secret, room.code):
        with pytest.raises(NotTeacher):
            store.reveal(room.code, secret, QUESTION)
        with pytest.raises(NotTeacher):
            store.close(room.code, secret)
    assert store.room(room.code).revealed == frozenset()
    store.close(room.code, room.secret)
    with pytest.raises(RoomGone):
        store.room(room.code)
    with pytest.raises(RoomGone):
        store.answer(room.code, QUESTION, "s1", 0, 2)


def test_unknown_codes_are_gone(make_store) -> None:
    store = make_store()
    with pytest.raises(RoomGone):
        store.room("K7QM2HXD")
    with pytest.raises(RoomGone):
        store.counts("K7QM2HXD", QUESTION, 2)
    with pytest.raises(RoomGone):
        store.reveal("K7QM2HXD", "secret", QUESTION)


def test_hundred_students_answering_at_once_give_exact_counts(make_store) -> None:
    store = make_store()
    room = store.create_room()
    students = 100
    chosen = {f"student-{i}": i % 3 for i in range(students)}
    changed = {f"student-{i}": (i + 1) % 3 for i in range(0, students, 4)}  # every 4th changes their mind
    start = threading.Barrier(students)
    outcomes: list[Answered] = []
    errors: list[BaseException] = []

    def student(name: str) -> None:
        try:
            start.wait()
            outcomes.append(store.answer(room.code, QUESTION, name, chosen[name], 3))
            if name in changed:
                outcomes.append(store.answer(room.code, QUESTION, name, changed[name], 3))
            outcomes.append(store.answer(room.code, QUESTION, name, {**chosen, **changed}[name], 3))  # again
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=student, args=(name,)) for name in chosen]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    final = Counter({**chosen, **changed}.values())
    assert store.counts(room.code, QUESTION, 3) == (final[0], final[1], final[2])
    assert sum(store.counts(room.code, QUESTION, 3)) == students
    seen = Counter(outcomes)
    assert seen[Answered.RECORDED] == students
    assert seen[Answered.CHANGED] == len(changed)
    assert seen[Answered.UNCHANGED] == students


def test_rooms_and_answers_are_bounded(make_store) -> None:
    store = make_store(max_rooms=3, max_answers=4)
    rooms = [store.create_room() for _ in range(3)]
    with pytest.raises(class_poll.RoomsFull):
        store.create_room()
    code = rooms[0].code
    for student in range(4):
        store.answer(code, QUESTION, f"s{student}", 0, 2)
    with pytest.raises(class_poll.RoomFull):
        store.answer(code, QUESTION, "s4", 0, 2)
    assert store.answer(code, QUESTION, "s0", 1, 2) is Answered.CHANGED  # a change adds no answer
    assert store.counts(code, QUESTION, 2) == (3, 1)
    store.close(rooms[1].code, rooms[1].secret)
    assert class_poll.parse_code(store.create_room().code)  # a closed room frees its place


def test_a_room_without_its_teachers_heartbeat_expires_and_answers_do_not_keep_it(make_store) -> None:
    """Issue 31: rooms lived three hours whatever happened; now only the teacher's page keeps one."""
    store = make_store(ttl_s=1.0, max_rooms=2)
    idle, busy = store.create_room(), store.create_room()
    for _ in range(3):  # 1.5 s in all: the busy room's teacher beats every 0.5 s, the idle one only gets answers
        time.sleep(0.5)
        store.move(busy.code, busy.secret, "why_scale", 1)
        with contextlib.suppress(RoomGone):
            store.answer(idle.code, QUESTION, "s1", 0, 2)
    with pytest.raises(RoomGone):
        store.room(idle.code)
    assert store.room(busy.code).page == "why_scale"
    store.create_room()  # the expired room's place is free again (max_rooms=2)
    time.sleep(1.2)
    with pytest.raises(RoomGone):
        store.counts(busy.code, QUESTION, 2)


def test_the_default_room_lives_minutes_not_hours() -> None:
    assert 60 <= class_poll.DEFAULT_TTL_S <= 15 * 60


def test_one_session_holds_at_most_one_room(make_store) -> None:
    store = make_store()
    first = store.create_room(owner="teacher-1")
    second = store.create_room(owner="teacher-1")
    with pytest.raises(RoomGone):
        store.room(first.code)
    assert store.room(second.code).code == second.code
    assert store.room(store.create_room(owner="teacher-2").code)  # another session has its own


def test_creating_rooms_is_rate_limited_per_address(make_store) -> None:
    store = make_store(max_creations_per_address=3)
    for index in range(3):
        store.create_room(owner=f"tab-{index}", address="10.0.0.9")
    with pytest.raises(class_poll.TooManyRooms):
        store.create_room(owner="tab-4", address="10.0.0.9")
    assert store.create_room(owner="teacher", address="10.0.0.1")  # a real teacher elsewhere still starts one


def test_a_full_store_reclaims_its_idlest_room_before_it_refuses(make_store) -> None:
    store = make_store(max_rooms=2, reclaim_idle_s=0.3)
    abandoned, taught = store.create_room(), store.create_room()
    time.sleep(0.5)
    store.move(taught.code, taught.secret, "why_scale", 2)  # its teacher's heartbeat
    newest = store.create_room()  # full: the room nobody taught for 0.5 s goes
    with pytest.raises(RoomGone):
        store.room(abandoned.code)
    assert store.room(taught.code).step == 2
    with pytest.raises(class_poll.RoomsFull):  # both rooms have a teacher present: refused
        store.create_room()
    assert store.room(newest.code)


def test_one_address_never_fills_a_room_and_the_room_counts_who_joined(make_store) -> None:
    store = make_store(max_students=6, max_students_per_address=3)
    room = store.create_room()
    for index in range(3):
        store.join(room.code, f"script-{index}", address="10.0.0.9")
    store.join(room.code, "script-0", address="10.0.0.9")  # joining again changes nothing
    with pytest.raises(class_poll.AddressFull):
        store.join(room.code, "script-3", address="10.0.0.9")
    with pytest.raises(class_poll.AddressFull):  # an answer from a new id is a join too
        store.answer(room.code, QUESTION, "script-4", 0, 2, address="10.0.0.9")
    for index in range(3):
        assert store.answer(room.code, QUESTION, f"student-{index}", 1, 2, address=f"10.1.0.{index}")
    assert store.room(room.code).joined == 6
    with pytest.raises(class_poll.RoomFull):
        store.join(room.code, "late", address="10.2.0.1")
    assert store.counts(room.code, QUESTION, 2) == (0, 3)


def test_new_students_from_one_address_are_rate_limited(make_store) -> None:
    store = make_store(join_burst=3, joins_per_s=5.0)
    room = store.create_room()
    for index in range(3):
        store.answer(room.code, QUESTION, f"s{index}", 0, 2, address="10.0.0.9")
    with pytest.raises(class_poll.JoinsTooFast):
        store.answer(room.code, QUESTION, "s3", 0, 2, address="10.0.0.9")
    assert store.answer(room.code, QUESTION, "s0", 1, 2, address="10.0.0.9") is Answered.CHANGED  # no new id
    time.sleep(0.3)  # 5 a second: one more place
    assert store.answer(room.code, QUESTION, "s3", 0, 2, address="10.0.0.9") is Answered.RECORDED


def test_redis_going_away_is_a_note_and_its_return_a_recovery() -> None:
    if not redis_available():
        pytest.skip("Debian's redis-server is not installed")
    with RedisServer() as server:
        store = RedisPollStore(server.url, timeout_s=0.3)
        room = store.create_room()
        store.answer(room.code, QUESTION, "s1", 1, 2)
        server.stop()
        for action in (
            lambda: store.room(room.code),
            lambda: store.answer(room.code, QUESTION, "s2", 1, 2),
            lambda: store.counts(room.code, QUESTION, 2),
            store.create_room,
        ):
            started = time.monotonic()
            with pytest.raises(class_poll.PollUnavailable) as raised:
                action()
            assert time.monotonic() - started < 5  # a quick note, not a hung page
            assert "unavailable" in str(raised.value)
        server.start()
        assert store.answer(room.code, QUESTION, "s2", 1, 2) is Answered.RECORDED  # same room, same client
        assert store.counts(room.code, QUESTION, 2) == (0, 2)


def test_the_environment_chooses_the_store(monkeypatch) -> None:
    from ui.class_poll import store_from_environment  # the app picks its store

    monkeypatch.delenv(class_poll.REDIS_URL_VARIABLE, raising=False)
    assert isinstance(store_from_environment(), MemoryPollStore)
    monkeypatch.setenv(class_poll.REDIS_URL_VARIABLE, "redis://127.0.0.1:1/0")
    store = store_from_environment()
    assert isinstance(store, RedisPollStore)
    with pytest.raises(class_poll.PollUnavailable):  # nothing listens on port 1
        store.create_room()


@pytest.mark.parametrize(
    ("field", "value"), [("step", "abc"), ("step", "2.5"), ("step", ""), ("step", "-3"), ("step", "1e3")]
)
def test_a_hostile_step_in_redis_is_read_as_step_one_and_logged(redis_url, caplog, field: str, value: str) -> None:
    """Issue 31, item 6: every value read from Redis is checked; a bad one is a safe default and a log line."""
    store = RedisPollStore(redis_url, prefix=f"test:hostile-step:{value}:")
    room = store.create_room()
    store._redis.hset(store._keys(room.code)[1], field, value)
    with caplog.at_level(logging.WARNING, logger="attention_lab"):
        state = store.room(room.code)
    assert state.step == 1 and state.damaged
    assert any("step" in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize("value", ["abc", "1e3", "-7", "2.5", ""])
def test_a_hostile_count_in_redis_is_read_as_zero_and_logged(redis_url, caplog, value: str) -> None:
    store = RedisPollStore(redis_url, prefix=f"test:hostile-count:{value}:")
    room = store.create_room()
    store.answer(room.code, QUESTION, "s1", 1, 2)
    store._redis.hset(store._keys(room.code)[3], f"{QUESTION}{class_poll.SEPARATOR}0", value)
    with caplog.at_level(logging.WARNING, logger="attention_lab"):
        counts = store.counts(room.code, QUESTION, 2)
    assert counts == (0, 1) and counts.damaged
    assert any("count" in record.getMessage() for record in caplog.records)
    assert Tally(counts, ("a", "b")).headline() == "1 answer"


@pytest.mark.parametrize(("options", "bar_px"), [(3, 48), (4, 48), (6, 32), (8, 28), (12, 28)])
def test_the_tally_s_bars_fit_a_projected_question_of_many_options(options: int, bar_px: int) -> None:
    """The s29b review: at 48 px a bar, lesson 1's six options put the last two bars below the projector's fold."""
    import json

    from core.charts.poll import tally_chart

    tally = Tally(counts=tuple(range(options)), options=tuple(f"option {i}" for i in range(options)))
    spec = json.loads(tally_chart(tally).template)
    assert spec["height"] == {"step": bar_px}
    assert options * bar_px <= 192 or bar_px == 28
