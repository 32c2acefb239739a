"""http_request against a real aiohttp server on 127.0.0.1: retries, timeouts, truncation,
JSON pretty-printing, refused schemes and the host lists.

http.block_private (on by default) refuses loopback, so the tools here allow 127.0.0.1
explicitly unless a test sets its own allow_hosts; tests/hardening/test_ssrf.py tries
the address forms, redirects and rebinding."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.calls import user_call
from toold.config import TooldConfig
from toold.tools import ToolRuntime, ToolSet
from toold.tools.builtin._http_policy import HostPolicy, Refused
from toold.tools.builtin.web import HttpRequestTool, backoff_delay

BIG_BODY = "".join(f"line {n}: é—💡\n" for n in range(2000))
"""Far past 4 * max_response_length bytes, with multi-byte characters across chunk ends."""


class Server:
    """Routes for one test, with the number of requests each path received."""

    def __init__(self) -> None:
        self.hits: dict[str, int] = {}
        self.release = asyncio.Event()
        self.seen: list[dict[str, Any]] = []
        self.base = ""

    def _count(self, request: web.Request) -> int:
        self.hits[request.path] = self.hits.get(request.path, 0) + 1
        return self.hits[request.path]

    async def json_doc(self, request: web.Request) -> web.Response:
        self._count(request)
        return web.json_response({"name": "测试", "items": [1, 2]})

    async def text(self, request: web.Request) -> web.Response:
        self._count(request)
        return web.Response(text="plain body")

    async def big(self, request: web.Request) -> web.Response:
        return web.Response(text=BIG_BODY)

    async def flaky(self, request: web.Request) -> web.Response:
        if self._count(request) <= 2:
            return web.Response(status=503, text="busy")
        return web.Response(text="ok")

    async def always_busy(self, request: web.Request) -> web.Response:
        self._count(request)
        return web.Response(status=503, text="still busy")

    async def drops(self, request: web.Request) -> web.StreamResponse:
        if self._count(request) <= 2:
            assert request.transport is not None
            request.transport.close()
            return web.Response()
        return web.Response(text="back")

    async def slow(self, request: web.Request) -> web.Response:
        self._count(request)
        await self.release.wait()
        return web.Response(text="late")

    async def echo(self, request: web.Request) -> web.Response:
        self._count(request)
        body = await request.text()
        self.seen.append(
            {
                "method": request.method,
                "x-test": request.headers.get("X-Test"),
                "authorization": request.headers.get("Authorization"),
                "body": json.loads(body) if body else None,
            }
        )
        return web.Response(text=f"{request.method} ok")

    async def not_found(self, request: web.Request) -> web.Response:
        self._count(request)
        return web.Response(status=404, text="missing")

    async def redirect(self, request: web.Request) -> web.Response:
        target = request.query["to"]
        raise web.HTTPFound(target)

    async def post_redirect(self, request: web.Request) -> web.Response:
        raise web.HTTPSeeOther("/echo")


@contextlib.asynccontextmanager
async def serve() -> AsyncIterator[Server]:
    server = Server()
    app = web.Application()
    app.router.add_get("/json", server.json_doc)
    app.router.add_get("/text", server.text)
    app.router.add_get("/big", server.big)
    app.router.add_get("/flaky", server.flaky)
    app.router.add_get("/busy", server.always_busy)
    app.router.add_get("/drops", server.drops)
    app.router.add_get("/slow", server.slow)
    app.router.add_route("*", "/echo", server.echo)
    app.router.add_get("/missing", server.not_found)
    app.router.add_get("/redirect", server.redirect)
    app.router.add_post("/post-redirect", server.post_redirect)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    server.base = f"http://{host}:{port}"
    try:
        yield server
    finally:
        server.release.set()
        await runner.cleanup()


def make_tool(workspace: Path, **http: Any) -> HttpRequestTool:
    """The tool with ``http`` settings; the test server's 127.0.0.1 allowed by default."""
    http.setdefault("allow_hosts", ["127.0.0.1"])
    config = TooldConfig.model_validate({"http": http})
    tool = HttpRequestTool(ToolRuntime(workspace=workspace, config=config))
    tool.backoff_base = 0.01  # keep the retry waits short; their shape is tested below
    return tool


async def request(tool: HttpRequestTool, **args: Any) -> str:
    result = (await user_call(ToolSet([tool]), tool.name, args)).content
    assert isinstance(result, str)
    return result


def test_plain_text(workspace: Path) -> None:
    async def scenario() -> None:
        async with serve() as server:
            tool = make_tool(workspace)
            assert await request(tool, url=server.base + "/text") == "[HTTP 200]\nplain body"

    asyncio.run(scenario())


def test_json_is_pretty_printed_keeping_non_ascii(workspace: Path) -> None:
    async def scenario() -> None:
        async with serve() as server:
            result = await request(make_tool(workspace), url=server.base + "/json")
            assert result == (
                '[HTTP 200]\n{\n  "name": "测试",\n  "items": [\n    1,\n    2\n  ]\n}'
            )

    asyncio.run(scenario())


def test_long_body_is_truncated_and_kept_whole_in_a_file(workspace: Path) -> None:
    async def scenario() -> None:
        async with serve() as server:
            tool = make_tool(workspace, max_response_length=100)
            result = await request(tool, url=server.base + "/big")
            head, note = result.rsplit("\n", 1)
            assert head == "[HTTP 200]\n" + BIG_BODY[:100] + "\n... (truncated)"
            match = re.fullmatch(
                r"\[Output cut: all (\d+) characters are in (\.toold/outputs/\w+\.txt); "
                r"page through it with read_file \(offset, limit\)\]",
                note,
            )
            assert match, note
            assert int(match[1]) == len(BIG_BODY)
            # Read past the 4 * limit bytes the result needed, multi-byte characters whole.
            assert (workspace / match[2]).read_text(encoding="utf-8") == BIG_BODY

    asyncio.run(scenario())


def test_a_body_that_fits_leaves_no_file(workspace: Path) -> None:
    async def scenario() -> None:
        async with serve() as server:
            result = await request(make_tool(workspace), url=server.base + "/big")
            assert result == "[HTTP 200]\n" + BIG_BODY
            assert not (workspace / ".toold" / "outputs").exists()

    asyncio.run(scenario())


def test_retries_until_the_server_recovers(workspace: Path) -> None:
    async def scenario() -> None:
        async with serve() as server:
            result = await request(make_tool(workspace), url=server.base + "/flaky")
            assert result == "[HTTP 200]\nok"
            assert server.hits["/flaky"] == 3

    asyncio.run(scenario())


def test_retries_after_dropped_connections(workspace: Path) -> None:
    async def scenario() -> None:
        async with serve() as server:
            result = await request(make_tool(workspace), url=server.base + "/drops")
            assert result == "[HTTP 200]\nback"
            assert server.hits["/drops"] == 3

    asyncio.run(scenario())


def test_retry_count_per_call_and_exhaustion(workspace: Path) -> None:
    async def scenario() -> None:
        async with serve() as server:
            tool = make_tool(workspace)
            result = await request(tool, url=server.base + "/busy", retries=1)
            assert result == "[HTTP 503]\nstill busy"
            assert server.hits["/busy"] == 2
            assert await request(tool, url=server.base + "/flaky", retries=0) == (
                "[HTTP 503]\nbusy"
            )
            assert server.hits["/flaky"] == 1

    asyncio.run(scenario())


def test_default_retries_from_config(workspace: Path) -> None:
    async def scenario() -> None:
        async with serve() as server:
            await request(make_tool(workspace, retries=0), url=server.base + "/busy")
            assert server.hits["/busy"] == 1

    asyncio.run(scenario())


def test_client_errors_are_not_retried(workspace: Path) -> None:
    async def scenario() -> None:
        async with serve() as server:
            result = await request(make_tool(workspace), url=server.base + "/missing")
            assert result == "[HTTP 404]\nmissing"
            assert server.hits["/missing"] == 1

    asyncio.run(scenario())


def test_timeout_per_attempt(workspace: Path) -> None:
    async def scenario() -> None:
        async with serve() as server:
            tool = make_tool(workspace, timeout=0.3, retries=1)
            result = await request(tool, url=server.base + "/slow")
            assert result == "Error: Request timed out after 0.3s"
            assert server.hits["/slow"] == 2

    asyncio.run(scenario())


def test_connection_refused(workspace: Path) -> None:
    async def scenario() -> str:
        async with serve() as server:
            base = server.base
        # The server is gone: its port refuses connections.
        return await request(make_tool(workspace, retries=0), url=base + "/text")

    result = asyncio.run(scenario())
    assert result.startswith("Error: ClientConnectorError: ")


def test_post_json_body_and_headers(workspace: Path) -> None:
    async def scenario() -> None:
        async with serve() as server:
            result = await request(
                make_tool(workspace),
                url=server.base + "/echo",
                method="post",
                headers={"X-Test": "yes"},
                body={"a": [1, "二"]},
            )
            assert result == "[HTTP 200]\nPOST ok"
            assert server.seen == [
                {"method": "POST", "x-test": "yes", "authorization": None, "body": {"a": [1, "二"]}}
            ]
            for method in ("PUT", "DELETE"):
                assert await request(
                    make_tool(workspace), url=server.base + "/echo", method=method
                ) == (f"[HTTP 200]\n{method} ok")

    asyncio.run(scenario())


def test_redirects_are_followed_and_checked(workspace: Path) -> None:
    async def scenario() -> None:
        async with serve() as server:
            tool = make_tool(workspace)
            result = await request(tool, url=f"{server.base}/redirect?to=/text")
            assert result == "[HTTP 200]\nplain body"
            denied = make_tool(workspace, deny_hosts=["example.com"])
            result = await request(
                denied, url=f"{server.base}/redirect?to=http://api.example.com/x"
            )
            assert result == (
                "Error: redirect to http://api.example.com/x refused: "
                "Host not allowed: api.example.com (http.deny_hosts: example.com)"
            )
            result = await request(tool, url=f"{server.base}/redirect?to=file:///etc/passwd")
            assert result.startswith("Error: redirect to file:///etc/passwd refused: Only http")
            # 303 after a POST becomes a GET without the body.
            result = await request(
                tool, url=server.base + "/post-redirect", method="POST", body={"x": 1}
            )
            assert result == "[HTTP 200]\nGET ok"
            assert server.seen[-1]["body"] is None

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://example.com/f", "Only http and https URLs are allowed, got: ftp"),
        ("file:///etc/passwd", "Only http and https URLs are allowed, got: file"),
        ("example.com/path", "Only http and https URLs are allowed, got: (no scheme)"),
        ("http:///nohost", "URL has no host: http:///nohost"),
    ],
)
def test_refused_schemes(workspace: Path, url: str, reason: str) -> None:
    assert asyncio.run(request(make_tool(workspace), url=url)) == f"Error: {reason}"


def test_deny_list_matches_hosts_and_subdomains(workspace: Path) -> None:
    async def scenario() -> None:
        async with serve() as server:
            tool = make_tool(workspace, deny_hosts=["127.0.0.1", "Example.COM"])
            assert await request(tool, url=server.base + "/text") == (
                "Error: Host not allowed: 127.0.0.1 (http.deny_hosts: 127.0.0.1)"
            )
            assert await request(tool, url="https://deep.api.example.com./x") == (
                "Error: Host not allowed: deep.api.example.com (http.deny_hosts: Example.COM)"
            )
            assert server.hits == {}

    asyncio.run(scenario())


def test_a_lookalike_is_not_a_subdomain() -> None:
    from yarl import URL

    names = ["example.com", "a.example.com", "badexample.com", "ample.com"]

    async def public(host: str, port: int) -> list[Any]:
        """Each name resolves to a public address of its own (never connected to here)."""
        return [(2, 1, 6, "", (f"93.184.216.{34 + names.index(host)}", port))]

    async def check(url: str) -> str | None:
        if refused := policy.refusal(URL(url)):
            return refused
        try:
            await policy.check(URL(url), public)
        except Refused as exc:
            return str(exc)
        return None

    policy = HostPolicy(allow=["example.com"], deny=["ample.com"])
    assert asyncio.run(check("http://example.com/")) is None
    assert asyncio.run(check("http://a.example.com/")) is None
    assert asyncio.run(check("http://badexample.com/")) == (
        "Host not allowed: badexample.com resolves to 93.184.216.36 (not in http.allow_hosts)"
    )


def test_allow_list(workspace: Path) -> None:
    async def scenario() -> None:
        async with serve() as server:
            only_local = make_tool(workspace, allow_hosts=["127.0.0.1"])
            assert await request(only_local, url=server.base + "/text") == "[HTTP 200]\nplain body"
            only_other = make_tool(workspace, allow_hosts=["example.org"])
            assert await request(only_other, url=server.base + "/text") == (
                "Error: Host not allowed: 127.0.0.1 (not in http.allow_hosts)"
            )

    asyncio.run(scenario())


def test_no_url(workspace: Path) -> None:
    assert asyncio.run(request(make_tool(workspace), url="")) == "Error: No URL provided"
    assert asyncio.run(request(make_tool(workspace), url="   ")) == "Error: No URL provided"


def test_schema_is_jianmus() -> None:
    params = HttpRequestTool().parameters()
    assert list(params["properties"]) == ["url", "method", "headers", "body", "retries"]
    assert params["required"] == ["url"]
    assert params["properties"]["method"]["enum"] == ["GET", "POST", "PUT", "DELETE"]


def test_backoff_grows_exponentially_with_jitter() -> None:
    for attempt in range(1, 8):
        ceiling = min(10.0, 0.5 * 2 ** (attempt - 1))
        delays = [backoff_delay(attempt, 0.5) for _ in range(200)]
        assert all(0 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1  # jittered, not fixed
