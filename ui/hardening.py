"""One client must not reset everyone: Streamlit's "clear cache" message, made per-session."""

from __future__ import annotations

import logging

from streamlit.runtime.app_session import AppSession

LOGGER = logging.getLogger("attention_lab")


def keep_shared_caches() -> None:
    """Make a client's "clear cache" message clear only that client's own session state.

    Any websocket client can send Streamlit's clear_cache BackMsg (the browser's menu item is
    hidden by client.toolbarMode = "viewer", the message is not), and Streamlit then empties
    st.cache_data and st.cache_resource for every session in the process: one student, or a
    script, resets the whole class's caches. No configuration option turns it off (Streamlit
    1.67), so the handler is replaced, once per process. bench/hostile_probe.py measures it on
    a real server; tests/deployment/test_public_link.py checks the patch is in place.
    """
    if getattr(AppSession._handle_clear_cache_request, "_attention_lab", False):
        return

    def clear_own_session_state_only(session: AppSession) -> None:
        LOGGER.warning("A client asked to clear every cache; only its own session state was cleared.")
        session._session_state.clear()

    clear_own_session_state_only._attention_lab = True  # type: ignore[attr-defined]
    AppSession._handle_clear_cache_request = clear_own_session_state_only  # type: ignore[method-assign]
