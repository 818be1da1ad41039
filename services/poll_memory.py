"""The class poll's rooms in this process: a dict behind one lock (sessions run in threads).

The default store: one process (Community Cloud, a laptop) needs nothing else. Its behaviour is the
Redis store's (services/poll_redis.py); tests/unit/test_class_poll_store.py runs the same cases on both.
"""

from __future__ import annotations

import hmac
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from services.class_poll import (
    CREATION_WINDOW_S,
    AddressFull,
    Answered,
    Bounds,
    Counts,
    JoinsTooFast,
    NotTeacher,
    Room,
    RoomFull,
    RoomGone,
    RoomsFull,
    RoomState,
    TooManyRooms,
    check_answer,
    check_student,
    new_code,
    new_secret,
    secret_digest,
)


@dataclass
class _MemoryRoom:
    digest: str
    expires: float  # the teacher's last heartbeat + ttl
    owner: str = ""
    page: str = ""
    step: int = 1
    revealed: set[str] = field(default_factory=set)
    answers: dict[tuple[str, str], int] = field(default_factory=dict)  # (question, student) -> option
    counts: dict[tuple[str, int], int] = field(default_factory=dict)  # (question, option) -> students
    students: dict[str, str] = field(default_factory=dict)  # student -> address
    per_address: dict[str, int] = field(default_factory=dict)  # address -> students


class MemoryPollStore:
    """Rooms in a dict of this process, behind one lock (sessions run in threads)."""

    def __init__(self, clock=time.monotonic, **bounds: Any) -> None:  # Any: Bounds fields, int or float by field
        self.bounds = Bounds(**bounds)
        self.ttl_s, self.max_rooms, self.max_answers = self.bounds.ttl_s, self.bounds.max_rooms, self.bounds.max_answers
        self._clock = clock
        self._rooms: dict[str, _MemoryRoom] = {}
        self._owners: dict[str, str] = {}  # owner -> the code of its room
        self._created: dict[str, list[float]] = {}  # address -> when it started rooms, within the window
        self._buckets: dict[tuple[str, str], tuple[float, float]] = {}  # (code, address) -> (tokens, at)
        self._lock = threading.Lock()

    def _live(self, code: str) -> _MemoryRoom:
        """The room, or RoomGone; the caller holds the lock."""
        room = self._rooms.get(code)
        if room is None or room.expires <= self._clock():
            self._drop(code)
            raise RoomGone()
        return room

    def _drop(self, code: str) -> None:
        room = self._rooms.pop(code, None)
        if room is not None and self._owners.get(room.owner) == code:
            del self._owners[room.owner]
        for key in [key for key in self._buckets if key[0] == code]:
            del self._buckets[key]

    def _touch(self, room: _MemoryRoom) -> None:
        """The teacher's heartbeat: only the teacher's actions keep a room alive."""
        room.expires = self._clock() + self.ttl_s

    def _teachers(self, code: str, secret: str) -> _MemoryRoom:
        room = self._live(code)
        if not hmac.compare_digest(room.digest, secret_digest(secret)):
            raise NotTeacher()
        return room

    def create_room(self, owner: str = "", address: str = "") -> Room:
        secret = new_secret()
        with self._lock:
            now = self._clock()
            for code in [c for c, r in self._rooms.items() if r.expires <= now]:
                self._drop(code)
            started = [t for t in self._created.get(address, []) if t > now - CREATION_WINDOW_S]
            if len(started) >= self.bounds.max_creations_per_address:
                raise TooManyRooms()
            if owner and owner in self._owners:  # one room per session: the new one replaces it
                self._drop(self._owners[owner])
            if len(self._rooms) >= self.max_rooms:
                idlest = min(self._rooms, key=lambda c: self._rooms[c].expires)
                if self._rooms[idlest].expires - self.ttl_s > now - self.bounds.reclaim_idle_s:
                    raise RoomsFull()  # every room's teacher beat recently: none is abandoned
                self._drop(idlest)
            self._created[address] = [*started, now]
            if len(self._created) > 4 * self.max_rooms:  # bounded: forget addresses quiet for the window
                self._created = {a: ts for a, ts in self._created.items() if ts and ts[-1] > now - CREATION_WINDOW_S}
            code = new_code()
            while code in self._rooms:  # 1 in 2**40 per live room; never loops in practice
                code = new_code()
            self._rooms[code] = _MemoryRoom(digest=secret_digest(secret), expires=now + self.ttl_s, owner=owner)
            if owner:
                self._owners[owner] = code
        return Room(code, secret)

    def room(self, code: str) -> RoomState:
        with self._lock:
            room = self._live(code)
            return RoomState(code, room.page, room.step, frozenset(room.revealed), joined=len(room.students))

    def move(self, code: str, secret: str, page: str, step: int) -> None:
        with self._lock:
            room = self._teachers(code, secret)
            room.page, room.step = page, int(step)
            self._touch(room)

    def _join(self, room: _MemoryRoom, code: str, student: str, address: str) -> None:
        """Admit a new student (the caller holds the lock); a known one passes."""
        if student in room.students:
            return
        bounds = self.bounds
        if len(room.students) >= bounds.max_students:
            raise RoomFull()
        if room.per_address.get(address, 0) >= bounds.max_students_per_address:
            raise AddressFull()
        now = self._clock()
        tokens, at = self._buckets.get((code, address), (float(bounds.join_burst), now))
        tokens = min(float(bounds.join_burst), tokens + (now - at) * bounds.joins_per_s)
        if tokens < 1:
            self._buckets[(code, address)] = (tokens, now)
            raise JoinsTooFast()
        self._buckets[(code, address)] = (tokens - 1, now)
        room.students[student] = address
        room.per_address[address] = room.per_address.get(address, 0) + 1

    def join(self, code: str, student: str, address: str = "") -> None:
        check_student(student, address)
        with self._lock:
            self._join(self._live(code), code, student, address)

    def answer(self, code: str, question: str, student: str, option: int, options: int, address: str = "") -> Answered:
        check_answer(question, student, option, options)
        check_student(student, address)
        with self._lock:
            room = self._live(code)
            if question in room.revealed:
                return Answered.CLOSED
            self._join(room, code, student, address)
            old = room.answers.get((question, student))
            if old == option:
                return Answered.UNCHANGED
            if old is None and len(room.answers) >= self.max_answers:
                raise RoomFull()
            if old is not None:
                room.counts[(question, old)] -= 1
            room.answers[(question, student)] = option
            room.counts[(question, option)] = room.counts.get((question, option), 0) + 1
            return Answered.RECORDED if old is None else Answered.CHANGED

    def counts(self, code: str, question: str, options: int) -> Counts:
        with self._lock:
            room = self._live(code)
            return Counts(tuple(room.counts.get((question, option), 0) for option in range(options)))

    def reveal(self, code: str, secret: str, question: str) -> None:
        with self._lock:
            room = self._teachers(code, secret)
            room.revealed.add(question)
            self._touch(room)

    def close(self, code: str, secret: str) -> None:
        with self._lock:
            self._teachers(code, secret)
            self._drop(code)
