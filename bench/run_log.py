"""The server's run log for the load benchmarks: one JSON line per finished script run.

The app calls a hook after each finished run only when ATTENTION_LAB_AFTER_RUN names one
(ui/frame.py `after_run`); `server_env` names `record`, which appends
{"session", "page", "seed", "seconds"} to the file ATTENTION_LAB_RUN_LOG, so a load test can
check what the server computed for each session, not only what 40 tabs have painted.
Interrupted runs never get here.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from pathlib import Path

from streamlit.runtime.scriptrunner import get_script_run_ctx

from core.app.settings import Settings

PATH_VARIABLE = "ATTENTION_LAB_RUN_LOG"


def server_env(path: Path) -> dict[str, str]:
    """The environment that makes a server (bench.harness.start_server's env) write its run log to `path`."""
    return {"ATTENTION_LAB_AFTER_RUN": f"{__name__}:record", PATH_VARIABLE: str(path)}


@functools.cache
def _logger(path: str) -> logging.Logger:
    """One logger per process and file (its handler's lock keeps lines from many sessions whole)."""
    logger = logging.getLogger(f"attention_lab.runs.{path}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(logging.FileHandler(path, encoding="utf-8"))
    return logger


def record(page: str, shown: Settings, seconds: float) -> None:
    """The hook: one line for a finished run of `page` with the settings it showed."""
    ctx = get_script_run_ctx()
    line = {"session": ctx.session_id if ctx else None, "page": page, "seed": shown.seed, "seconds": seconds}
    _logger(os.environ[PATH_VARIABLE]).info(json.dumps(line))
