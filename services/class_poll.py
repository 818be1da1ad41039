"""The class poll's rooms: what a store keeps, its bounds and its errors, shared by every session.

One interface (`PollStore`, here with its types, codes and checks), two implementations with the same
behaviour:
- services/poll_memory.py `MemoryPollStore`: a dict behind a lock, in this process. The default: one
  process (Community Cloud, a laptop) needs nothing else.
- services/poll_redis.py `RedisPollStore`: Redis, for several replicas behind a load balancer (the
  students of one class land on different processes). Chosen when ATTENTION_LAB_REDIS_URL is set
  (ui/class_poll.py `store_from_environment`: the app picks its store; the stores build on this module).
The teacher's screen draws the counts with core/charts/poll.py.

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

These modules never import streamlit (core/ rule); `redis` is imported only when Redis is used.
"""

from __future__ import annotations

import enum
import hashlib
import logging
import re
import secrets
from dataclasses import dataclass, field
from typing import Protocol

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


SEPARATOR = "\x1f"  # joins a question and a student id in Redis keys: the ASCII unit separator, in neither
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


def check_student(student: str, address: str) -> None:
    if not (0 < len(student) <= 64) or SEPARATOR in student or len(address) > 64:
        raise ValueError("a student id is a short non-empty string, an address a short one")


def check_answer(question: str, student: str, option: int, options: int) -> None:
    if not (0 < len(question) <= MAX_QUESTION_ID) or not (0 < len(student) <= 64):
        raise ValueError("a question id and a student id are short non-empty strings")
    if SEPARATOR in question or SEPARATOR in student:
        raise ValueError("a question id or student id holds the separator")
    if not (isinstance(option, int) and 0 <= option < options):
        raise ValueError(f"option {option!r} is not one of {options} options")
