"""The proxy itself, in process on its Unix socket: framing, smuggling and bounds."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.network.conftest import Hosts, Recorded
from toold.config import NetworkPolicy
from toold.sandbox.network import proxy as proxy_module
from toold.sandbox.network.proxy import NetworkProxy


@pytest.fixture
def proxy(tmp_path: Path, hosts: Hosts) -> Iterator[NetworkProxy]:
    policy = NetworkPolicy.model_validate({"allow": ["pypi.test"]})
    running = NetworkProxy(policy, tmp_path, Recorded())
    running.start()
    yield running
    running.close()


def exchange(proxy: NetworkProxy, data: bytes) -> bytes:
    """Send ``data`` on a fresh connection; everything the proxy answers until it closes."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(20)
        sock.connect(str(proxy.path))
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_one_request_per_connection_and_the_host_is_the_uris(
    proxy: NetworkProxy, hosts: Hosts
) -> None:
    port = hosts.http.port
    smuggled = (
        f"GET http://pypi.test:{port}/a HTTP/1.1\r\nHost: canary.test\r\n"
        "Proxy-Connection: keep-alive\r\n\r\n"
        "GET /smuggled HTTP/1.1\r\nHost: canary.test\r\n\r\n"
    )
    answer = exchange(proxy, smuggled.encode())
    assert answer.startswith(b"HTTP/1.0 200") and answer.endswith(
        f"pypi.test:{port} GET /a".encode()
    )
    assert hosts.http.seen == [f"GET pypi.test:{port}/a"]


@pytest.mark.parametrize(
    ("request_head", "status"),
    [
        (b"GET http://pypi.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", b"411"),
        (
            b"POST http://pypi.test/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"400",
        ),
        (b"GET /relative HTTP/1.1\r\nHost: pypi.test\r\n\r\n", b"400"),
        (b"GET https://pypi.test/ HTTP/1.1\r\n\r\n", b"400"),
        (b"CONNECT pypi.test HTTP/1.1\r\n\r\n", b"400"),
        (b"GET http://pypi.test/ HTTP/2\r\n\r\n", b"400"),
        (b"GET http://pypi.test/ HTTP/1.1\r\nBad Header: x\r\n\r\n", b"400"),
        (b"GET http://pypi.test/ HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n", b"431"),
        # A bare LF ends a line for many origins: a second Host would slip past the judge.
        (b"GET http://pypi.test/ HTTP/1.1\r\nX: a\nHost: canary.test\r\n\r\n", b"400"),
        (b"GET http://pypi.test/ HTTP/1.1\nHost: canary.test\r\n\r\n", b"400"),
        (b"GET http://pypi.test/ HTTP/1.1\r\nX: a\rB: c\r\n\r\n", b"400"),
        (b"GET http://pypi.test/ HTTP/1.1\r\nX: a\0\r\n\r\n", b"400"),
        (b"GET http://pypi.test/ HTTP/1.1\r\n folded: x\r\n\r\n", b"400"),
    ],
)
def test_what_cannot_be_judged_is_refused(
    proxy: NetworkProxy, hosts: Hosts, request_head: bytes, status: bytes
) -> None:
    answer = exchange(proxy, request_head)
    assert answer.startswith(b"HTTP/1.1 " + status + b" toold: "), answer[:200]
    assert hosts.http.seen == []


def test_idle_clients_cannot_take_more_than_their_share(
    proxy: NetworkProxy, hosts: Hosts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Connections that send nothing hold a slot each, up to the cap; the next is told
    503 at once, and a slot freed serves again."""
    monkeypatch.setattr(proxy_module, "MAX_CONNECTIONS", 8)
    idle = []
    for _ in range(8):
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(str(proxy.path))
        idle.append(sock)
    try:
        get = f"GET http://pypi.test:{hosts.http.port}/x HTTP/1.1\r\n\r\n".encode()
        assert exchange(proxy, get).startswith(b"HTTP/1.1 503 toold: too many")
    finally:
        for sock in idle:
            sock.close()
    for _ in range(200):  # the proxy's loop sees the closes a moment later
        answer = exchange(proxy, get)
        if not answer.startswith(b"HTTP/1.1 503"):
            break
    assert answer.startswith(b"HTTP/1.0 200"), answer[:100]
