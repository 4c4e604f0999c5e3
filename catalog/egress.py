"""Where Scout may send requests upstream (Streamable HTTP MCP servers and OpenAPI services): the allow-list check
and DNS pinning (SSRF defence). The one entry point is ``egress_check``, used by ``catalog.upstream`` (connect,
which sync, test connection and execution all go through) and ``catalog.openapi`` (document fetch, execute).

A URL passes when its host is allowed by ``SCOUT_UPSTREAM_ALLOWED_HOSTS`` (a host name, ``*.suffix``, or an IP
network in CIDR form) and every address it resolves to is either public or inside a listed network: a name on
the list that resolves to a private, loopback or link-local address is refused unless that network is listed
too. The request is then sent to the checked address (``EgressTarget.pinned_url``), so a second DNS answer
cannot move it elsewhere (DNS rebinding). ORM-free.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import anyio
from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], list[str]]


class EgressRefused(Exception):
    """The URL may not be requested; the message says why (never with a credential: URLs are shown bare)."""


@dataclass(frozen=True)
class EgressTarget:
    """A checked URL and the address to connect to."""

    url: str
    host: str
    address: IPAddress

    @property
    def pinned_url(self) -> str:
        """``url`` with its host replaced by the checked address (send ``Host`` and SNI for ``host``)."""
        parts = urlsplit(self.url)
        literal = f"[{self.address}]" if self.address.version == 6 else str(self.address)
        netloc = f"{literal}:{parts.port}" if parts.port else literal
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))

    @property
    def host_header(self) -> str:
        parts = urlsplit(self.url)
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{parts.port}" if parts.port else host


def _allow_list(entries: Iterable[str]) -> tuple[list[str], list[Network]]:
    names: list[str] = []
    networks: list[Network] = []
    for entry in entries:
        entry = entry.strip().lower()
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            names.append(entry.rstrip("."))
    return names, networks


def _name_entry(host: str, names: list[str]) -> str | None:
    """The allow-list entry admitting ``host``: the name itself, else the first wildcard it falls under."""
    if host in names:
        return host
    return next((name for name in names if name.startswith("*.") and host.endswith(name[1:])), None)


def _plain(address: IPAddress) -> IPAddress:
    """IPv4-mapped IPv6 (``::ffff:127.0.0.1``) judged as the IPv4 address it is."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


# IPv6 ranges that carry an IPv4 address a gateway translates to: NAT64's well-known prefix (RFC 6052), SIIT's
# IPv4-translated form (RFC 2765/6145, ``::ffff:0:a.b.c.d``) and the deprecated IPv4-compatible form; 6to4
# (2002::/16) is read by ``ipaddress`` itself. Python calls them global.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
# Ranges this Python calls global that are not public: never judged public, only reached when listed.
_NOT_PUBLIC = (
    ipaddress.ip_network("64:ff9b:1::/48"),  # RFC 8215: NAT64 for local use
    ipaddress.ip_network("fec0::/10"),  # deprecated site-local (RFC 3879): still routed inside some networks
    ipaddress.ip_network("3fff::/20"),  # documentation (RFC 9637)
    ipaddress.ip_network("5f00::/16"),  # SRv6 segment identifiers (RFC 9602)
)


def _embedded(address: IPAddress) -> IPAddress:
    """The IPv4 address a NAT64, SIIT, 6to4 or IPv4-compatible address reaches (``address`` itself otherwise)."""
    if isinstance(address, ipaddress.IPv6Address):
        if any(address in network for network in (_NAT64, _IPV4_TRANSLATED, _IPV4_COMPATIBLE)):
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if address.sixtofour is not None:
            return address.sixtofour
    return address


def address_public(address: IPAddress) -> bool:
    """Whether ``address`` is a public unicast address, an IPv6 one that carries an IPv4 address (mapped, NAT64,
    SIIT, 6to4, IPv4-compatible) judged by the address it reaches. Also what decides which links in an upstream's
    output or definition are kept (``mcpgateway.services.output``): one judgement for Scout's requests and for those
    it would have a client make."""
    address = _plain(address)
    reached = _embedded(address)
    return reached.is_global and not reached.is_multicast and not any(address in net for net in _NOT_PUBLIC)


def _address_allowed(address: IPAddress, networks: list[Network]) -> bool:
    """Public (``address_public``), or inside a listed network."""
    reached = _embedded(address)
    return address_public(address) or any(
        candidate in network for candidate in (address, reached) for network in networks
    )


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]).split("%", 1)[0] for info in infos]


# getaddrinfo has no timeout of its own: lookups run here and are waited for SCOUT_UPSTREAM_DNS_TIMEOUT seconds. A
# lookup that hangs keeps its thread until the system resolver gives up, so the pool bounds how many can hang. A
# host's lookup still running is joined, not started again (``_in_flight``): calls to one host whose DNS hangs
# hold one thread, not the whole pool (every other upstream's lookups queued behind them and were refused). A
# wildcard entry admits any number of names, so names under one (a zone whose DNS server drops queries, or someone's
# who made it so) share WILDCARD_LOOKUPS threads: another one waits for one of those, never for the pool's others.
_lookups = ThreadPoolExecutor(max_workers=8, thread_name_prefix="scout-egress-dns")
_in_flight: dict[tuple[Resolver, str, int], Future] = {}
_in_flight_lock = threading.Lock()
WILDCARD_LOOKUPS = 2
_wildcard_slots: dict[str, threading.BoundedSemaphore] = {}


def _resolve_within(resolver: Resolver, host: str, port: int, wildcard: str | None = None) -> list[str]:
    """``resolver(host, port)``, refused when it takes longer than SCOUT_UPSTREAM_DNS_TIMEOUT seconds (waiting for
    one of ``wildcard``'s lookup slots included, when the host was admitted by that wildcard entry)."""
    timeout = settings.SCOUT_UPSTREAM_DNS_TIMEOUT
    deadline = time.monotonic() + timeout
    key = (resolver, host, port)
    try:
        lookup = _lookup(key, wildcard, deadline)
        return lookup.result(timeout=max(0.0, deadline - time.monotonic()))
    except (FutureTimeout, CancelledError):
        lookup.cancel()  # still queued: never run (those joining it are refused as well)
        raise EgressRefused(f"host {host} did not resolve within {timeout:g} s (SCOUT_UPSTREAM_DNS_TIMEOUT)") from None
    except _NoSlot:
        raise EgressRefused(
            f"host {host} did not resolve within {timeout:g} s (SCOUT_UPSTREAM_DNS_TIMEOUT): lookups of other names "
            f"under {wildcard} are still running"
        ) from None


class _NoSlot(Exception):
    pass


def _lookup(key: tuple[Resolver, str, int], wildcard: str | None, deadline: float) -> Future:
    """The host's lookup in flight, or a new one (under a wildcard entry, once one of its slots is free)."""
    with _in_flight_lock:
        lookup = _in_flight.get(key)
        if lookup is not None:
            return lookup
        slots = _wildcard_slots.setdefault(wildcard, threading.BoundedSemaphore(WILDCARD_LOOKUPS)) if wildcard else None
    if slots is not None and not slots.acquire(timeout=max(0.0, deadline - time.monotonic())):
        raise _NoSlot()
    with _in_flight_lock:
        lookup = _in_flight.get(key)
        started = lookup is None
        if started:
            lookup = _in_flight[key] = _lookups.submit(*key)
    if not started:  # the same host was started meanwhile: joined, the slot is not needed
        if slots is not None:
            slots.release()
        return lookup
    lookup.add_done_callback(lambda done: _forget(key, done, slots))
    return lookup


def _forget(key: tuple[Resolver, str, int], done: Future, slots: threading.BoundedSemaphore | None) -> None:
    with _in_flight_lock:
        if _in_flight.get(key) is done:
            del _in_flight[key]
    if slots is not None:  # its thread is free again (or it never ran: cancelled while queued)
        slots.release()


def egress_check(
    url: str, *, allowed: Iterable[str] | None = None, resolver: Resolver | None = None, resolve: bool = True
) -> EgressTarget | None:
    """Check ``url`` against the allow-list and resolve it (connect to ``pinned_url``). Raises EgressRefused.
    ``resolve=False`` checks the host only and returns None for a name (at registration: DNS is asked, and may
    answer differently, when Scout connects)."""
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower().rstrip(".")
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise EgressRefused(f"not a valid URL ({exc})") from exc
    if parts.scheme not in ("http", "https") or not host:
        raise EgressRefused("only http:// and https:// URLs with a host can be requested")
    names, networks = _allow_list(settings.SCOUT_UPSTREAM_ALLOWED_HOSTS if allowed is None else allowed)
    try:
        literal: IPAddress | None = _plain(ipaddress.ip_address(host))
    except ValueError:
        literal = None
    if literal is not None:
        if not any(literal in network for network in networks):
            raise EgressRefused(f"host {host} is not in SCOUT_UPSTREAM_ALLOWED_HOSTS")
        return EgressTarget(url=url, host=host, address=literal)
    entry = _name_entry(host, names)
    if entry is None:
        raise EgressRefused(f"host {host} is not in SCOUT_UPSTREAM_ALLOWED_HOSTS")
    if not resolve:
        return None
    wildcard = entry if entry.startswith("*.") else None
    try:
        answers = _resolve_within(resolver or system_resolver, host, port, wildcard)
        resolved = [_plain(ipaddress.ip_address(a)) for a in answers]
    except (OSError, ValueError) as exc:
        raise EgressRefused(f"host {host} does not resolve ({exc})") from exc
    if not resolved:
        raise EgressRefused(f"host {host} does not resolve")
    for address in resolved:
        # Every answer must pass: a mix of public and private answers is how DNS rebinding starts.
        if not _address_allowed(address, networks):
            raise EgressRefused(
                f"host {host} resolves to {address}, a private, loopback or link-local address; "
                "list its network in SCOUT_UPSTREAM_ALLOWED_HOSTS to allow it"
            )
    return EgressTarget(url=url, host=host, address=resolved[0])


async def egress_resolved(url: str) -> EgressTarget:
    """``egress_check`` off the event loop, resolving: the checked address to connect to. Raises EgressRefused."""
    target = await anyio.to_thread.run_sync(egress_check, url)
    assert target is not None  # resolved: egress_check returns None only with resolve=False
    return target


def same_origin(url: str, other: str) -> bool:
    a, b = urlsplit(url), urlsplit(other)
    return (a.scheme, a.hostname, a.port) == (b.scheme, b.hostname, b.port)
