"""Which address a visitor counts as (issue 40, item 4): a forged X-Forwarded-For never makes a new one."""

from __future__ import annotations

import pytest

from services.client_addresses import Proxies, peer_from_report, proxies_from, visitor_address

NONE = Proxies()
LOOPBACK = proxies_from("127.0.0.1,::1")
UVICORN = LOOPBACK  # uvicorn's default FORWARDED_ALLOW_IPS
LAN_PROXY = proxies_from("192.168.1.2")


@pytest.mark.parametrize(
    ("peer", "header", "named", "expected"),
    [
        # Direct from the internet or a LAN: the peer, whatever the header says.
        ("203.0.113.9", [], NONE, "203.0.113.9"),
        ("203.0.113.9", ["198.51.100.1"], NONE, "203.0.113.9"),
        ("203.0.113.9", ["198.51.100.1, 203.0.113.9"], NONE, "203.0.113.9"),
        ("192.168.1.50", ["10.9.9.9"], NONE, "192.168.1.50"),
        ("192.168.1.50", ["10.9.9.9"], LOOPBACK, "192.168.1.50"),
        # On this machine with no proxy named (a local server, Community Cloud's proxy): per session.
        ("127.0.0.1", [], NONE, None),
        ("::ffff:127.0.0.1", ["198.51.100.1"], NONE, None),  # a dual-stack server's IPv4 loopback
        ("::1", ["198.51.100.1"], NONE, None),
        (None, ["198.51.100.1"], LOOPBACK, None),
        # HAProxy on this machine, named: the entry it appended, never one the client wrote.
        ("127.0.0.1", ["203.0.113.9"], LOOPBACK, "203.0.113.9"),
        ("::ffff:127.0.0.1", ["198.51.100.1, 203.0.113.9"], LOOPBACK, "203.0.113.9"),
        ("127.0.0.1", ["198.51.100.1, 127.0.0.1"], LOOPBACK, "127.0.0.1"),  # a client on the proxy's host
        ("127.0.0.1", ["198.51.100.1", "127.0.0.1"], LOOPBACK, "127.0.0.1"),  # two headers
        ("127.0.0.1", [], LOOPBACK, "127.0.0.1"),
        # A proxy on the LAN, named: the entry it appended.
        ("192.168.1.2", ["198.51.100.1, 192.168.1.50"], LAN_PROXY, "192.168.1.50"),
        ("192.168.1.2", [], LAN_PROXY, "192.168.1.2"),
        # Ports and IPv6 as proxies write them.
        ("::1", ["[2001:db8::5]:4431"], LOOPBACK, "2001:db8::5"),
        ("127.0.0.1", ["203.0.113.9:5555"], LOOPBACK, "203.0.113.9"),
    ],
)
def test_the_address_a_visitor_counts_as(peer, header, named, expected) -> None:
    assert visitor_address(peer, header, named) == expected


def test_a_chain_of_proxies_reads_the_entry_its_outermost_proxy_appended() -> None:
    header = ["198.51.100.1, 203.0.113.9, 10.0.0.7"]  # forged, the client (seen by the CDN), the CDN
    named = proxies_from("10.0.0.0/8")
    assert visitor_address("10.0.0.3", header, named, hops=2) == "203.0.113.9"
    assert visitor_address("10.0.0.3", header, named, hops=1) == "10.0.0.7"


def test_a_forger_writing_a_new_address_each_time_stays_one_address() -> None:
    addresses = {visitor_address("127.0.0.1", [f"198.51.100.{i}, 127.0.0.1"], LOOPBACK) for i in range(1, 200)}
    assert addresses == {"127.0.0.1"}


def test_a_long_forged_chain_is_read_in_bounded_size() -> None:
    header = [", ".join(f"10.{i // 250}.{i % 250}.1" for i in range(5000)) + ", 203.0.113.9"]
    assert visitor_address("127.0.0.1", header, LOOPBACK) == "203.0.113.9"


@pytest.mark.parametrize(
    ("reported", "header", "named", "peer"),
    [
        (None, [], NONE, "127.0.0.1"),  # Streamlit reports loopback as None
        ("203.0.113.9", [], NONE, "203.0.113.9"),
        ("203.0.113.9", ["198.51.100.1"], NONE, "203.0.113.9"),  # not uvicorn's pick: the real peer
        ("198.51.100.1", ["198.51.100.1"], NONE, "127.0.0.1"),  # uvicorn's pick: a loopback peer's header
        ("203.0.113.9", ["198.51.100.1, 203.0.113.9"], LOOPBACK, "127.0.0.1"),  # ... believed: named loopback
    ],
)
def test_the_peer_from_streamlits_report_undoes_uvicorns_rewrite(reported, header, named, peer) -> None:
    assert peer_from_report(reported, header, named, UVICORN) == peer


def test_a_forged_entry_that_uvicorn_believed_is_not_an_address() -> None:
    # Without the real peer, a loopback client's forged header reached Streamlit as its address.
    peer = peer_from_report("198.51.100.1", ["198.51.100.1"], NONE, UVICORN)
    assert visitor_address(peer, ["198.51.100.1"], NONE) is None


@pytest.mark.parametrize("text", ["", "banana", "10.0.0.0/33", " , ", "<script>"])
def test_a_setting_that_names_no_proxy_trusts_no_header(text: str) -> None:
    named = proxies_from(text)
    assert named == Proxies()
    assert visitor_address("203.0.113.9", ["198.51.100.1"], named) == "203.0.113.9"
    assert visitor_address("127.0.0.1", ["198.51.100.1"], named) is None


def test_garbage_in_the_header_is_never_an_error() -> None:
    for header in (["nonsense"], ["", ",,,"], ["[::1"], ["1.2.3.4:x"], ["\x00" * 100]):
        address = visitor_address("127.0.0.1", header, LOOPBACK)
        assert address is None or len(address) <= 64
