"""Run inside a sandbox: every route out a command could try, each result as one string.

``python3 probe.py plan.json`` reads ``[[name, op, *args], ...]`` and prints one JSON
object, name → result. Standard library only (it runs on the sandbox's Python).
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Callable

PROXY = ("127.0.0.1", 3128)


def fetch(url: str, method: str = "GET", cafile: str = "") -> str:
    """Through the proxy variables, as any urllib program: ``status body`` or the error."""
    context = ssl.create_default_context(cafile=cafile) if cafile else None
    data = b"payload" if method == "POST" else None
    request = urllib.request.Request(url, data=data, method=method)
    try:
        with urllib.request.urlopen(request, timeout=20, context=context) as answer:
            return f"{answer.status} {answer.read().decode().strip()}"
    except urllib.error.HTTPError as exc:
        return f"{exc.code} {exc.reason}"
    except (OSError, urllib.error.URLError) as exc:
        return f"error {exc}"


def proxy_status(line: str) -> str:
    """A hand-made request to the proxy (``line`` is its request line): the status line."""
    with socket.create_connection(PROXY, timeout=20) as sock:
        sock.sendall(f"{line}\r\nHost: spelled\r\n\r\n".encode())
        head = b""
        while b"\r\n" not in head:
            chunk = sock.recv(4096)
            if not chunk:
                break
            head += chunk
    return head.split(b"\r\n", 1)[0].decode(errors="replace")


def raw(host: str, port: int) -> str:
    """A plain TCP connect, ignoring the proxy variables."""
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        return f"error {exc}"
    return "connected"


def udp(host: str, port: int) -> str:
    """A DNS-sized datagram sent straight to ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.sendto(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00", (host, int(port)))
        except OSError as exc:
            return f"error {exc}"
    return "sent"


def resolvers() -> str:
    """For each nameserver of /etc/resolv.conf: is there a route to it? (A UDP connect
    sends nothing; it only asks the kernel for a route.)"""
    found = []
    try:
        with open("/etc/resolv.conf") as f:
            lines = f.read().splitlines()
    except OSError:
        return "no resolv.conf"
    for line in lines:
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "nameserver":
            family = socket.AF_INET6 if ":" in parts[1] else socket.AF_INET
            with socket.socket(family, socket.SOCK_DGRAM) as sock:
                try:
                    sock.connect((parts[1], 53))
                    found.append(f"{parts[1]} route")
                except OSError as exc:
                    found.append(f"{parts[1]} error {exc.errno}")
    return "; ".join(found) or "no nameserver"


def resolve(name: str) -> str:
    """What the sandbox's own resolver makes of ``name``."""
    try:
        return "resolved " + str(socket.getaddrinfo(name, 80)[0][4][0])
    except OSError as exc:
        return f"error {exc}"


OPS: dict[str, Callable[..., str]] = {
    "fetch": fetch,
    "proxy": proxy_status,
    "raw": raw,
    "udp": udp,
    "resolvers": lambda: resolvers(),
    "resolve": resolve,
    "env": lambda name: os.environ.get(name, ""),
}


def main() -> None:
    """Run the plan; print the results."""
    with open(sys.argv[1]) as f:
        plan = json.load(f)
    print(json.dumps({name: OPS[op](*args) for name, op, *args in plan}))


if __name__ == "__main__":
    main()
