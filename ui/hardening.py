"""What a client sends that Streamlit would act on for everyone, or show as its raw error box.

One client must not reset everyone (Streamlit's "clear cache" message, made per-session), and
a forged control value becomes a note on the page (`drop_unreadable_widget_values`).
"""

from __future__ import annotations

import logging

import streamlit as st
from streamlit.runtime.app_session import AppSession
from streamlit.runtime.state.common import user_key_from_element_id
from streamlit.runtime.state.session_state import SessionState

from core.app.markup import code_span

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

    def clear_own_session_state_only(self: AppSession) -> None:  # `self`, as the method it replaces names it
        LOGGER.warning("A client asked to clear every cache; only its own session state was cleared.")
        self._session_state.clear()

    clear_own_session_state_only._attention_lab = True  # type: ignore[attr-defined]
    AppSession._handle_clear_cache_request = clear_own_session_state_only  # type: ignore[method-assign]


_UNREADABLE_KEY = "al_unreadable_controls"  # keys of controls whose forged value was dropped this run


def drop_unreadable_widget_values() -> None:
    """Make a control value that Streamlit cannot read a note on the page, not its raw error box.

    A browser sends each widget's value, and Streamlit reads (deserialises) every changed value
    before the script runs, outside any error handler of ours: a forged message, such as an
    integer box holding inf or NaN (int() raises) or a chart selection that is not JSON, stops
    the run with Streamlit's error box. The check runs just before Streamlit's callbacks, once
    per process: a value that cannot be read is dropped (the control keeps its previous value)
    and its key is kept for `unreadable_values_note`. tests/app/test_forged_messages.py sends them.
    """
    original = SessionState._call_callbacks
    if getattr(original, "_attention_lab", False):
        return

    def call_callbacks_on_readable_values(self: SessionState, **kwargs) -> None:
        dropped = []
        for widget_id in list(self._new_widget_state):
            try:
                self._new_widget_state[widget_id]  # reading deserialises it
            except Exception:  # whatever a widget's deserializer raises on a value it never sends
                del self._new_widget_state[widget_id]
                dropped.append(user_key_from_element_id(widget_id) or "a control")
        if dropped:
            LOGGER.warning("Dropped unreadable values of %s.", dropped)
            self._new_session_state[_UNREADABLE_KEY] = tuple(dropped)
        original(self, **kwargs)

    call_callbacks_on_readable_values._attention_lab = True  # type: ignore[attr-defined]
    SessionState._call_callbacks = call_callbacks_on_readable_values  # type: ignore[method-assign]


def unreadable_values_note() -> None:
    """The note for values `drop_unreadable_widget_values` dropped before this run (then forgotten)."""
    dropped = st.session_state.pop(_UNREADABLE_KEY, ())
    if dropped:
        names = ", ".join(code_span(str(name), 40) for name in dropped[:5])
        st.warning(
            f"A control sent a value the app cannot read ({names}); it keeps its previous value.",
            icon=":material/link_off:",
        )
