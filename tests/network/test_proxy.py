"""The proxy itself, in process on its Unix socket: framing, smuggling and bounds."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.network.conftest import Hosts, Recorded
from tests.waiting import wait_until
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
    assert b"smuggled" not in answer
    # The first request went out before the second showed; the origin's thread records it
    # in its own time (the proxy closed the exchange at the second request's first byte).
    wait_until(lambda: hosts.http.seen, "the origin to read the first request")
    assert hosts.http.seen == [f"GET pypi.test:{port}/a"]
    # One request alone: its answer, with the Host of its URI.
    get = f"GET http://pypi.test:{port}/b HTTP/1.1\r\nHost: canary.test\r\n\r\n".encode()
    assert exchange(proxy, get).endswith(f"hello pypi.test:{port} GET /b".encode())


def test_a_reused_connection_ends_at_once_though_the_origin_keeps_it_open(
    proxy: NetworkProxy, hosts: Hosts
) -> None:
    """An origin that ignores Connection: close; the client reuses the connection (as
    keep-alive clients do): the proxy closes it then, instead of holding it idle."""
    origin = socket.create_server(("127.0.0.1", 0))
    kept: list[socket.socket] = []

    def serve() -> None:
        conn, _ = origin.accept()
        kept.append(conn)
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    threading.Thread(target=serve, daemon=True).start()
    port = origin.getsockname()[1]
    with socket.socket(socket.AF_UNIX) as sock, origin:
        sock.settimeout(10)
        sock.connect(str(proxy.path))
        sock.sendall(f"GET http://pypi.test:{port}/ HTTP/1.1\r\n\r\n".encode())
        answer = b""
        while not answer.endswith(b"ok"):
            answer += sock.recv(65536)
        sock.sendall(b"GET /again HTTP/1.1\r\nHost: canary.test\r\n\r\n")
        assert sock.recv(65536) == b""  # closed by the proxy, well before the timeout
    for conn in kept:
        conn.close()


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


def _socks(proxy: NetworkProxy, request: bytes, methods: bytes = b"\x00") -> bytes:
    """A SOCKS5 greeting offering ``methods``, then ``request``: all the proxy answers
    (through a GET sent once a CONNECT succeeded)."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(20)
        sock.connect(str(proxy.path))
        sock.sendall(b"\x05" + bytes([len(methods)]) + methods)
        answer = sock.recv(2)
        if answer != b"\x05\x00":
            return answer
        sock.sendall(request)
        answer += sock.recv(10)
        if answer[3] == 0:
            sock.sendall(b"GET /socks HTTP/1.0\r\nHost: pypi.test\r\n\r\n")
            while chunk := sock.recv(65536):
                answer += chunk
    return answer


def _connect(host: bytes, port: int, command: int = 1) -> bytes:
    return bytes([5, command, 0, 3, len(host)]) + host + port.to_bytes(2, "big")


def test_socks5_connect_is_judged_like_an_http_connect(proxy: NetworkProxy, hosts: Hosts) -> None:
    port = hosts.http.port
    allowed = _socks(proxy, _connect(b"PyPI.Test.", port))
    assert allowed[:4] == b"\x05\x00\x05\x00" and allowed.endswith(b"GET /socks"), allowed
    assert _socks(proxy, _connect(b"canary.test", port))[2:4] == b"\x05\x02"  # not allowed
    address = bytes([5, 1, 0, 1, 127, 0, 0, 1]) + port.to_bytes(2, "big")
    assert _socks(proxy, address)[2:4] == b"\x05\x02"  # an address no entry lists
    assert _socks(proxy, _connect(b"pypi.test", port, command=2))[2:4] == b"\x05\x07"  # BIND
    assert _socks(proxy, b"", methods=b"\x02") == b"\x05\xff"  # only user/password offered
    assert hosts.http.seen == ["GET pypi.test/socks"]
    assert isinstance(proxy.audit, Recorded)
    decisions = [(e["host"], e["decision"]) for e in proxy.audit.entries]
    assert decisions == [
        ("pypi.test", "allowed"),
        ("canary.test", "denied"),
        ("127.0.0.1", "denied"),
    ]
