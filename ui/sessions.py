"""Which browser sessions are still connected: what the training queues and the GPT's generation ask before
spending the server's time on a student who has left (closed the tab, lost the connection)."""

from __future__ import annotations

from collections.abc import Callable

from streamlit import runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

NO_SESSION = "no session"  # outside a server run (a bare script, some tests)


def session_id() -> str:
    """This run's session id (NO_SESSION outside a server's run)."""
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else NO_SESSION


def session_alive(session: str) -> bool:
    """False once the session's websocket is gone; always True without a server (AppTest)."""
    try:
        return bool(runtime.get_instance().is_active_session(session))
    except RuntimeError:
        return True


def still_here() -> Callable[[], bool]:
    """For work done on this session's behalf: a check that says False once the student has left."""
    session = session_id()
    return lambda: session_alive(session)
