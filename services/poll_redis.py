"""The class poll's rooms in Redis, shared by every replica behind a load balancer.

Chosen when ATTENTION_LAB_REDIS_URL is set (services/class_poll.py `store_from_environment`); the same
behaviour as the in-process store (services/poll_memory.py). `redis` is imported only here, when used.
"""

from __future__ import annotations

import time
from typing import Any

from services.class_poll import (
    CREATION_WINDOW_S,
    MAX_STEP,
    SEPARATOR,
    AddressFull,
    Answered,
    Bounds,
    Counts,
    JoinsTooFast,
    NotTeacher,
    PollUnavailable,
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
    stored_whole,
)

# Per room, keys that expire together with the room: <prefix>room:<code> (a hash: secret digest,
# owner, page, step, "revealed:<question>" fields), answers:<code> (a hash "<question>\x1f<student>"
# -> option), counts:<code> ("<question>\x1f<option>" -> students), students:<code> (student ->
# address), per_address:<code> (address -> students) and buckets:<code> (address -> tokens and time
# of the join bucket). Beside them: a sorted set of live codes by expiry (the bound on rooms, and
# the idlest room first), owner:<owner> -> its room's code, and created:<address>, the rooms an
# address started within the window. Every write is one Lua script, so that Redis runs it
# atomically: a hundred students answering at once never lose or double a count.
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
        check_student(student, address)
        done = self._call(
            self._join, keys=self._keys(code), args=[student, address, self._now_ms(), *self._join_bounds()]
        )
        self._refused(done)

    def answer(self, code: str, question: str, student: str, option: int, options: int, address: str = "") -> Answered:
        check_answer(question, student, option, options)
        check_student(student, address)
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
