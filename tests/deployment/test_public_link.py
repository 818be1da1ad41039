"""One client must not reset or take over everyone (issue 10, items 4 and 5): the server
configuration and the guard on Streamlit's "clear cache" message."""

from __future__ import annotations

import tomllib
from pathlib import Path
from types import SimpleNamespace

import streamlit as st
from streamlit.byte_util import config_max_cache_data_size_to_bytes
from streamlit.runtime.app_session import AppSession
from streamlit.runtime.state.session_state import SessionState

from ui import cache, hardening

CONFIG = tomllib.loads((Path(__file__).resolve().parents[2] / ".streamlit" / "config.toml").read_text())


def test_the_server_bounds_what_one_client_can_fill_or_send() -> None:
    server = CONFIG["server"]
    assert config_max_cache_data_size_to_bytes(server["maxCacheDataSize"]) <= cache.CACHE_BUDGET_MIB * 2**20
    assert server["maxWidgetStateSize"] <= 1  # MB per rerun; our widgets send < 1 KB
    assert CONFIG["client"]["toolbarMode"] == "viewer"  # no "Clear cache" item in the menu
    assert CONFIG["client"]["showErrorDetails"] == "none"


COMPUTED: list[int] = []


@st.cache_data(max_entries=4, ttl=60)
def _square(x: int) -> int:
    COMPUTED.append(x)
    return x * x


def test_a_clients_clear_cache_message_keeps_everyones_caches() -> None:
    """Before the guard, the handler emptied st.cache_data and st.cache_resource for all sessions."""
    hardening.keep_shared_caches()
    assert _square(3) == 9
    state = SessionState()
    state._new_session_state.update({"preset": "article", "class_poll_student": "abc"})
    AppSession._handle_clear_cache_request(SimpleNamespace(_session_state=state))  # a clear_cache BackMsg
    assert "preset" not in state  # the client's own session state goes, as before ...
    assert state["class_poll_student"] == "abc"  # ... but its poll identity stays (issue 31: one answer each)
    assert _square(3) == 9
    assert COMPUTED.count(3) == 1  # still cached for everyone: not recomputed
    hardening.keep_shared_caches()  # idempotent
    assert AppSession._handle_clear_cache_request.__name__ == "clear_own_session_state_only"


def test_a_websocket_clients_clear_cache_leaves_the_caches_on_a_real_server() -> None:
    """End to end: `streamlit run`, one session fills a cache, another sends clear_cache."""
    from loadtest import hostile_probe

    result = hostile_probe.probe_clear_cache()
    # The largest trainable lesson is cached: about 0.43 MB of st.cache_data since matrix_frame keeps its
    # labels categorical (about 1 MB before).
    assert result["cache_bytes_before"] > 300_000, result
    assert result["cache_survived"], result


def test_a_very_long_link_is_not_amplified_on_a_real_server() -> None:
    """Issue 31: 10 kB in each of 45 parameters made the server send ~22 times the link per run
    (each ignored parameter's removal re-sent the whole remaining query string)."""
    from loadtest import hostile_probe

    result = hostile_probe.probe_amplification(parameters=45, chars=10_000)
    assert result["clean"], result
    assert result["amplification"] <= 3, result
