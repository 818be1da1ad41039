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

Bounds (issue 31: one client must not take the rooms, nor stuff a room's counts):
- a room lives `ttl_s` (10 minutes) past its teacher's last heartbeat (any teacher action; the
  teacher's page beats every 30 s); the students' answers do not keep it alive;
- one owner (the teacher's session) holds one room: a second one replaces the first;
- one address starts at most `max_creations_per_address` rooms per hour;
- at most `max_rooms` rooms: a full store reclaims its idlest room (no heartbeat for
  `reclaim_idle_s`) before it refuses;
- a room takes `max_students` students, at most `max_students_per_address` of them from one
  address, and new students from one address arrive at most `joins_per_s` a second (after a burst
  of `join_burst`); `max_answers` answers in all. A student's first answer joins them.
A class behind one address (a school's NAT) shares these per-address bounds: they are set for a
course of 200. Every value read back from Redis is checked; a bad one is logged and read as a safe
default (`RoomState.damaged`, `Counts.damaged`). Every failure is a `PollError` subclass with a
plain message, so the page can show it and carry on with the lesson.

This module never imports streamlit (core/ rule) and imports `redis` only when Redis is used.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import logging
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from core.charts.spec import VegaChart

# Crockford's base 32: no I, L, O or U, so a code read aloud or copied from a projector is not
# misread (1/I/L and 0/O are folded together when a code is typed back).
ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
CODE_LENGTH = 8  # 8 characters x 5 bits = 40 random bits
_TYPED_ALIASES = str.maketrans({"I": "1", "L": "1", "O": "0"})
_CODE = re.compile(f"[{ALPHABET}]{{{CODE_LENGTH}}}")
MAX_TYPED_CODE = 24  # longer than any spelling of a code (dashes, spaces): not read at all

DEFAULT_TTL_S = 10 * 60  # a room this long without its teacher's heartbeat is gone
DEFAULT_MAX_ROOMS = 500  # rooms alive at once, per store
DEFAULT_MAX_ANSWERS = 2000  # answers per room, all questions together (a course of 200, ten questions)
DEFAULT_RECLAIM_IDLE_S = 2 * 60  # a full store may reclaim a room whose teacher has not beaten for this long
DEFAULT_MAX_CREATIONS_PER_ADDRESS = 12  # rooms one address may start per CREATION_WINDOW_S (a school's teachers)
CREATION_WINDOW_S = 60 * 60
DEFAULT_MAX_STUDENTS = 1000  # students per room
DEFAULT_MAX_STUDENTS_PER_ADDRESS = 250  # of them from one address: a course of 200 behind one NAT fits
DEFAULT_JOIN_BURST = 120  # new students one address may bring at once ...
DEFAULT_JOINS_PER_S = 1.0  # ... and then per second (a class of 200 on one NAT: the last joins ~80 s on)
LOGGER = logging.getLogger("attention_lab")
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


class TooManyRooms(PollError):
    """This address has started `max_creations_per_address` rooms within the hour."""

    def __init__(self) -> None:
        super().__init__("Many class polls were started from this network lately; try again later.")


class AddressFull(PollError):
    """This room holds `max_students_per_address` students from this address already."""

    def __init__(self) -> None:
        super().__init__("This class poll takes no more students from this network.")


class JoinsTooFast(PollError):
    """New students from this address arrive faster than `joins_per_s`; joining again soon works."""

    def __init__(self) -> None:
        super().__init__("Many students are joining from this network right now; you join in a moment.")


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
    # Not compared: a student's page reruns when the teacher moves or reveals, not when someone joins.
    joined: int = field(default=0, compare=False)  # students who joined (answered or opened the link)
    damaged: bool = field(default=False, compare=False)  # a stored value was unreadable: read as a default


class Counts(tuple):
    """Students per option (a tuple of ints), and whether a stored count was unreadable (read as 0)."""

    damaged: bool = False

    def __new__(cls, values: tuple[int, ...] | list[int], damaged: bool = False) -> Counts:
        made = super().__new__(cls, values)
        made.damaged = damaged
        return made


def stored_whole(value: object, what: str, default: int, low: int, high: int) -> tuple[int, bool]:
    """A whole number read back from the store: (it, False), or (`default`, True) and a log line
    when it is not the plain decimal integer in [low, high] the app writes ("abc", "2.5", "1e3", -7)."""
    text = value if isinstance(value, str) else str(value) if isinstance(value, int) else None
    if text is not None and re.fullmatch(r"-?[0-9]{1,12}", text) and low <= int(text) <= high:
        return int(text), False
    LOGGER.warning(
        "The poll's store holds %s %r, not a whole number in [%d, %d]; read as %d.", what, value, low, high, default
    )
    return default, True


class PollStore(Protocol):
    """The interface both stores implement (tests/unit/test_class_poll_store.py runs one suite on both)."""

    def create_room(self, owner: str = "", address: str = "") -> Room: ...

    def room(self, code: str) -> RoomState: ...

    def join(self, code: str, student: str, address: str = "") -> None: ...

    def move(self, code: str, secret: str, page: str, step: int) -> None: ...

    def answer(
        self, code: str, question: str, student: str, option: int, options: int, address: str = ""
    ) -> Answered: ...

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


MAX_STEP = 1000  # far more steps than any page has; a stored step beyond is damaged


@dataclass(frozen=True)
class Bounds:
    """What one store allows (module docstring); both stores take the same keyword arguments."""

    ttl_s: float = DEFAULT_TTL_S
    max_rooms: int = DEFAULT_MAX_ROOMS
    max_answers: int = DEFAULT_MAX_ANSWERS
    reclaim_idle_s: float = DEFAULT_RECLAIM_IDLE_S
    max_creations_per_address: int = DEFAULT_MAX_CREATIONS_PER_ADDRESS
    max_students: int = DEFAULT_MAX_STUDENTS
    max_students_per_address: int = DEFAULT_MAX_STUDENTS_PER_ADDRESS
    join_burst: int = DEFAULT_JOIN_BURST
    joins_per_s: float = DEFAULT_JOINS_PER_S


def _check_student(student: str, address: str) -> None:
    if not (0 < len(student) <= 64) or SEPARATOR in student or len(address) > 64:
        raise ValueError("a student id is a short non-empty string, an address a short one")


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
        _check_student(student, address)
        with self._lock:
            self._join(self._live(code), code, student, address)

    def answer(self, code: str, question: str, student: str, option: int, options: int, address: str = "") -> Answered:
        _check_answer(question, student, option, options)
        _check_student(student, address)
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


# ------------------------------------------------------------------ in Redis, shared by replicas
# Per room, keys that expire together with the room: <prefix>room:<code> (a hash: secret digest,
# owner, page, step, "revealed:<question>" fields), answers:<code> (a hash "<question>\x1f<student>"
# -> option), counts:<code> ("<question>\x1f<option>" -> students), students:<code> (student ->
# address), per_address:<code> (address -> students) and buckets:<code> (address -> tokens and time
# of the join bucket). Beside them: a sorted set of live codes by expiry (the bound on rooms, and
# the idlest room first), owner:<owner> -> its room's code, and created:<address>, the rooms an
# address started within the window. Every write is one Lua script, so that Redis runs it
# atomically: a hundred students answering at once never lose or double a count.
SEPARATOR = "\x1f"  # the ASCII unit separator: in no question id and no student id
_ROOM_KEYS = ("room", "answers", "counts", "students", "per_address", "buckets")

_LIB = """
local function room_keys(prefix, code)
  return {prefix .. 'room:' .. code, prefix .. 'answers:' .. code, prefix .. 'counts:' .. code,
          prefix .. 'students:' .. code, prefix .. 'per_address:' .. code, prefix .. 'buckets:' .. code}
end
local function drop(prefix, code)
  local keys = room_keys(prefix, code)
  local owner = redis.call('HGET', keys[1], 'owner')
  if owner and owner ~= '' and redis.call('GET', prefix .. 'owner:' .. owner) == code then
    redis.call('DEL', prefix .. 'owner:' .. owner)
  end
  redis.call('DEL', unpack(keys))
  redis.call('ZREM', prefix .. 'rooms', code)
end
local function same_life(keys)
  -- keys made by a student's write live as long as the room (only the teacher extends that)
  local ttl = redis.call('PTTL', keys[2])
  if ttl > 0 then
    for i = 3, #keys do
      if redis.call('EXISTS', keys[i]) == 1 then redis.call('PEXPIRE', keys[i], ttl) end
    end
  end
end
local function touch(keys, prefix, code, now_ms, ttl_ms)
  for i = 2, #keys do
    if redis.call('EXISTS', keys[i]) == 1 then redis.call('PEXPIRE', keys[i], ttl_ms) end
  end
  redis.call('ZADD', keys[1], tonumber(now_ms) + tonumber(ttl_ms), code)
  local owner = redis.call('HGET', keys[2], 'owner')
  if owner and owner ~= '' then redis.call('PEXPIRE', prefix .. 'owner:' .. owner, ttl_ms) end
end
local function join(keys, student, address, now_ms, max_students, max_per_address, burst, per_s)
  -- 0: admitted or known; -2: room full; -4: this address's share is full; -5: joining too fast
  if redis.call('HEXISTS', keys[5], student) == 1 then return 0 end
  if redis.call('HLEN', keys[5]) >= tonumber(max_students) then return -2 end
  if (tonumber(redis.call('HGET', keys[6], address)) or 0) >= tonumber(max_per_address) then return -4 end
  local now = tonumber(now_ms)
  local tokens = tonumber(redis.call('HGET', keys[7], 't:' .. address)) or tonumber(burst)
  local at = tonumber(redis.call('HGET', keys[7], 'a:' .. address)) or now
  tokens = math.min(tonumber(burst), tokens + (now - at) / 1000 * tonumber(per_s))
  if tokens < 1 then
    redis.call('HSET', keys[7], 't:' .. address, tokens, 'a:' .. address, now)
    same_life(keys)
    return -5
  end
  redis.call('HSET', keys[7], 't:' .. address, tokens - 1, 'a:' .. address, now)
  redis.call('HSET', keys[5], student, address)
  redis.call('HINCRBY', keys[6], address, 1)
  same_life(keys)
  return 0
end
"""

_CREATE = (
    _LIB
    + """
-- KEYS: rooms, room; ARGV: code, digest, now_ms, ttl_ms, max_rooms, prefix, owner, address,
--       max_creations, window_ms, reclaim_ms
local prefix, now, ttl = ARGV[6], tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local created_key = prefix .. 'created:' .. ARGV[8]
if (tonumber(redis.call('GET', created_key)) or 0) >= tonumber(ARGV[9]) then return -3 end
if ARGV[7] ~= '' then
  local old = redis.call('GET', prefix .. 'owner:' .. ARGV[7])
  if old then drop(prefix, old) end
end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[5]) then
  local idlest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if tonumber(idlest[2]) - ttl > now - tonumber(ARGV[11]) then return -1 end
  drop(prefix, idlest[1])
end
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
redis.call('HSET', KEYS[2], 'digest', ARGV[2], 'page', '', 'step', 1, 'owner', ARGV[7])
redis.call('PEXPIRE', KEYS[2], ttl)
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
if ARGV[7] ~= '' then redis.call('SET', prefix .. 'owner:' .. ARGV[7], ARGV[1], 'PX', ttl) end
if redis.call('INCR', created_key) == 1 then redis.call('PEXPIRE', created_key, ARGV[10]) end
return 1
"""
)

_JOIN = (
    _LIB
    + """
-- KEYS: rooms, room, answers, counts, students, per_address, buckets
-- ARGV: student, address, now_ms, max_students, max_per_address, burst, per_s
if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end
return join(KEYS, ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7])
"""
)

_ANSWER = (
    _LIB
    + """
-- KEYS: rooms, room, answers, counts, students, per_address, buckets
-- ARGV: question, student, option, max_answers, address, now_ms, max_students, max_per_address, burst, per_s
if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end
if redis.call('HEXISTS', KEYS[2], 'revealed:' .. ARGV[1]) == 1 then return 3 end
local joined = join(KEYS, ARGV[2], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10])
if joined < 0 then return joined end
local field = ARGV[1] .. '\\31' .. ARGV[2]
local old = redis.call('HGET', KEYS[3], field)
if old == ARGV[3] then return 2 end
if not old and redis.call('HLEN', KEYS[3]) >= tonumber(ARGV[4]) then return -2 end
if old then redis.call('HINCRBY', KEYS[4], ARGV[1] .. '\\31' .. old, -1) end
redis.call('HSET', KEYS[3], field, ARGV[3])
redis.call('HINCRBY', KEYS[4], ARGV[1] .. '\\31' .. ARGV[3], 1)
same_life(KEYS)
if old then return 1 end
return 0
"""
)

_TEACHER = (
    _LIB
    + """
-- KEYS: rooms, room, answers, ...; ARGV: code, digest, now_ms, ttl_ms, prefix, then field/value pairs to set
local digest = redis.call('HGET', KEYS[2], 'digest')
if not digest then return -1 end
if digest ~= ARGV[2] then return -2 end
for i = 6, #ARGV, 2 do redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]) end
touch(KEYS, ARGV[5], ARGV[1], ARGV[3], ARGV[4])
return 1
"""
)

_CLOSE = (
    _LIB
    + """
-- KEYS: rooms, room; ARGV: code, digest, prefix
local digest = redis.call('HGET', KEYS[2], 'digest')
if not digest then return -1 end
if digest ~= ARGV[2] then return -2 end
drop(ARGV[3], ARGV[1])
return 1
"""
)

_ANSWERED = {0: Answered.RECORDED, 1: Answered.CHANGED, 2: Answered.UNCHANGED, 3: Answered.CLOSED}
_REFUSED = {-1: RoomGone, -2: RoomFull, -3: TooManyRooms, -4: AddressFull, -5: JoinsTooFast}


class RedisPollStore:
    """Rooms in Redis: every replica behind the balancer sees the same rooms and counts.

    A Redis that does not answer (stopped, restarting, unreachable) raises PollUnavailable within
    about `timeout_s`; the client reconnects by itself on a later call once Redis is back (and
    re-sends the Lua scripts, which a restarted Redis has forgotten).
    """

    def __init__(self, url: str, prefix: str = "attention-lab:poll:", timeout_s: float = 0.5, **bounds: Any) -> None:
        import redis  # only where Redis is used: the in-process store needs nothing installed

        self._errors = (redis.exceptions.RedisError, OSError)
        self._redis = redis.Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s, decode_responses=True
        )
        self.bounds = Bounds(**bounds)
        self.ttl_s, self.max_rooms, self.max_answers = self.bounds.ttl_s, self.bounds.max_rooms, self.bounds.max_answers
        self.prefix = prefix
        self._create = self._redis.register_script(_CREATE)
        self._join = self._redis.register_script(_JOIN)
        self._answer = self._redis.register_script(_ANSWER)
        self._teacher = self._redis.register_script(_TEACHER)
        self._close = self._redis.register_script(_CLOSE)

    def _keys(self, code: str) -> list[str]:
        """rooms, then the room's own keys (_ROOM_KEYS): room, answers, counts, students, per_address, buckets."""
        return [self.prefix + "rooms", *(f"{self.prefix}{name}:{code}" for name in _ROOM_KEYS)]

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

    def _join_bounds(self) -> list[object]:
        b = self.bounds
        return [b.max_students, b.max_students_per_address, b.join_burst, b.joins_per_s]

    @staticmethod
    def _refused(done: int) -> None:
        if done in _REFUSED:
            raise _REFUSED[done]()

    def create_room(self, owner: str = "", address: str = "") -> Room:
        secret = new_secret()
        while True:
            code = new_code()
            made = self._call(
                self._create,
                keys=self._keys(code)[:2],
                args=[
                    code,
                    secret_digest(secret),
                    self._now_ms(),
                    self._ttl_ms(),
                    self.max_rooms,
                    self.prefix,
                    owner,
                    address,
                    self.bounds.max_creations_per_address,
                    int(CREATION_WINDOW_S * 1000),
                    int(self.bounds.reclaim_idle_s * 1000),
                ],
            )
            if made == -1:
                raise RoomsFull()
            self._refused(made)
            if made == 1:
                return Room(code, secret)

    def room(self, code: str) -> RoomState:
        keys = self._keys(code)
        pipe = self._redis.pipeline(transaction=True)
        pipe.hgetall(keys[1])
        pipe.hlen(keys[4])
        fields, joined = self._call(pipe.execute)
        if not fields:
            raise RoomGone()
        revealed = frozenset(name.removeprefix("revealed:") for name in fields if name.startswith("revealed:"))
        step, bad_step = stored_whole(fields.get("step", "1"), "a step", 1, 1, MAX_STEP)
        page = fields.get("page", "")
        return RoomState(code, page, step, revealed, joined=int(joined), damaged=bad_step)

    def _as_teacher(self, code: str, secret: str, *pairs: object) -> None:
        done = self._call(
            self._teacher,
            keys=self._keys(code),
            args=[code, secret_digest(secret), self._now_ms(), self._ttl_ms(), self.prefix, *pairs],
        )
        if done == -2:
            raise NotTeacher()
        self._refused(done)

    def move(self, code: str, secret: str, page: str, step: int) -> None:
        self._as_teacher(code, secret, "page", page, "step", int(step))

    def join(self, code: str, student: str, address: str = "") -> None:
        _check_student(student, address)
        done = self._call(
            self._join, keys=self._keys(code), args=[student, address, self._now_ms(), *self._join_bounds()]
        )
        self._refused(done)

    def answer(self, code: str, question: str, student: str, option: int, options: int, address: str = "") -> Answered:
        _check_answer(question, student, option, options)
        _check_student(student, address)
        done = self._call(
            self._answer,
            keys=self._keys(code),
            args=[question, student, option, self.max_answers, address, self._now_ms(), *self._join_bounds()],
        )
        self._refused(done)
        return _ANSWERED[done]

    def counts(self, code: str, question: str, options: int) -> Counts:
        keys = self._keys(code)
        pipe = self._redis.pipeline(transaction=True)  # one round trip, one consistent moment
        pipe.exists(keys[1])
        pipe.hmget(keys[3], [f"{question}{SEPARATOR}{option}" for option in range(options)])
        exists, values = self._call(pipe.execute)
        if not exists:
            raise RoomGone()
        most = self.bounds.max_students
        read = [stored_whole("0" if value is None else value, "a count", 0, 0, most) for value in values]
        return Counts(tuple(count for count, _ in read), damaged=any(bad for _, bad in read))

    def reveal(self, code: str, secret: str, question: str) -> None:
        self._as_teacher(code, secret, f"revealed:{question}", 1)

    def close(self, code: str, secret: str) -> None:
        done = self._call(self._close, keys=self._keys(code)[:2], args=[code, secret_digest(secret), self.prefix])
        if done == -2:
            raise NotTeacher()
        self._refused(done)


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
        return sum(max(0, count) for count in self.counts)  # never "-7 answers", whatever the store held

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
