"""How a link's ignored value is reported on screen: one warning, the value shown as inert code."""

from __future__ import annotations

import streamlit as st

from core.app.markup import code_span

LINK_OFF = ":material/link_off:"


def link_warning(parameter: str, value: str, reason: str) -> None:
    """The one way a link's ignored value is reported: the value as inert code, and why."""
    st.warning(f"{code_span(parameter + '=' + value)} {reason}; ignored.", icon=LINK_OFF)
