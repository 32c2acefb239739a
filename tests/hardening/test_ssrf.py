"""http_request against SSRF: address spellings, names, redirects and DNS rebinding.

A real aiohttp server listens on 127.0.0.1 (and one on this machine's non-loopback
address plays an allowed outside server). Every spelling that reaches 127.0.0.1 must be
refused for the right reason under three configurations: the default
(http.block_private), a deny list naming 127.0.0.1 and localhost with block_private off,
and an allow list of something else. A control run with nothing blocked shows which
spellings really reach the server here.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.e2e.wire import WireClient
from tests.hardening.support import start_daemon
from toold.config import TooldConfig
from toold.tools import ToolRuntime
from toold.tools.builtin.web import HttpRequestTool


def _hosts_names() -> list[str]:
    """Names /etc/hosts maps to a loopback address, besides localhost."""
    names: list[str] = []
    with contextlib.suppress(OSError), open("/etc/hosts") as hosts:
        for line in hosts:
            fields = line.split("#", 1)[0].split()
            with contextlib.suppress(ValueError, IndexError):
                if ipaddress.ip_address(fields[0]).is_loopback:
                    names += [n for n in fields[1:] if n != "localhost"]
    return names[:2]


FORMS = [
    "127.0.0.1",
    "0x7f.0.0.1",
    "0x7f000001",
    "2130706433",
    "0177.0.0.1",
    "127.1",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[::127.0.0.1]",
    "[64:ff9b::7f00:1]",
    "[::1]",
    "localhost",
    "LOCALHOST.",
    "0.0.0.0",
    "0",
    "[::]",
    *_hosts_names(),
]


class Target:
    """An HTTP server on 127.0.0.1 counting the requests that reach it."""

    def __init__(self) -> None:
        self.hits = 0
        self.port = 0
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        async def hit(request: web.Request) -> web.Response:
            self.hits += 1
            return web.Response(text="reached")

        async def start() -> web.AppRunner:
            app = web.Application()
            app.router.add_get("/{tail:.*}", hit)
            runner = web.AppRunner(app)
            await runner.setup()
            # Both families, so [::1] and IPv4-mapped spellings have something to reach.
            for host in ("127.0.0.1", "::1"):
                with contextlib.suppress(OSError):
                    await web.TCPSite(runner, host, self.port).start()
                    self.port = self.port or runner.addresses[0][1]
            return runner

        asyncio.set_event_loop(self._loop)
        self.runner = self._loop.run_until_complete(start())
        self._ready.set()
        self._loop.run_forever()

    def __enter__(self) -> Target:
        self._thread.start()
        assert self._ready.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.close()


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    with Target() as server:
        yield server


def _daemon(tmp_path: Path, http: dict[str, Any]) -> WireClient:
    options = {"config": {"http": {"retries": 0, "timeout": 5, **http}}}
    return start_daemon(tmp_path, initializationOptions=options)


def _get(client: WireClient, url: str) -> dict[str, Any]:
    params = {"name": "http_request", "arguments": {"url": url}, "origin": "user"}
    result: dict[str, Any] = client.call("tools/call", params)
    return result


CONFIGS: dict[str, tuple[dict[str, Any], str]] = {
    "block_private (default)": ({}, "http.block_private"),
    "deny 127.0.0.1 and localhost": (
        {"deny_hosts": ["127.0.0.1", "localhost"], "block_private": False},
        "http.deny_hosts",
    ),
    "allow something else": ({"allow_hosts": ["example.org"]}, "not in http.allow_hosts"),
}


@pytest.mark.parametrize("config", list(CONFIGS))
def test_every_spelling_of_loopback_is_refused(tmp_path: Path, target: Target, config: str) -> None:
    http, reason = CONFIGS[config]
    client = _daemon(tmp_path, http)
    try:
        before = target.hits
        held = []
        for form in FORMS:
            result = _get(client, f"http://{form}:{target.port}/x")
            assert result["isError"] is True, (form, result)
            assert reason in result["content"], (form, result["content"])
            held.append(form)
        assert target.hits == before, "a refused request reached the server"
        assert held == FORMS
    finally:
        client.close()


def test_the_control_run_reaches_the_server(tmp_path: Path, target: Target) -> None:
    """With nothing blocked, the spellings are live: the refusals above are not vacuous."""
    client = _daemon(tmp_path, {"block_private": False})
    try:
        reached = [
            form
            for form in FORMS
            if _get(client, f"http://{form}:{target.port}/x")["content"] == "[HTTP 200]\nreached"
        ]
    finally:
        client.close()
    assert {"127.0.0.1", "localhost", "[::ffff:127.0.0.1]", "0.0.0.0"} <= set(reached), reached


# -- redirects and rebinding, in process (a scripted resolver cannot reach a daemon) ----


def _outside_address() -> str | None:
    """A local address that is not loopback (the machine's own interface), if any: a UDP
    connect picks the source address without sending anything."""
    for probe in ("192.0.2.1", "10.255.255.254", "8.8.8.8"):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            try:
                sock.connect((probe, 9))
            except OSError:
                continue
            address: str = sock.getsockname()[0]
            if not ipaddress.ip_address(address).is_loopback:
                return address
    return None


OUT = _outside_address() or "192.0.2.2"


class Outside:
    """The 'allowed outside server' on OUT, redirecting wherever it is told."""

    def __init__(self) -> None:
        self.hosts: list[str] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.hosts.append(request.headers.get("Host", ""))
        if "to" in request.query:
            raise web.HTTPFound(request.query["to"])
        return web.Response(text="outside")


@contextlib.asynccontextmanager
async def outside_server() -> AsyncIterator[tuple[Outside, int]]:
    outside = Outside()
    app = web.Application()
    app.router.add_get("/{tail:.*}", outside.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, OUT, 0)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        pytest.skip(f"this machine has no non-loopback address to serve on ({OUT}: {exc})")
    try:
        yield outside, runner.addresses[0][1]
    finally:
        await runner.cleanup()


def _tool(tmp_path: Path, **http: Any) -> HttpRequestTool:
    config = TooldConfig.model_validate({"http": {"retries": 0, **http}})
    return HttpRequestTool(ToolRuntime(workspace=tmp_path, config=config))


REDIRECTS = ["127.0.0.1", "0x7f000001", "127.1", "[::ffff:127.0.0.1]", "localhost", "0.0.0.0"]


@pytest.mark.parametrize(
    "http",
    [
        {"allow_hosts": [OUT]},
        {"allow_hosts": [OUT], "deny_hosts": ["127.0.0.1", "localhost"]},
        {"deny_hosts": ["127.0.0.1", "localhost"], "block_private": False},
    ],
)
def test_redirects_to_loopback_are_refused(
    tmp_path: Path, target: Target, http: dict[str, Any]
) -> None:
    async def scenario() -> None:
        async with outside_server() as (_, port):
            tool = _tool(tmp_path, **http)
            assert await tool.call({"url": f"http://{OUT}:{port}/"}) == "[HTTP 200]\noutside"
            before = target.hits
            for form in REDIRECTS:
                to = f"http://{form}:{target.port}/secret"
                result = await tool.call({"url": f"http://{OUT}:{port}/?to={to}"})
                assert result.startswith("Error: redirect to http://"), result
                assert " refused: Host not allowed: " in result, result
            assert target.hits == before

    asyncio.run(scenario())


def test_the_connection_goes_to_the_address_that_was_checked(
    tmp_path: Path, target: Target
) -> None:
    """DNS rebinding: a name answers an allowed address when checked, then loopback. The
    request is checked once and connects to the checked address (no second lookup);
    Host keeps the name. A redirect back to the same name is resolved and checked again."""

    async def scenario() -> None:
        async with outside_server() as (outside, port):
            # First call; second call's first hop, then its redirect hop.
            answers = {"rebind.test": [OUT, OUT, "127.0.0.1"]}
            asked: list[str] = []

            async def rebinding(host: str, lookup_port: int) -> list[Any]:
                asked.append(host)
                address = answers[host].pop(0) if host in answers else "127.0.0.1"
                return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, lookup_port))]

            tool = _tool(tmp_path, allow_hosts=[OUT])
            tool.lookup = rebinding
            before = target.hits
            assert await tool.call({"url": f"http://rebind.test:{port}/"}) == "[HTTP 200]\noutside"
            assert asked == ["rebind.test"]
            assert outside.hosts == [f"rebind.test:{port}"]
            again = f"http://rebind.test:{target.port}/"
            result = await tool.call({"url": f"http://rebind.test:{port}/?to={again}"})
            assert result.startswith(f"Error: redirect to {again} refused: "), result
            assert "resolves to 127.0.0.1" in result
            assert target.hits == before

    asyncio.run(scenario())


def test_metadata_and_private_ranges_are_refused_by_default(tmp_path: Path) -> None:
    """No connection is attempted: the check refuses before connecting."""

    async def scenario() -> None:
        tool = _tool(tmp_path)
        for host in [
            "169.254.169.254",
            "[fd00::1]",
            "[fe80::1]",
            "10.0.0.1",
            "172.16.0.1",
            "192.168.1.1",
            "100.64.0.1",
            "[fec0::1]",
            "224.0.0.1",
            "240.0.0.1",
        ]:
            result = await tool.call({"url": f"http://{host}/latest/meta-data/"})
            assert "http.block_private" in result, (host, result)

    asyncio.run(scenario())


def _inet_aton_spellings(address: str) -> list[str]:
    """Every form inet_aton reads as ``address``: 4, 3, 2 and 1 parts, each part in
    decimal, octal or hex (120 for an IPv4 address), plus IPv6 spellings of it."""
    octets = [int(o) for o in address.split(".")]
    value = int(ipaddress.IPv4Address(address))
    shapes = [
        octets,
        [*octets[:2], octets[2] << 8 | octets[3]],
        [octets[0], value & 0xFFFFFF],
        [value],
    ]
    styles: list[Callable[[int], str]] = [str, lambda n: f"0{n:o}", lambda n: f"0x{n:x}"]
    found: set[str] = set()
    for parts in shapes:
        combos: list[list[str]] = [[]]
        for part in parts:
            combos = [[*c, style(part)] for c in combos for style in styles]
        found.update(".".join(c) for c in combos)
    mapped = ipaddress.IPv6Address(f"::ffff:{address}")
    found.update(
        f"[{form}]"
        for form in (
            f"::ffff:{address}",
            mapped.compressed,
            mapped.exploded,
            mapped.exploded.upper(),
            f"0:0:0:0:0:ffff:{address}",
            f"::{address}",
            f"64:ff9b::{address}",
        )
    )
    return sorted(found)


def test_every_inet_aton_spelling_is_refused(tmp_path: Path, target: Target) -> None:
    """Generated spellings of 127.0.0.1, each checked to resolve to it here first (so
    the refusal is not vacuous), refused under the deny list and block_private."""
    forms = _inet_aton_spellings("127.0.0.1")
    plain = [f for f in forms if not f.startswith("[")]
    for form in plain:
        resolved = {i[4][0] for i in socket.getaddrinfo(form, 80, type=socket.SOCK_STREAM)}
        assert resolved == {"127.0.0.1"}, (form, resolved)

    async def scenario() -> list[str]:
        held = []
        for http in (
            {"deny_hosts": ["127.0.0.1"], "block_private": False},
            {},
        ):
            tool = _tool(tmp_path, **http)
            for form in forms:
                result = await tool.call({"url": f"http://{form}:{target.port}/"})
                assert result.startswith("Error: Host not allowed: "), (form, http, result)
                held.append(form)
        return held

    before = target.hits
    held = asyncio.run(scenario())
    assert len(held) == 2 * len(forms) and len(forms) >= 120
    assert target.hits == before
