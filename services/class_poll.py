"""The class poll's store: rooms, anonymous answers and their counts, shared by every session.

One interface (`PollStore`), two implementations with the same behaviour:
- `MemoryPollStore`: a dict behind a lock, in this process. The default: one process (Community
  Cloud, a laptop) needs nothing else.
- `RedisPollStore`: Redis, for several replicas behind a load balancer (the students of one class
  land on different processes). Chosen when ATTENTION_LAB_REDIS_URL is set (`store_from_environment`).

A room is a short code (8 characters of Crockford's base 32: 40 random bits, read aloud as
"K7QM-2HXD") and a teacher secret (only its SHA-256 is stored; the secret stays in the teacher's
session, never in a link). A room remembers where the teacher is (page and step), which questions
were revealed, and for each question each student's one answer (changeable until the reveal) and
the count per option. No names: a student is a random id made by their own session.

Bounds: at most `max_rooms` rooms and `max_answers` answers per room; a room idle for `ttl_s`
(3 hours by default) expires with everything in it. Every failure is a `PollError` subclass with
a plain message, so the page can show it and carry on with the lesson.

This module never imports streamlit (core/ rule) and imports `redis` only when Redis is used.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from core.charts.spec import VegaChart

# Crockford's base 32: no I, L, O or U, so a code read aloud or copied from a projector is not
# misread (1/I/L and 0/O are folded together when a code is typed back).
ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
CODE_LENGTH = 8  # 8 characters x 5 bits = 40 random bits
_TYPED_ALIASES = str.maketrans({"I": "1", "L": "1", "O": "0"})
_CODE = re.compile(f"[{ALPHABET}]{{{CODE_LENGTH}}}")
MAX_TYPED_CODE = 24  # longer than any spelling of a code (dashes, spaces): not read at all

DEFAULT_TTL_S = 3 * 60 * 60  # a room idle this long is gone (a lecture, with margin)
DEFAULT_MAX_ROOMS = 500  # rooms alive at once, per store
DEFAULT_MAX_ANSWERS = 2000  # answers per room, all questions together (a course of 200, ten questions)
MAX_QUESTION_ID = 80  # a question id is the page's own constant; never longer than this
REDIS_URL_VARIABLE = "ATTENTION_LAB_REDIS_URL"


class PollError(Exception):
    """A poll operation that could not be done; `str(error)` is a plain sentence for the page."""


class RoomGone(PollError):
    """No room with this code: never made, expired, or closed."""

    def __init__(self) -> None:
        super().__init__("There is no class poll with this code: it has ended, or the code is mistyped.")


class RoomsFull(PollError):
    """The store holds `max_rooms` live rooms already."""

    def __init__(self) -> None:
        super().__init__("Too many class polls are open on this server right now; try again later.")


class RoomFull(PollError):
    """This room holds `max_answers` answers already."""

    def __init__(self) -> None:
        super().__init__("This class poll is full: it takes no more answers.")


class NotTeacher(PollError):
    """A teacher's action (move, reveal, close) without the room's secret."""

    def __init__(self) -> None:
        super().__init__("Only the teacher who started this class poll can do that.")


class PollUnavailable(PollError):
    """The shared store (Redis) does not answer; the poll waits, the lesson goes on."""

    def __init__(self) -> None:
        super().__init__(
            "The class poll is unavailable right now (its store does not answer); the lesson works as usual."
        )


class Answered(enum.Enum):
    """What became of a student's answer."""

    RECORDED = "recorded"  # the student's first answer to this question
    CHANGED = "changed"  # replaced their earlier answer
    UNCHANGED = "unchanged"  # the same option again
    CLOSED = "closed"  # the question was revealed: answers are frozen


@dataclass(frozen=True)
class Room:
    """A newly made room: the code for the students' link, the secret for the teacher's session only."""

    code: str
    secret: str = field(repr=False)


@dataclass(frozen=True)
class RoomState:
    """What every session may read about a room: where the teacher is and what was revealed."""

    code: str
    page: str  # the teacher's page (its registry slug); "" until the teacher has shown one
    step: int  # the teacher's step in presentation mode (1-based)
    revealed: frozenset[str]  # question ids whose answer the teacher revealed


class PollStore(Protocol):
    """The interface both stores implement (tests/unit/test_class_poll_store.py runs one suite on both)."""

    def create_room(self) -> Room: ...

    def room(self, code: str) -> RoomState: ...

    def move(self, code: str, secret: str, page: str, step: int) -> None: ...

    def answer(self, code: str, question: str, student: str, option: int, options: int) -> Answered: ...

    def counts(self, code: str, question: str, options: int) -> tuple[int, ...]: ...

    def reveal(self, code: str, secret: str, question: str) -> None: ...

    def close(self, code: str, secret: str) -> None: ...


# ------------------------------------------------------------------ codes, secrets, checks
def new_code() -> str:
    """8 characters drawn by the OS's CSPRNG (`secrets`): 40 random bits."""
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


def parse_code(text: str) -> str | None:
    """The room code a person typed or a link carries, normalised; None when it cannot be one.

    Case, dashes and spaces are ignored, and I/L/O read as 1/1/0 (Crockford's rule).
    """
    if not isinstance(text, str) or len(text) > MAX_TYPED_CODE:
        return None
    code = re.sub(r"[\s-]", "", text).upper().translate(_TYPED_ALIASES)
    return code if _CODE.fullmatch(code) else None


def spoken(code: str) -> str:
    """The code as shown and read aloud: two groups of four ("K7QM-2HXD")."""
    return f"{code[:4]}-{code[4:]}"


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def secret_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _check_answer(question: str, student: str, option: int, options: int) -> None:
    if not (0 < len(question) <= MAX_QUESTION_ID) or not (0 < len(student) <= 64):
        raise ValueError("a question id and a student id are short non-empty strings")
    if SEPARATOR in question or SEPARATOR in student:
        raise ValueError("a question id or student id holds the separator")
    if not (isinstance(option, int) and 0 <= option < options):
        raise ValueError(f"option {option!r} is not one of {options} options")


# ------------------------------------------------------------------ in this process
@dataclass
class _MemoryRoom:
    digest: str
    expires: float
    page: str = ""
    step: int = 1
    revealed: set[str] = field(default_factory=set)
    answers: dict[tuple[str, str], int] = field(default_factory=dict)  # (question, student) -> option
    counts: dict[tuple[str, int], int] = field(default_factory=dict)  # (question, option) -> students


class MemoryPollStore:
    """Rooms in a dict of this process, behind one lock (sessions run in threads)."""

    def __init__(
        self,
        ttl_s: float = DEFAULT_TTL_S,
        max_rooms: int = DEFAULT_MAX_ROOMS,
        max_answers: int = DEFAULT_MAX_ANSWERS,
        clock=time.monotonic,
    ) -> None:
        self.ttl_s, self.max_rooms, self.max_answers, self._clock = ttl_s, max_rooms, max_answers, clock
        self._rooms: dict[str, _MemoryRoom] = {}
        self._lock = threading.Lock()

    def _live(self, code: str) -> _MemoryRoom:
        """The room, or RoomGone; the caller holds the lock."""
        room = self._rooms.get(code)
        if room is None or room.expires <= self._clock():
            self._rooms.pop(code, None)
            raise RoomGone()
        return room

    def _touch(self, room: _MemoryRoom) -> None:
        room.expires = self._clock() + self.ttl_s

    def _teachers(self, code: str, secret: str) -> _MemoryRoom:
        room = self._live(code)
        if not hmac.compare_digest(room.digest, secret_digest(secret)):
            raise NotTeacher()
        return room

    def create_room(self) -> Room:
        secret = new_secret()
        with self._lock:
            now = self._clock()
            for code in [c for c, r in self._rooms.items() if r.expires <= now]:
                del self._rooms[code]
            if len(self._rooms) >= self.max_rooms:
                raise RoomsFull()
            code = new_code()
            while code in self._rooms:  # 1 in 2**40 per live room; never loops in practice
                code = new_code()
            self._rooms[code] = _MemoryRoom(digest=secret_digest(secret), expires=now + self.ttl_s)
        return Room(code, secret)

    def room(self, code: str) -> RoomState:
        with self._lock:
            room = self._live(code)
            return RoomState(code, room.page, room.step, frozenset(room.revealed))

    def move(self, code: str, secret: str, page: str, step: int) -> None:
        with self._lock:
            room = self._teachers(code, secret)
            room.page, room.step = page, int(step)
            self._touch(room)

    def answer(self, code: str, question: str, student: str, option: int, options: int) -> Answered:
        _check_answer(question, student, option, options)
        with self._lock:
            room = self._live(code)
            if question in room.revealed:
                return Answered.CLOSED
            old = room.answers.get((question, student))
            if old == option:
                self._touch(room)
                return Answered.UNCHANGED
            if old is None and len(room.answers) >= self.max_answers:
                raise RoomFull()
            if old is not None:
                room.counts[(question, old)] -= 1
            room.answers[(question, student)] = option
            room.counts[(question, option)] = room.counts.get((question, option), 0) + 1
            self._touch(room)
            return Answered.RECORDED if old is None else Answered.CHANGED

    def counts(self, code: str, question: str, options: int) -> tuple[int, ...]:
        with self._lock:
            room = self._live(code)
            return tuple(room.counts.get((question, option), 0) for option in range(options))

    def reveal(self, code: str, secret: str, question: str) -> None:
        with self._lock:
            room = self._teachers(code, secret)
            room.revealed.add(question)
            self._touch(room)

    def close(self, code: str, secret: str) -> None:
        with self._lock:
            self._teachers(code, secret)
            del self._rooms[code]


# ------------------------------------------------------------------ in Redis, shared by replicas
# Three keys per room, expiring together: <prefix>room:<code> (a hash: secret digest, page, step,
# "revealed:<question>" fields), <prefix>answers:<code> (a hash "<question>\x1f<student>" -> option)
# and <prefix>counts:<code> (a hash "<question>\x1f<option>" -> students). A sorted set of live
# codes by expiry time bounds the number of rooms. Every write is one Lua script, so that Redis
# runs it atomically: a hundred students answering at once never lose or double a count.
SEPARATOR = "\x1f"  # the ASCII unit separator: in no question id and no student id

_CREATE = """
-- KEYS: rooms (zset), room; ARGV: code, digest, now_ms, ttl_ms, max_rooms
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[5]) then return -1 end
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
redis.call('HSET', KEYS[2], 'digest', ARGV[2], 'page', '', 'step', 1)
redis.call('PEXPIRE', KEYS[2], ARGV[4])
redis.call('ZADD', KEYS[1], tonumber(ARGV[3]) + tonumber(ARGV[4]), ARGV[1])
return 1
"""

_TOUCH = """
local function touch(keys, code, now_ms, ttl_ms)
  for i = 2, #keys do
    if redis.call('EXISTS', keys[i]) == 1 then redis.call('PEXPIRE', keys[i], ttl_ms) end
  end
  redis.call('ZADD', keys[1], tonumber(now_ms) + tonumber(ttl_ms), code)
end
"""

_ANSWER = (
    _TOUCH
    + """
-- KEYS: rooms, room, answers, counts; ARGV: code, question, student, option, max_answers, now_ms, ttl_ms
if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end
if redis.call('HEXISTS', KEYS[2], 'revealed:' .. ARGV[2]) == 1 then return 3 end
local field = ARGV[2] .. '\\31' .. ARGV[3]
local old = redis.call('HGET', KEYS[3], field)
if old == ARGV[4] then
  touch(KEYS, ARGV[1], ARGV[6], ARGV[7])
  return 2
end
if not old and redis.call('HLEN', KEYS[3]) >= tonumber(ARGV[5]) then return -2 end
if old then redis.call('HINCRBY', KEYS[4], ARGV[2] .. '\\31' .. old, -1) end
redis.call('HSET', KEYS[3], field, ARGV[4])
redis.call('HINCRBY', KEYS[4], ARGV[2] .. '\\31' .. ARGV[4], 1)
touch(KEYS, ARGV[1], ARGV[6], ARGV[7])
if old then return 1 end
return 0
"""
)

_TEACHER = (
    _TOUCH
    + """
-- KEYS: rooms, room, answers, counts; ARGV: code, digest, now_ms, ttl_ms, then field/value pairs to set
local digest = redis.call('HGET', KEYS[2], 'digest')
if not digest then return -1 end
if digest ~= ARGV[2] then return -2 end
for i = 5, #ARGV, 2 do redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]) end
touch(KEYS, ARGV[1], ARGV[3], ARGV[4])
return 1
"""
)

_CLOSE = """
-- KEYS: rooms, room, answers, counts; ARGV: code, digest
local digest = redis.call('HGET', KEYS[2], 'digest')
if not digest then return -1 end
if digest ~= ARGV[2] then return -2 end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
redis.call('ZREM', KEYS[1], ARGV[1])
return 1
"""

_ANSWERED = {0: Answered.RECORDED, 1: Answered.CHANGED, 2: Answered.UNCHANGED, 3: Answered.CLOSED}


class RedisPollStore:
    """Rooms in Redis: every replica behind the balancer sees the same rooms and counts.

    A Redis that does not answer (stopped, restarting, unreachable) raises PollUnavailable within
    about `timeout_s`; the client reconnects by itself on a later call once Redis is back (and
    re-sends the Lua scripts, which a restarted Redis has forgotten).
    """

    def __init__(
        self,
        url: str,
        ttl_s: float = DEFAULT_TTL_S,
        max_rooms: int = DEFAULT_MAX_ROOMS,
        max_answers: int = DEFAULT_MAX_ANSWERS,
        prefix: str = "attention-lab:poll:",
        timeout_s: float = 0.5,
    ) -> None:
        import redis  # only where Redis is used: the in-process store needs nothing installed

        self._errors = (redis.exceptions.RedisError, OSError)
        self._redis = redis.Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s, decode_responses=True
        )
        self.ttl_s, self.max_rooms, self.max_answers, self.prefix = ttl_s, max_rooms, max_answers, prefix
        self._create = self._redis.register_script(_CREATE)
        self._answer = self._redis.register_script(_ANSWER)
        self._teacher = self._redis.register_script(_TEACHER)
        self._close = self._redis.register_script(_CLOSE)

    def _keys(self, code: str) -> list[str]:
        p = self.prefix
        return [p + "rooms", f"{p}room:{code}", f"{p}answers:{code}", f"{p}counts:{code}"]

    def _call(self, action, *args, **kwargs):
        """Run one Redis call; a Redis that does not answer becomes PollUnavailable."""
        try:
            return action(*args, **kwargs)
        except self._errors as error:
            raise PollUnavailable() from error

    def _now_ms(self) -> int:
        return int(time.time() * 1000)

    def _ttl_ms(self) -> int:
        return max(1, int(self.ttl_s * 1000))

    def create_room(self) -> Room:
        secret = new_secret()
        while True:
            code = new_code()
            keys = self._keys(code)[:2]
            made = self._call(
                self._create,
                keys=keys,
                args=[code, secret_digest(secret), self._now_ms(), self._ttl_ms(), self.max_rooms],
            )
            if made == -1:
                raise RoomsFull()
            if made == 1:
                return Room(code, secret)

    def room(self, code: str) -> RoomState:
        fields = self._call(self._redis.hgetall, self._keys(code)[1])
        if not fields:
            raise RoomGone()
        revealed = frozenset(name.removeprefix("revealed:") for name in fields if name.startswith("revealed:"))
        return RoomState(code, fields.get("page", ""), int(fields.get("step", 1)), revealed)

    def _as_teacher(self, code: str, secret: str, *pairs: object) -> None:
        done = self._call(
            self._teacher,
            keys=self._keys(code),
            args=[code, secret_digest(secret), self._now_ms(), self._ttl_ms(), *pairs],
        )
        if done == -1:
            raise RoomGone()
        if done == -2:
            raise NotTeacher()

    def move(self, code: str, secret: str, page: str, step: int) -> None:
        self._as_teacher(code, secret, "page", page, "step", int(step))

    def answer(self, code: str, question: str, student: str, option: int, options: int) -> Answered:
        _check_answer(question, student, option, options)
        done = self._call(
            self._answer,
            keys=self._keys(code),
            args=[code, question, student, option, self.max_answers, self._now_ms(), self._ttl_ms()],
        )
        if done == -1:
            raise RoomGone()
        if done == -2:
            raise RoomFull()
        return _ANSWERED[done]

    def counts(self, code: str, question: str, options: int) -> tuple[int, ...]:
        _, room, _, counts = self._keys(code)
        pipe = self._redis.pipeline(transaction=True)  # one round trip, one consistent moment
        pipe.exists(room)
        pipe.hmget(counts, [f"{question}{SEPARATOR}{option}" for option in range(options)])
        exists, values = self._call(pipe.execute)
        if not exists:
            raise RoomGone()
        return tuple(int(value or 0) for value in values)

    def reveal(self, code: str, secret: str, question: str) -> None:
        self._as_teacher(code, secret, f"revealed:{question}", 1)

    def close(self, code: str, secret: str) -> None:
        done = self._call(self._close, keys=self._keys(code), args=[code, secret_digest(secret)])
        if done == -1:
            raise RoomGone()
        if done == -2:
            raise NotTeacher()


def store_from_environment() -> PollStore:
    """Redis when ATTENTION_LAB_REDIS_URL is set (several replicas), else this process's memory."""
    url = os.environ.get(REDIS_URL_VARIABLE, "").strip()
    return RedisPollStore(url) if url else MemoryPollStore()


# ------------------------------------------------------------------ what the teacher's screen shows
@dataclass(frozen=True)
class Tally:
    """One question's answers as the teacher's screen shows them."""

    counts: tuple[int, ...]  # students per option, in the options' order
    options: tuple[str, ...]

    @property
    def total(self) -> int:
        return sum(self.counts)

    def headline(self) -> str:
        """ "3 answers" (the words the teacher reads out), computed from the counts."""
        return f"{self.total} answer" + ("" if self.total == 1 else "s")


def tally_chart(tally: Tally, answer: int | None = None) -> VegaChart:
    """Horizontal bars, one per option, its count at its end; the right option outlined once revealed.

    `answer`: the right option's index after the reveal (None before: no hint on the projector).
    Altair is imported here, not at module import: the store needs none.
    """
    import altair as alt
    import pandas as pd

    from core.charts.spec import from_altair

    frame = pd.DataFrame(
        {
            "option": [f"{index + 1}. {text}" for index, text in enumerate(tally.options)],
            "students": list(tally.counts),
            "right": [index == answer for index in range(len(tally.options))],
        }
    )
    order = list(frame["option"])
    base = alt.Chart(frame).encode(
        y=alt.Y("option:N", sort=order, title=None, axis=alt.Axis(labelLimit=420)),
        x=alt.X("students:Q", title="students", axis=alt.Axis(tickMinStep=1, format="d")),
    )
    bars = base.mark_bar(color="#4c78a8", strokeWidth=3).encode(
        stroke=alt.condition(alt.datum.right, alt.value("#e4007c"), alt.value(None)),
        tooltip=[alt.Tooltip("option:N"), alt.Tooltip("students:Q")],
    )
    labels = base.mark_text(align="left", dx=4, fontSize=16).encode(text="students:Q")
    return from_altair((bars + labels).properties(height=alt.Step(48)))  # 48 px a bar: readable from the back
