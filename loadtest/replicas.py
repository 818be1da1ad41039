"""Replicas behind HAProxy with cookie affinity, all on loopback, started with one command.

    python -m loadtest.replicas --replicas 3 --port 8500     # serve until Ctrl-C: http://127.0.0.1:8500
    python -m loadtest.replicas --class 12 --seconds 40      # send a simulated class through, kill one replica

N `streamlit run` processes on free loopback ports, each writing its own run log
(ATTENTION_LAB_RUN_LOG: one line per finished run, with the session id), behind Debian's HAProxy:
- affinity by an inserted cookie (ATTENTION_LAB_REPLICA=r0, r1, ...), set on the page's first GET and
  sent back with the websocket handshake, so a Streamlit session stays in one process. Never by
  source IP: a whole class behind one school NAT must still spread over the replicas;
- websockets: `timeout tunnel` keeps an upgraded connection open for a lecture (1 h), while
  `timeout client/server` bound the plain HTTP requests;
- health checks on /_stcore/health every 2 s; a replica that fails three in a row is taken out (one
  that refuses connections is skipped at once), and `option redispatch` sends its students (cookie
  and all) to another one, which sets a new cookie.
A student who loses its replica reconnects with the settings in its link (loadtest/load_client.py).
The replicas share one Debian redis-server on a loopback port (ATTENTION_LAB_REDIS_URL), the class
poll's store, as deploy/kubernetes/redis.yaml does (where redis-server is installed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from loadtest import load_client, run_log
from services.class_poll import REDIS_URL_VARIABLE
from services.client_addresses import TRUSTED_PROXIES_VARIABLE
from testkit.harness import RedisServer, free_port, redis_available, start_server

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
COOKIE = "ATTENTION_LAB_REPLICA"
HAPROXY_CONFIG = """\
global
    maxconn 4096

defaults
    mode http
    option http-server-close
    timeout connect 5s
    timeout http-request 15s
    timeout client 60s
    timeout server 60s
    # A busy replica (a class's first runs import torch and hold the GIL) may answer its health
    # check late; taking it out then would move its students' next connections elsewhere.
    timeout check 5s
    # An upgraded websocket lives as long as the student's tab: a lecture.
    timeout tunnel 1h
    option redispatch
    retries 2
    # Appends the client's address to X-Forwarded-For (what a client wrote stands to its left): the
    # replicas name this proxy in ATTENTION_LAB_TRUSTED_PROXIES and count the entry it appended.
    option forwardfor

frontend lab
    bind 127.0.0.1:{port}
    default_backend replicas

backend replicas
    balance roundrobin
    cookie {cookie} insert indirect nocache httponly
    option httpchk
    http-check send meth GET uri /_stcore/health
    http-check expect status 200
{servers}
"""


@dataclass
class Cluster:
    """Running replicas and the balancer in front of them."""

    url: str  # the balancer: http://127.0.0.1:port
    folder: Path  # config and run logs
    replicas: dict[str, subprocess.Popen] = field(default_factory=dict)  # cookie value -> process
    balancer: subprocess.Popen | None = None
    redis: RedisServer | None = None  # the class poll's shared store

    def run_log(self, name: str) -> Path:
        return self.folder / f"runs-{name}.jsonl"

    def runs(self) -> dict[str, list[dict]]:
        """Every finished run each replica logged: replica name -> records (session, page, seed)."""
        logs = {}
        for name in self.replicas:
            path = self.run_log(name)
            lines = path.read_text().splitlines() if path.exists() else []
            logs[name] = [json.loads(line) for line in lines if line.strip()]
        return logs

    def kill(self, name: str) -> None:
        """Kill one replica outright (SIGKILL), as a crashed container goes."""
        self.replicas[name].kill()
        self.replicas[name].wait(timeout=30)

    def stop(self) -> None:
        for process in [self.balancer, *self.replicas.values()]:
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
        if self.redis is not None:
            self.redis.__exit__()


def haproxy_config(port: int, backends: dict[str, int]) -> str:
    servers = "\n".join(
        f"    server {name} 127.0.0.1:{backend} check inter 2s fall 3 rise 2 cookie {name}"
        for name, backend in backends.items()
    )
    return HAPROXY_CONFIG.format(port=port, cookie=COOKIE, servers=servers)


def start(
    replicas: int = 2, port: int | None = None, folder: Path | None = None, timeout_s: float = 120, redis: bool = True
) -> Cluster:
    """Start `replicas` app processes and HAProxy in front of them; returns once the balancer answers.

    `redis`: also start a redis-server the replicas share for the class poll (where it is installed).
    """
    folder = Path(folder or tempfile.mkdtemp(prefix="attention-lab-replicas-"))
    folder.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(url="", folder=folder)
    try:
        # The replicas believe the X-Forwarded-For entry of this balancer only (it connects from loopback).
        shared: dict[str, str] = {TRUSTED_PROXIES_VARIABLE: "127.0.0.1,::1"}
        if redis and redis_available():
            cluster.redis = RedisServer(folder=folder / "redis").start()
            shared[REDIS_URL_VARIABLE] = cluster.redis.url
        backends = {}
        for index in range(replicas):
            name = f"r{index}"
            env = {**shared, **run_log.server_env(cluster.run_log(name))}
            process, url = start_server(timeout_s, env=env)
            cluster.replicas[name] = process
            # Its first run imports torch and holds the GIL for seconds: done before it takes students,
            # so that no health check times out then (a warm-up session, not in the run log's count).
            asyncio.run(load_client.warm_up(url))
            backends[name] = int(url.rsplit(":", 1)[1])
        port = port or free_port()
        config = folder / "haproxy.cfg"
        config.write_text(haproxy_config(port, backends))
        check = subprocess.run([HAPROXY, "-c", "-q", "-f", str(config)], capture_output=True, text=True)
        if check.returncode != 0:
            raise RuntimeError(f"haproxy rejected {config}: {check.stdout}{check.stderr}")
        cluster.balancer = subprocess.Popen(
            [HAPROXY, "-db", "-f", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        cluster.url = f"http://127.0.0.1:{port}"
        wait_until_up(cluster.url, timeout_s)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def wait_until_up(url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"the balancer at {url} did not answer")


@dataclass(frozen=True)
class ReplicaRun:
    """A class through the balancer with one replica killed mid-run, checked from both sides."""

    result: load_client.ClassResult
    killed: str
    students_per_replica: dict[str, int]  # students each replica ran (the survivor's count includes the moved)
    sessions_on_two_replicas: tuple[str, ...]  # session ids that more than one replica logged
    cookie_disagrees: tuple[str, ...]  # sessions whose cookie named another replica than the one that ran them
    lost_students: tuple[int, ...]  # students whose connection dropped
    killed_students: tuple[int, ...]  # students whose first session ran on the killed replica
    recovered_students: tuple[int, ...]  # killed_students with a later finished run on a surviving replica
    foreign_seeds: tuple[str, ...]  # a replica ran a session with a seed outside its student's range

    def summary(self) -> dict:
        return {
            **self.result.summary(),
            "killed": self.killed,
            "students_per_replica": self.students_per_replica,
            "sessions_on_two_replicas": len(self.sessions_on_two_replicas),
            "cookie_disagrees": len(self.cookie_disagrees),
            "lost_students": list(self.lost_students),
            "killed_students": list(self.killed_students),
            "recovered_students": list(self.recovered_students),
            "foreign_seeds": len(self.foreign_seeds),
        }


def run(replicas: int = 2, students: int = 6, seconds: float = 30.0, kill_after_s: float = 12.0) -> ReplicaRun:
    """Send `students` through `replicas` replicas for `seconds`; kill replica r0 after `kill_after_s`."""
    cluster = start(replicas)
    killed = "r0"
    try:

        async def kill_later(_recorder) -> None:
            async def later() -> None:
                await asyncio.sleep(kill_after_s)
                cluster.kill(killed)

            asyncio.get_running_loop().create_task(later())

        result = asyncio.run(
            load_client.run_class(cluster.url, students, seconds, arrival_s=2.0, on_started=kill_later)
        )
        return judge(result, cluster.runs(), killed)
    finally:
        cluster.stop()


def judge(result: load_client.ClassResult, runs: dict[str, list[dict]], killed: str) -> ReplicaRun:
    """Compare what the students saw (sessions, cookies) with what each replica logged."""
    replicas_of: dict[str, set[str]] = defaultdict(set)  # session id -> replicas that ran it
    for name, records in runs.items():
        for record in records:
            replicas_of[record["session"]].add(name)
    student_of = {s.session_id: s.student for s in result.sessions}
    first_replica: dict[int, str] = {}
    for session in result.sessions:  # in order of first finished run
        if session.student not in first_replica and replicas_of.get(session.session_id):
            first_replica[session.student] = min(replicas_of[session.session_id])
    killed_students = sorted(s for s, name in first_replica.items() if name == killed)
    recovered = sorted(
        s
        for s in killed_students
        if any(
            student_of.get(record["session"]) == s
            for name, records in runs.items()
            if name != killed
            for record in records
        )
    )
    foreign = tuple(
        f"{name}: session of student {student_of[record['session']]} ran seed {record['seed']}"
        for name, records in runs.items()
        for record in records
        if record["session"] in student_of
        and record["seed"] // load_client.SEEDS_PER_STUDENT - 1 != student_of[record["session"]]
    )
    per_replica = {
        name: len({student_of[r["session"]] for r in records if r["session"] in student_of})
        for name, records in runs.items()
    }
    return ReplicaRun(
        result=result,
        killed=killed,
        students_per_replica=per_replica,
        sessions_on_two_replicas=tuple(s for s, names in replicas_of.items() if len(names) > 1),
        cookie_disagrees=tuple(
            s.session_id
            for s in result.sessions
            if s.replica and replicas_of.get(s.session_id, {s.replica}) != {s.replica}
        ),
        lost_students=tuple(sorted({int(e.split()[1]) for e in result.errors})),
        killed_students=tuple(killed_students),
        recovered_students=tuple(recovered),
        foreign_seeds=foreign,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--port", type=int, default=None, help="the balancer's port (default: a free one)")
    parser.add_argument("--class", dest="students", type=int, default=0, help="simulate a class of this size")
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    if args.students:
        print(json.dumps(run(args.replicas, args.students, args.seconds).summary(), indent=2))
        return
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # `kill` stops the replicas and HAProxy too
    cluster = start(args.replicas, args.port)
    print(f"{args.replicas} replicas behind {cluster.url} (config and run logs in {cluster.folder}); Ctrl-C stops")
    try:
        while all(p.poll() is None for p in [cluster.balancer, *cluster.replicas.values()]):
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
