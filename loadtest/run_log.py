"""The server's run log for the load tests: one JSON line per finished script run.

The app logs each finished run on its logger `attention_lab.runs` (ui/frame.py `after_run`):
{"session", "page", "seed", "seconds"}. `server_env` points a server's log at a file, so a load test can
check what the server computed for each session, not only what its tabs painted.
"""

from __future__ import annotations

from pathlib import Path

PATH_VARIABLE = "ATTENTION_LAB_RUN_LOG"  # read by ui/frame.py `run_log`


def server_env(path: Path) -> dict[str, str]:
    """The environment that makes a server (start_server's env) also write its run log to `path`."""
    return {PATH_VARIABLE: str(path)}
