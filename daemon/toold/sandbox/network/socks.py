"""SOCKS5 (RFC 1928) on the proxy's port: CONNECT without authentication, nothing else.

The proxy tells the protocols apart by the first byte (5 for SOCKS, a letter for HTTP),
so ``socks5h://127.0.0.1:3128`` works beside ``http://127.0.0.1:3128``. A SOCKS CONNECT
is judged as an HTTP CONNECT; a refusal can only be a reply code (2: not allowed by the
ruleset), the audit log has the reason. BIND and UDP ASSOCIATE are refused (7).
"""

from __future__ import annotations

import asyncio
import ipaddress

VERSION = 5
NO_AUTHENTICATION = 0
NONE_ACCEPTABLE = 0xFF
SUCCEEDED = 0
GENERAL_FAILURE = 1
NOT_ALLOWED = 2
HOST_UNREACHABLE = 4
REFUSED = 5
COMMAND_NOT_SUPPORTED = 7
ADDRESS_NOT_SUPPORTED = 8
_CONNECT = 1
_IPV4, _NAME, _IPV6 = 1, 3, 4


class SocksError(Exception):
    """The request cannot be served; ``code`` is the reply to send (None: none)."""

    def __init__(self, code: int | None) -> None:
        super().__init__(f"SOCKS reply {code}")
        self.code = code


def reply(code: int) -> bytes:
    """A reply with ``code`` and an empty bound address."""
    return bytes([VERSION, code, 0, _IPV4, 0, 0, 0, 0, 0, 0])


async def handshake(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> tuple[str, int]:
    """After the version byte: the method negotiation and the CONNECT request; the host
    (a name as sent, or an address) and port asked for. Raises SocksError."""
    count = (await reader.readexactly(1))[0]
    methods = await reader.readexactly(count)
    if NO_AUTHENTICATION not in methods:
        writer.write(bytes([VERSION, NONE_ACCEPTABLE]))
        raise SocksError(None)
    writer.write(bytes([VERSION, NO_AUTHENTICATION]))
    version, command, _reserved, kind = await reader.readexactly(4)
    if version != VERSION:
        raise SocksError(GENERAL_FAILURE)
    if command != _CONNECT:
        raise SocksError(COMMAND_NOT_SUPPORTED)
    if kind == _IPV4:
        host = str(ipaddress.IPv4Address(await reader.readexactly(4)))
    elif kind == _IPV6:
        host = str(ipaddress.IPv6Address(await reader.readexactly(16)))
    elif kind == _NAME:
        raw = await reader.readexactly((await reader.readexactly(1))[0])
        try:
            host = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise SocksError(GENERAL_FAILURE) from None
    else:
        raise SocksError(ADDRESS_NOT_SUPPORTED)
    port = int.from_bytes(await reader.readexactly(2), "big")
    return host, port
