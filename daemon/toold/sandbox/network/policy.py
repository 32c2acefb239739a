"""Whether a sandboxed command may reach a host: ``[execution.network]`` judged.

Entries are normalised by the configuration (toold.config.normalise_host): lower case,
no final dot, IDNA, IP literals in their canonical spelling. A plain name matches that
name only; ``*.example.org`` matches every name below example.org, not example.org
itself; an address or CIDR network matches every address it contains, whatever name
led there. Deny always wins, and a denied name also denies the addresses it resolves to.

A name that no allow entry names is refused before it is resolved (the proxy's resolver
carries no data out for names off the list). An allowed name is resolved by the proxy,
and every address is checked with http_request's address rules
(toold.tools.builtin._http_policy: normalised, embedded IPv4 checked too): a loopback,
private, link-local (cloud metadata), shared or reserved address is refused unless an
allow entry names the host exactly or is an address or network containing it. The
proxy then connects to exactly the addresses checked.

``TOOLD_NETWORK_TEST_HOSTS`` (``name=address,...``), read from the daemon's environment
by the proxy alone and never from toold.toml, replaces DNS for tests: listed names
resolve to their address, any other name to nothing.
"""

from __future__ import annotations

import asyncio
import os
import socket
from dataclasses import dataclass, field

from toold.config import NetworkPolicy, normalise_host
from toold.tools.builtin._http_policy import (
    IP,
    AddrInfo,
    Lookup,
    Rule,
    identities,
    internal_kind,
    normalise,
    system_lookup,
)

TEST_HOSTS = "TOOLD_NETWORK_TEST_HOSTS"
"""Test-only resolver override (``name=address,...``), read by the proxy alone."""
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
RESOLVE_TIMEOUT = 10.0
ALLOW = "execution.network.allow"


@dataclass(frozen=True)
class Entry:
    """One allow or deny entry: a name, a wildcard's suffix, or networks."""

    text: str
    rule: Rule
    suffix: str | None = None

    @classmethod
    def parse(cls, text: str) -> Entry:
        """An entry as the configuration normalised it."""
        if text.startswith("*."):
            return cls(text, Rule(text), suffix=text[1:])
        return cls(text, Rule.parse(text))

    def names(self, host: str) -> bool:
        """``host`` is this entry's name, or below its wildcard."""
        if self.suffix is not None:
            return host.endswith(self.suffix)
        return self.rule.name == host


@dataclass
class Decision:
    """The verdict on one request: the rule that decided and the words the model reads."""

    allowed: bool
    host: str
    rule: str
    reason: str = ""
    status: int = 403
    addresses: list[AddrInfo] = field(default_factory=list)


class NetworkRules:
    """A policy ready to judge requests (one per proxy)."""

    def __init__(self, policy: NetworkPolicy, lookup: Lookup | None = None) -> None:
        self.policy = policy
        self.allow = [Entry.parse(text) for text in policy.allow]
        self.deny = [Entry.parse(text) for text in policy.deny]
        self.lookup = lookup or lookup_from_environment()
        self._denied: dict[IP, str] | None = None

    async def judge(self, raw_host: str, port: int, method: str) -> Decision:
        """Judge ``method`` (CONNECT for a tunnel) to ``raw_host``:``port``; an allowed
        decision carries the checked addresses to connect to."""
        try:
            host = normalise_host(raw_host)
        except ValueError:
            return Decision(False, raw_host, "invalid", f"toold: {raw_host!r} is not a host", 400)
        if self.policy.methods == "read" and method not in READ_METHODS:
            what = "an HTTPS tunnel (CONNECT) cannot be inspected" if method == "CONNECT" else ""
            why = f" ({what})" if what else ""
            return Decision(
                False, host, "execution.network.methods",
                f"toold: {method} {host} refused: execution.network.methods = read{why}",
            )  # fmt: skip
        for entry in self.deny:
            if entry.names(host):
                return self._denied_by(host, entry.text)
        literal = _literal(host)
        named = [entry for entry in self.allow if entry.names(host)]
        if literal is None and not named:
            return Decision(False, host, ALLOW, f"toold: {host} not in {ALLOW}")
        try:
            infos = await asyncio.wait_for(self.lookup(host, port), RESOLVE_TIMEOUT)
        except (OSError, UnicodeError, TimeoutError) as exc:
            return Decision(False, host, "resolve", f"toold: cannot resolve {host} ({exc})", 502)
        if not infos:
            return Decision(False, host, "resolve", f"toold: cannot resolve {host}", 502)
        exact = any(entry.suffix is None for entry in named)
        denied = await self._denied_addresses()
        for info in infos:
            refusal = self._check_address(host, normalise(info[4][0]), denied, bool(named), exact)
            if refusal is not None:
                return refusal
        rule = named[0].text if named else "address"
        return Decision(True, host, rule, status=200, addresses=infos)

    def _check_address(
        self, host: str, ip: IP, denied: dict[IP, str], named: bool, exact: bool
    ) -> Decision | None:
        where = host if host == str(ip) else f"{host} resolves to {ip}"
        for each in identities(ip):
            rule = denied.get(each)
            rule = rule or next((e.text for e in self.deny if e.rule.contains(each)), None)
            if rule is not None:
                return self._denied_by(where, rule)
        listed = next((e for e in self.allow if e.rule.contains(ip)), None)
        if not (named or listed):
            return Decision(False, host, ALLOW, f"toold: {where}, not in {ALLOW}")
        kind = next(filter(None, map(internal_kind, identities(ip))), None)
        if kind is not None and not (exact or listed):
            return Decision(
                False, host, "private",
                f"toold: {where}, a {kind} address: refused unless {ALLOW} names the host "
                "exactly or lists the address",
            )  # fmt: skip
        return None

    def _denied_by(self, where: str, rule: str) -> Decision:
        host = where.split(" ", 1)[0]
        return Decision(
            False, host, rule, f"toold: {where} denied by execution.network.deny {rule}"
        )

    async def _denied_addresses(self) -> dict[IP, str]:
        """Every address a plainly denied name resolves to (looked up once)."""
        if self._denied is None:
            found: dict[IP, str] = {}
            for entry in self.deny:
                if entry.rule.name is None or entry.suffix is not None:
                    continue
                try:
                    infos = await asyncio.wait_for(self.lookup(entry.rule.name, 0), RESOLVE_TIMEOUT)
                except (OSError, UnicodeError, TimeoutError):
                    continue  # a name that does not resolve is still denied by name
                for info in infos:
                    found.setdefault(normalise(info[4][0]), entry.text)
            self._denied = found
        return self._denied


def _literal(host: str) -> IP | None:
    try:
        return normalise(host)
    except ValueError:
        return None


def lookup_from_environment() -> Lookup:
    """getaddrinfo, or the test hosts of TOOLD_NETWORK_TEST_HOSTS when it is set."""
    spec = os.environ.get(TEST_HOSTS)
    if not spec:
        return system_lookup
    table: dict[str, str] = {}
    for item in spec.split(","):
        name, _, address = item.partition("=")
        if name.strip() and address.strip():
            table[normalise_host(name)] = address.strip()

    async def lookup(host: str, port: int) -> list[AddrInfo]:
        address = table.get(host) or str(_literal(host) or "")
        if not address:
            raise OSError(f"{host}: not among the test hosts")
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port))]

    return lookup
