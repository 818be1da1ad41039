"""What a client sends that Streamlit would act on for everyone, or show as its raw error box.

One client must not reset everyone (Streamlit's "clear cache" message, made per-session), and
a forged control value becomes a note on the page (`drop_unreadable_widget_values`).
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Mapping

import streamlit as st
from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.runtime.app_session import AppSession
from streamlit.runtime.state.common import WidgetMetadata, user_key_from_element_id
from streamlit.runtime.state.session_state import Serialized, SessionState

from core.app.markup import code_span

LOGGER = logging.getLogger("attention_lab")


# What a session keeps through its own "clear cache" message: its class-poll identity (the
# anonymous student id, the teacher's room, the room it follows). Without it each clear_cache gave
# a session a new student id, and so one more answer (issue 31: 20 clears, 20 answers), and
# a teacher a second room.
KEPT_ON_CLEAR = ("class_poll_student", "class_poll_room", "class_poll_following", "class_poll_sent")


def client_address() -> str:
    """The network address the store's per-address bounds count by ("" when none is known).

    The peer's address, or, when the peer is a proxy on this machine or a private network (a load
    balancer), the last X-Forwarded-For entry: the one that proxy appended, which a client cannot forge.
    A class behind one NAT shares one address; the store's bounds are set for that.
    """
    try:
        peer = st.context.ip_address or ""  # None on loopback
        headers: Mapping[str, str] = st.context.headers or {}
        forwarded = headers.get("X-Forwarded-For", "")
    except Exception:  # no client context (AppTest): every session counts as one address
        return ""
    try:
        behind_proxy = not peer or ipaddress.ip_address(peer).is_private
    except ValueError:
        behind_proxy = False
    if forwarded and behind_proxy:
        return forwarded.split(",")[-1].strip()[:64]
    return peer[:64]


def keep_shared_caches() -> None:
    """Make a client's "clear cache" message clear only that client's own session state.

    Any websocket client can send Streamlit's clear_cache BackMsg (the browser's menu item is
    hidden by client.toolbarMode = "viewer", the message is not), and Streamlit then empties
    st.cache_data and st.cache_resource for every session in the process: one student, or a
    script, resets the whole class's caches. No configuration option turns it off (Streamlit
    1.67), so the handler is replaced, once per process; it keeps the keys in KEPT_ON_CLEAR.
    loadtest/hostile_probe.py measures it on a real server; tests/deployment/test_public_link.py
    checks the patch is in place.
    """
    if getattr(AppSession._handle_clear_cache_request, "_attention_lab", False):
        return

    def clear_own_session_state_only(self: AppSession) -> None:  # `self`, as the method it replaces names it
        LOGGER.warning("A client asked to clear every cache; only its own session state was cleared.")
        state = self._session_state
        kept = {key: state[key] for key in KEPT_ON_CLEAR if key in state}
        state.clear()
        for key, value in kept.items():  # read by the next run like any value set before it
            state._new_session_state[key] = value

    clear_own_session_state_only._attention_lab = True  # type: ignore[attr-defined]
    AppSession._handle_clear_cache_request = clear_own_session_state_only  # type: ignore[method-assign]


_UNREADABLE_KEY = "al_unreadable_controls"
_NUMBER_FIELDS = frozenset({"int_value", "double_value"})  # keys of controls whose forged value was dropped this run


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
        widgets = self._new_widget_state
        for widget_id in list(widgets):
            try:
                sent = widgets.states.get(widget_id)
                if isinstance(sent, Serialized) and not sent_as_registered(
                    sent.value, widgets.widget_metadata.get(widget_id)
                ):
                    raise ValueError("a value of another type, or an option the control does not have")
                widgets[widget_id]  # reading deserialises it
            except Exception:  # whatever a widget's deserializer raises on a value it never sends
                del self._new_widget_state[widget_id]
                dropped.append(user_key_from_element_id(widget_id) or "a control")
        if dropped:
            LOGGER.warning("Dropped unreadable values of %s.", dropped)
            self._new_session_state[_UNREADABLE_KEY] = tuple(dropped)
        original(self, **kwargs)

    call_callbacks_on_readable_values._attention_lab = True  # type: ignore[attr-defined]
    SessionState._call_callbacks = call_callbacks_on_readable_values  # type: ignore[method-assign]


def sent_as_registered(sent: WidgetState, metadata: WidgetMetadata | None) -> bool:
    """Whether a value a client sent is of the kind its control sends: the same protobuf field as the
    control registered, and for a choice box (selectbox, radio) one of its options.

    Why before the run: Streamlit deserialises a value by whichever field the message set, and
    re-serialises it by that field when the widget registers; a number sent for a selectbox reads
    fine and then fails inside st.selectbox (TypeError), and a label that is no option reaches the
    app's callbacks as a bare string (PRESETS["nope"]). Unknown controls (no metadata yet: a first
    run, or a reconnecting browser) and empty values (a cleared box) pass; Streamlit ignores or resets
    them itself.
    """
    field = sent.WhichOneof("value")
    if metadata is None or field is None:
        return True
    # A number box registers "double_value", and the browser sends an integer box's value as "int_value"
    # (Streamlit reads either): both are numbers, and the box's deserializer judges the number itself.
    if {field, metadata.value_type} <= _NUMBER_FIELDS:
        return True
    if field != metadata.value_type:
        return False
    options = getattr(getattr(metadata.deserializer, "__self__", None), "formatted_option_to_option_index", None)
    if field == "string_value" and isinstance(options, dict):  # the app's choice boxes take no new options
        return sent.string_value in options
    return True


def unreadable_values_note() -> None:
    """The note for values `drop_unreadable_widget_values` dropped before this run (then forgotten)."""
    dropped = st.session_state.pop(_UNREADABLE_KEY, ())
    if dropped:
        names = ", ".join(code_span(str(name), 40) for name in dropped[:5])
        st.warning(
            f"A control sent a value the app cannot read ({names}); it keeps its previous value.",
            icon=":material/link_off:",
        )
