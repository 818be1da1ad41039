"""What a client sends that Streamlit would act on for everyone, or show as its raw error box.

One client must not reset everyone (Streamlit's "clear cache" message, made per-session), and
a forged control value becomes a note on the page (`drop_unreadable_widget_values`).
"""

from __future__ import annotations

import logging

import streamlit as st
from streamlit import runtime
from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.runtime.app_session import AppSession
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.state.common import WidgetMetadata, unpack_widget_state_value, user_key_from_element_id
from streamlit.runtime.state.session_state import Serialized, SessionState, WStates

from core.app.markup import code_span
from services import client_addresses

LOGGER = logging.getLogger("attention_lab")


# What a session keeps through its own "clear cache" message: its class-poll identity (the
# anonymous student id, the teacher's room, the room it follows). Without it each clear_cache gave
# a session a new student id, and so one more answer (issue 31: 20 clears, 20 answers), and
# a teacher a second room.
KEPT_ON_CLEAR = ("class_poll_student", "class_poll_room", "class_poll_following", "class_poll_sent")


def client_address() -> str:
    """What the store's per-address bounds count this visitor as ("" outside a server: AppTest).

    The visitor's own address when the connection tells it (services/client_addresses.py: a forwarded
    address only through a proxy the deployment names), else this session ("session:<id>"): on a host
    whose proxy nobody configured, every visitor shares one address, and counting by it would refuse
    the thirteenth teacher of the hour. A class behind one NAT shares one address; the bounds are set for that.
    """
    try:
        reported = st.context.ip_address  # None on loopback; uvicorn may have put a header's entry in its place
        forwarded = st.context.headers.get_all("X-Forwarded-For") if st.context.headers else []
    except Exception:  # no client context (AppTest): every session counts as one address
        return ""
    named = client_addresses.named_proxies()
    peer = _connection_peer() or client_addresses.peer_from_report(
        reported, forwarded, named, client_addresses.uvicorn_proxies()
    )
    address = client_addresses.visitor_address(peer, forwarded, named, client_addresses.proxy_hops())
    if address is not None:
        return address
    context = get_script_run_ctx()
    return f"session:{context.session_id}"[:64] if context is not None else ""


def _connection_peer() -> str | None:
    """The TCP peer of this session's websocket, as uvicorn's protocol object holds it before any header
    was applied; None where Streamlit's or uvicorn's internals differ (then `peer_from_report` is used)."""
    try:
        context = get_script_run_ctx()
        client = runtime.get_instance().get_client(context.session_id) if context else None
        receive = getattr(getattr(client, "_websocket", None), "_receive", None)
        peer = getattr(getattr(receive, "__self__", None), "client", None)  # (host, port)
        host = peer[0] if isinstance(peer, tuple) and peer and isinstance(peer[0], str) else None
    except Exception:  # no runtime (AppTest), or internals of another shape
        return None
    return host


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


_UNREADABLE_KEY = "al_unreadable_controls"  # keys of controls whose forged value was dropped this run
_LATE_KEY = "al_unreadable_late"  # the same, for values dropped when their control registered (after the title)
_NUMBER_FIELDS = frozenset({"int_value", "double_value"})
# Value fields whose deserializer consumes what it reads (uploads, chat): never read twice.
_READ_ONCE_FIELDS = frozenset({"file_uploader_state_value", "chat_input_value"})


def drop_unreadable_widget_values() -> None:
    """Make a control value that Streamlit cannot read a note on the page, not its raw error box.

    A browser sends each widget's value, and Streamlit reads (deserialises) every changed value: a
    forged message, such as an integer box holding inf or NaN (int() raises) or a chart selection
    that is not JSON, stops the run with Streamlit's error box. Each value is judged by what its
    control accepts, with that control's own registration (metadata), at two moments, once per process:

    - before Streamlit's callbacks, for controls the previous run registered: a callback must never
      see a forged value (a preset box's callback reads PRESETS[value]);
    - when a control registers, for a value sent before its control was known (a first run, a page
      switch, a reconnecting browser): such a value waits, as Streamlit's own code lets it, and is read
      by the box it was sent to, with the box's fresh registration.

    A value that cannot be read is dropped (the control keeps its previous value) and its key is kept
    for `unreadable_values_note`. tests/app/test_forged_messages.py sends them.
    """
    original_callbacks = SessionState._call_callbacks
    if getattr(original_callbacks, "_attention_lab", False):
        return
    original_register = SessionState.register_widget

    def call_callbacks_on_readable_values(self: SessionState, **kwargs) -> None:
        widgets = self._new_widget_state
        known = widgets.widget_metadata  # registered by the previous run; a value for an unknown control waits
        dropped = [wid for wid in list(widgets) if wid in known and not _readable(widgets, wid, known[wid])]
        _drop(self, dropped, _UNREADABLE_KEY)
        original_callbacks(self, **kwargs)

    def register_readable_value(self: SessionState, metadata: WidgetMetadata, user_key: str | None):
        if not _readable(self._new_widget_state, metadata.id, metadata):
            _drop(self, [metadata.id], _LATE_KEY)
        return original_register(self, metadata, user_key)

    call_callbacks_on_readable_values._attention_lab = True  # type: ignore[attr-defined]
    register_readable_value._attention_lab = True  # type: ignore[attr-defined]
    SessionState._call_callbacks = call_callbacks_on_readable_values  # type: ignore[method-assign]
    SessionState.register_widget = register_readable_value  # type: ignore[method-assign,assignment]


def _readable(widgets: WStates, widget_id: str, metadata: WidgetMetadata) -> bool:
    """Whether the value the client sent for `widget_id` (if any, not yet read) is one its control accepts:
    sent as the control sends it, and read without error by the control's own deserializer."""
    sent = widgets.states.get(widget_id)
    if not isinstance(sent, Serialized):
        return True  # nothing sent, or a value the server set itself
    if not sent_as_registered(sent.value, metadata):
        return False
    if sent.value.WhichOneof("value") in _READ_ONCE_FIELDS:
        return True
    try:
        metadata.deserializer(unpack_widget_state_value(sent.value))
    except Exception:  # whatever a widget's deserializer raises on a value it never sends
        return False
    return True


def _drop(state: SessionState, widget_ids: list[str], note_key: str) -> None:
    if not widget_ids:
        return
    for widget_id in widget_ids:
        del state._new_widget_state[widget_id]
    names = tuple(user_key_from_element_id(widget_id) or "a control" for widget_id in widget_ids)
    LOGGER.warning("Dropped unreadable values of %s.", list(names))
    earlier = state._new_session_state.get(note_key, ())
    state._new_session_state[note_key] = (*earlier, *names)


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
    options = getattr(getattr(metadata.deserializer, "__self__", None), "formatted_option_to_option_index", None)
    if isinstance(options, dict):  # a choice box sends its option labels; the app's take no new ones
        return _choice_sent_as_registered(sent, field, options, metadata.value_type)
    # Streamlit forgets a control's field (value_type None) once it has read an empty value for it, such as
    # an unanswered radio's, until the control registers again: judging by the field then dropped every
    # answer a busy class gave between a fragment's rerun and the page's (issue 40: 0 of 9 counted). The
    # control's deserializer judges those values (`_readable`).
    if metadata.value_type is None:
        return True
    # A number box registers "double_value", and the browser sends an integer box's value as "int_value"
    # (Streamlit reads either): both are numbers, and the box's deserializer judges the number itself.
    if {field, metadata.value_type} <= _NUMBER_FIELDS:
        return True
    return field == metadata.value_type


def _choice_sent_as_registered(sent: WidgetState, field: str, options: dict, value_type: str | None) -> bool:
    """A choice box's value: its own field, holding only its option labels.

    A selectbox or radio sends one label (string_value); a segmented control sends a list of labels
    (string_array_value), even for a single choice: judged as a radio's, every click on lesson 3's
    "Measure" was dropped. While Streamlit has forgotten the field (value_type None) either kind passes,
    and the box's own deserializer judges it at registration (`_readable`)."""
    if value_type is not None and field != value_type:
        return False
    if field == "string_value":
        return sent.string_value in options
    if field == "string_array_value":
        return all(label in options for label in sent.string_array_value.data)
    return False


def unreadable_values_note() -> None:
    """The note for values `drop_unreadable_widget_values` dropped before this run (then forgotten)."""
    _note(st.session_state.pop(_UNREADABLE_KEY, ()))


def late_unreadable_values_note() -> None:
    """At the end of a run: the note for values dropped as their control registered, after the title's
    note was drawn. A toast, so that it is seen wherever the page is scrolled."""
    dropped = st.session_state.pop(_LATE_KEY, ())
    if dropped:
        st.toast(_note_text(dropped), icon=":material/link_off:")


def _note(dropped: tuple[str, ...]) -> None:
    if dropped:
        st.warning(_note_text(dropped), icon=":material/link_off:")


def _note_text(dropped: tuple[str, ...]) -> str:
    names = ", ".join(code_span(str(name), 40) for name in list(dict.fromkeys(dropped))[:5])
    return f"A control sent a value the app cannot read ({names}); it keeps its previous value."
