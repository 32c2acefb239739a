"""Where http_request may connect: host rules checked against resolved addresses.

Spellings are never compared for addresses: ``0x7f.0.0.1``, ``2130706433``, ``0177.0.0.1``,
``127.1``, ``[::ffff:7f00:1]`` and a name in /etc/hosts all reach 127.0.0.1, so a URL's
host is resolved the way the OS resolves it (getaddrinfo, off the event loop), every
address is normalised (IPv4-mapped, IPv4-compatible and NAT64 IPv6 become the IPv4 they
carry; 6to4 and Teredo are checked for the IPv4 they embed too) and each is checked. The
connection then goes to exactly those addresses (PinnedResolver: no second lookup for a
rebinding DNS server to answer differently), with the URL's name kept for the Host
header and TLS. Every redirect hop is checked the same way.

Rules (``http.allow_hosts`` / ``http.deny_hosts``) are addresses or CIDR networks,
matched by address, or names, matched by name and subdomain; a denied name also denies
every address it resolves to, and ``localhost`` every loopback address (deny "localhost"
and ``127.1``, ``[::1]`` and names in /etc/hosts for 127.0.0.1 are refused). With
``http.block_private`` (the default) loopback, link-local (cloud metadata included),
private, shared (CGNAT), unique-local, site-local, multicast, unspecified and reserved
addresses are refused unless allowed by an address rule that contains them or by a rule
naming the URL's host exactly (not a subdomain of it).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

IP = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
AddrInfo = tuple[Any, Any, Any, str, tuple[Any, ...]]
Lookup = Callable[[str, int], Awaitable[list[AddrInfo]]]
"""getaddrinfo's answer for (host, port)."""

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_SHARED = ipaddress.IPv4Network("100.64.0.0/10")


class Refused(Exception):
    """The URL may not be requested; the message says why and names the setting."""


class Unresolvable(Exception):
    """The host has no address (a DNS failure: worth a retry)."""


_LOOPBACK = (ipaddress.IPv4Network("127.0.0.0/8"), ipaddress.IPv6Network("::1/128"))


@dataclass(frozen=True)
class Rule:
    """One allow_hosts or deny_hosts entry: networks, or a name."""

    text: str
    networks: tuple[Network, ...] = ()
    name: str | None = None

    @classmethod
    def parse(cls, entry: str) -> Rule:
        """A CIDR network or address (``[::1]`` too), else a name. ``localhost`` and its
        subdomains also stand for every loopback address (RFC 6761: they are loopback
        whatever /etc/hosts lists, in both families)."""
        text = entry.strip().lower().rstrip(".")
        try:
            return cls(entry, networks=(ipaddress.ip_network(text.strip("[]"), strict=False),))
        except ValueError:
            local = text == "localhost" or text.endswith(".localhost")
            return cls(entry, networks=_LOOPBACK if local else (), name=text)

    def contains(self, ip: IP) -> bool:
        """``ip`` is in one of this rule's networks."""
        return any(ip in network for network in self.networks)

    def names(self, host: str) -> bool:
        """``host`` is this rule's name or one of its subdomains."""
        return bool(self.name) and (host == self.name or host.endswith(f".{self.name}"))


def normalise(address: str) -> IP:
    """The address a socket connecting to ``address`` reaches, as comparable as possible."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip in _NAT64 or (1 < int(ip) < 2**32):  # NAT64, or deprecated ::a.b.c.d
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def identities(ip: IP) -> list[IP]:
    """``ip``, what it reaches besides (connecting to 0.0.0.0 or :: reaches this host's
    loopback) and the IPv4 addresses it embeds (6to4, Teredo): all are checked."""
    found: list[IP] = [ip]
    if ip.is_unspecified:
        found.append(ipaddress.ip_address("127.0.0.1" if ip.version == 4 else "::1"))
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.sixtofour is not None:
            found.append(ip.sixtofour)
        if ip.teredo is not None:
            found += list(ip.teredo)
    return found


def internal_kind(ip: IP) -> str | None:
    """What kind of non-public address ``ip`` is, or None for a public one."""
    checks = [
        ("unspecified", ip.is_unspecified),
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("shared (CGNAT)", isinstance(ip, ipaddress.IPv4Address) and ip in _SHARED),
        ("site-local", isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local),
        ("private", ip.is_private),
        ("reserved", ip.is_reserved),
        ("non-global", not ip.is_global),
    ]
    return next((kind for kind, hit in checks if hit), None)


async def system_lookup(host: str, port: int) -> list[AddrInfo]:
    """getaddrinfo on the event loop's executor (it blocks)."""
    loop = asyncio.get_running_loop()
    return await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)


class HostPolicy:
    """The ``http`` configuration's scheme, host and address rules."""

    def __init__(
        self, allow: Iterable[str], deny: Iterable[str], block_private: bool = True
    ) -> None:
        self.allow = [Rule.parse(h) for h in allow if h.strip()]
        self.deny = [Rule.parse(h) for h in deny if h.strip()]
        self.block_private = block_private
        self._denied_addresses: dict[IP, Rule] | None = None

    def refusal(self, url: Any) -> str | None:
        """Why ``url`` (a yarl URL) may not be requested, judged on its spelling alone."""
        if url.scheme not in ("http", "https"):
            return f"Only http and https URLs are allowed, got: {url.scheme or '(no scheme)'}"
        host = host_of(url)
        if not host:
            return f"URL has no host: {url}"
        for rule in self.deny:
            if rule.names(host):
                return f"Host not allowed: {host} (http.deny_hosts: {rule.text})"
        return None

    async def check(self, url: Any, lookup: Lookup) -> list[AddrInfo]:
        """Resolve ``url``'s host and check every address; the addresses to connect to.

        Raises Refused (naming the address and the setting) or Unresolvable.
        """
        host = host_of(url)
        port = url.port or (443 if url.scheme == "https" else 80)
        try:
            infos = await lookup(host, port)
        except (OSError, UnicodeError) as exc:
            raise Unresolvable(f"cannot resolve {host}: {exc}") from None
        if not infos:
            raise Unresolvable(f"cannot resolve {host}: no address")
        denied = await self._deny_addresses(lookup)
        named = any(rule.names(host) for rule in self.allow)
        exact = any(rule.name == host for rule in self.allow)
        for info in infos:
            self._check_address(host, normalise(info[4][0]), denied, named, exact)
        return infos

    def _check_address(
        self, host: str, ip: IP, denied: dict[IP, Rule], named: bool, exact: bool
    ) -> None:
        where = host if host == str(ip) else f"{host} resolves to {ip}"
        for each in identities(ip):
            rule = denied.get(each) or next((r for r in self.deny if r.contains(each)), None)
            if rule is not None:
                raise Refused(f"Host not allowed: {where} (http.deny_hosts: {rule.text})")
        listed = any(r.contains(ip) for r in self.allow)
        if self.allow and not (named or listed):
            raise Refused(f"Host not allowed: {where} (not in http.allow_hosts)")
        if self.block_private and not (exact or listed):
            kind = next(filter(None, map(internal_kind, identities(ip))), None)
            if kind is not None:
                raise Refused(
                    f"Host not allowed: {where}, a {kind} address (http.block_private; "
                    "list the address or network in http.allow_hosts to allow it)"
                )

    async def _deny_addresses(self, lookup: Lookup) -> dict[IP, Rule]:
        """Every address a denied name resolves to (looked up once per policy)."""
        if self._denied_addresses is None:
            found: dict[IP, Rule] = {}
            for rule in self.deny:
                if rule.name is None:
                    continue
                try:
                    infos = await lookup(rule.name, 0)
                except (OSError, UnicodeError):
                    continue  # a name that does not resolve is still denied by name
                for info in infos:
                    found.setdefault(normalise(info[4][0]), rule)
            self._denied_addresses = found
        return self._denied_addresses


def host_of(url: Any) -> str:
    """The URL's host as resolved and compared: ASCII (IDNA), lower case, no final dot."""
    return str(url.raw_host or "").strip().rstrip(".").lower()


def pinned_resolver() -> Any:
    """An aiohttp resolver that answers only with addresses checked by HostPolicy."""
    from aiohttp.abc import AbstractResolver, ResolveResult

    class PinnedResolver(AbstractResolver):
        """Hosts map to the addresses checked for them; anything else fails closed."""

        def __init__(self) -> None:
            self.pinned: dict[str, list[AddrInfo]] = {}

        def pin(self, url: Any, infos: list[AddrInfo]) -> None:
            self.pinned[str(url.raw_host or "")] = infos

        async def resolve(
            self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
        ) -> list[ResolveResult]:
            infos = self.pinned.get(host)
            if infos is None:
                raise OSError(f"{host} was not checked by the http policy")
            return [
                {
                    "hostname": host,
                    "host": info[4][0],
                    "port": port,
                    "family": info[0],
                    "proto": info[2],
                    "flags": socket.AI_NUMERICHOST | socket.AI_NUMERICSERV,
                }
                for info in infos
            ]

        async def close(self) -> None:
            self.pinned.clear()

    return PinnedResolver()
