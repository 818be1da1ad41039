"""Which network address a visitor counts as, for the per-address bounds (class poll, trainer share).

A forwarded address (X-Forwarded-For) is believed only when the connection comes from a proxy the
deployment names in ATTENTION_LAB_TRUSTED_PROXIES (addresses or networks, comma-separated), and then only
the entry that the deployment's proxies appended: the last one, or with ATTENTION_LAB_PROXY_HOPS=N (a chain
of N proxies, such as a CDN before the ingress) the N-th from the end. Anything a client writes into the
header stands to the left of that, and is never read (issue 40, item 4: one client made 500 rooms in
118 s by writing a new address into each request). Counting hops, not skipping named addresses, keeps a
client on the proxy's own host (loopback) from being mistaken for one more proxy.

Streamlit 1.67 serves through uvicorn, whose proxy-header middleware replaces the peer by an
X-Forwarded-For entry when the peer is one of *its* trusted hosts (FORWARDED_ALLOW_IPS, loopback by
default), so `st.context.ip_address` alone is forgeable from loopback: the app reads the connection's
own peer (ui/hardening.py), and `peer_from_report` undoes uvicorn's rewrite where that is not at hand.

When no named proxy stands in front and the peer is this machine (loopback: a local server, or a host
whose proxy nobody here configures, such as Community Cloud, where every visitor arrives from one
address), the address says nothing about who the visitor is: `visitor_address` returns None and the
caller counts per session instead, so the bounds never refuse a thirteenth real teacher because others
share the host's proxy.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

LOGGER = logging.getLogger("attention_lab")

TRUSTED_PROXIES_VARIABLE = "ATTENTION_LAB_TRUSTED_PROXIES"
PROXY_HOPS_VARIABLE = "ATTENTION_LAB_PROXY_HOPS"
MAX_HOPS = 8
UVICORN_TRUSTED_VARIABLE = "FORWARDED_ALLOW_IPS"  # uvicorn's own setting; Streamlit passes none
UVICORN_DEFAULT = "127.0.0.1,::1"
MAX_ENTRIES = 32  # forwarded entries read per request; a longer chain is a forged one
MAX_ADDRESS = 64  # the store keeps addresses this long at most

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Proxies:
    """A set of proxy addresses: networks, or every address (uvicorn's "*")."""

    networks: tuple[Network, ...] = ()
    everyone: bool = False

    def __contains__(self, host: object) -> bool:
        if self.everyone:
            return True
        address = _ip(host)
        return address is not None and any(address in network for network in self.networks)

    def covers(self, other: Proxies) -> bool:
        """Whether every address of `other` is one of these (so a peer known only to be in `other` is)."""
        if self.everyone:
            return True
        if other.everyone:
            return False
        return bool(other.networks) and all(
            any(network.subnet_of(mine) for mine in self.networks if mine.version == network.version)  # type: ignore[arg-type]
            for network in other.networks
        )


def proxies_from(text: str | None, setting: str = TRUSTED_PROXIES_VARIABLE) -> Proxies:
    """Parse a comma-separated list of addresses and networks; "*" is every address. Entries that are
    neither are logged and skipped (a typo must not make the app trust a whole header)."""
    networks: list[Network] = []
    for entry in (text or "").split(","):
        entry = entry.strip()
        if entry == "*":
            return Proxies(everyone=True)
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            LOGGER.warning("%s: %r is not an address or a network; ignored.", setting, entry[:64])
    return Proxies(tuple(networks))


def named_proxies() -> Proxies:
    """The proxies this deployment names (ATTENTION_LAB_TRUSTED_PROXIES); none by default."""
    return proxies_from(os.environ.get(TRUSTED_PROXIES_VARIABLE))


def proxy_hops() -> int:
    """How many proxies of the deployment's own stand in a row before the app (ATTENTION_LAB_PROXY_HOPS, 1)."""
    text = os.environ.get(PROXY_HOPS_VARIABLE, "1").strip()
    if not text.isdigit() or not 1 <= int(text) <= MAX_HOPS:
        LOGGER.warning("%s: %r is not a number from 1 to %d; 1 is used.", PROXY_HOPS_VARIABLE, text[:16], MAX_HOPS)
        return 1
    return int(text)


def uvicorn_proxies() -> Proxies:
    """The hosts whose X-Forwarded-For uvicorn itself believes (its FORWARDED_ALLOW_IPS, loopback by default)."""
    return proxies_from(os.environ.get(UVICORN_TRUSTED_VARIABLE, UVICORN_DEFAULT), UVICORN_TRUSTED_VARIABLE)


def visitor_address(peer: str | None, forwarded_for: Iterable[str], named: Proxies, hops: int = 1) -> str | None:
    """The address one visitor counts as, or None when the connection says nothing about the visitor.

    peer: the connection's own address (the TCP peer; None when unknown).
    forwarded_for: every X-Forwarded-For header of the request, in order.
    named: the proxies the deployment trusts; hops: how many of them append an entry in a row.
    """
    if peer is None:
        return None
    peer = _canonical(peer)
    if peer in named:
        return _appended(_forwarded_hosts(forwarded_for), hops) or peer[:MAX_ADDRESS]
    if _is_loopback(peer):
        return None  # this machine: a local server, or a proxy on it that nobody named
    return peer[:MAX_ADDRESS]


def peer_from_report(
    reported: str | None, forwarded_for: Iterable[str], named: Proxies, rewriting: Proxies
) -> str | None:
    """The TCP peer, when only Streamlit's report of it is at hand (`st.context.ip_address`: None on
    loopback, and the header's entry when uvicorn believed a loopback peer's header).

    When the report is the entry uvicorn would have picked, the peer was one of uvicorn's own hosts: it is
    given as a named one if every such host is named, and as loopback otherwise. A direct client that writes
    its own address last is then read as loopback (counted per session): without the real peer, no
    rule tells the two apart.
    """
    hosts = _forwarded_hosts(forwarded_for)
    if reported is None:
        return "127.0.0.1"
    if hosts and _uvicorn_pick(hosts, rewriting) == _canonical(reported):
        uvicorn_host = next((str(network.network_address) for network in rewriting.networks), "127.0.0.1")
        return uvicorn_host if named.covers(rewriting) else "127.0.0.1"
    return reported


def _appended(hosts: Sequence[str], hops: int) -> str | None:
    """The entry the deployment's outermost proxy appended: the hops-th from the end (the first, if fewer)."""
    if not hosts:
        return None
    return hosts[max(len(hosts) - hops, 0)][:MAX_ADDRESS]


def _uvicorn_pick(hosts: Sequence[str], rewriting: Proxies) -> str:
    """The entry uvicorn's proxy-header middleware puts in place of a trusted peer."""
    if rewriting.everyone:
        return hosts[0]
    for host in reversed(hosts):
        if host not in rewriting:
            return host
    return hosts[0]


def _forwarded_hosts(headers: Iterable[str]) -> list[str]:
    entries = [entry for header in headers for entry in str(header).split(",")]
    return [_canonical(_strip_port(entry.strip())) for entry in entries[-MAX_ENTRIES:] if entry.strip()]


def _strip_port(entry: str) -> str:
    """'[::1]:80' -> '::1', '1.2.3.4:80' -> '1.2.3.4'; anything else as it is."""
    if entry.startswith("[") and "]" in entry:
        return entry[1 : entry.index("]")]
    if entry.count(":") == 1:
        return entry.split(":", 1)[0]
    return entry


def _canonical(host: str) -> str:
    address = _ip(host)
    return str(address) if address is not None else host


def _is_loopback(host: str) -> bool:
    address = _ip(host)
    return address is not None and address.is_loopback


def _ip(host: object) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address, with an IPv4 address written as IPv6 (::ffff:127.0.0.1, as a dual-stack server
    reports an IPv4 peer) read as the IPv4 address it is."""
    try:
        address = ipaddress.ip_address(str(host))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address
