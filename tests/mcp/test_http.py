"""``toold mcp --http``: a real process on 127.0.0.1, driven by the SDK's streamable HTTP
client and by raw HTTP for what a well-behaved client never sends."""

from __future__ import annotations

import asyncio
import http.client
import json
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import mcp.types as types
import pytest
from mcp.client.client import Client
from mcp.client.context import ClientRequestContext

from tests.mcp import http_process
from tests.mcp.http_process import HttpServer, toold_http
from tests.mcp.reading import audit, text
from tests.waiting import wait_until
from toold.bridge.inflight import MAX_IN_FLIGHT

TOKEN = "test-token-0123456789"
BODY_CAP = 65_536
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
ACCEPT = "application/json, text/event-stream"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("http") / "ws"
    ws.mkdir()
    (ws / "toold.toml").write_text(
        f"[limits]\nmax_message_bytes = {BODY_CAP}\n",
        encoding="utf-8",
    )
    return ws


@pytest.fixture(scope="module")
def served(workspace: Path) -> Iterator[HttpServer]:
    with toold_http(workspace, token=TOKEN) as server:
        yield server


def request(
    server: HttpServer,
    method: str = "POST",
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> http.client.HTTPResponse:
    """One raw request to the endpoint (authorized, JSON, both media types accepted,
    unless ``headers`` says otherwise); the response read whole."""
    sent = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    sent["Accept"] = ACCEPT
    sent.update(headers or {})
    conn = http.client.HTTPConnection(server.host_port, timeout=30)
    try:
        conn.request(method, "/mcp", body=body, headers={k: v for k, v in sent.items() if v})
        response = conn.getresponse()
        response.read()
        return response
    finally:
        conn.close()


def initialize(server: HttpServer, headers: dict[str, str] | None = None) -> int:
    return request(server, body=json.dumps(INIT).encode(), headers=headers).status


def sdk_client(
    server: HttpServer, mode: str, user: User | None = None, token: str = TOKEN
) -> AbstractAsyncContextManager[Client]:
    """The SDK's high-level client over its streamable HTTP transport, with the token."""
    return http_process.sdk_client(server, mode, token, user)


class User:
    """The SDK client's elicitation callback: answers from a script, keeps the questions."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    async def __call__(
        self, ctx: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.asked.append(params.message)
        return types.ElicitResult(action="accept", content={"answer": self.answers.pop(0)})


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_the_sdk_client_lists_tools_and_is_asked_before_a_write(
    served: HttpServer, workspace: Path, mode: str
) -> None:
    """Over HTTP as over stdio: an elicitation on the handshake revision (on the POST's SSE
    stream), an input_required result on 2026-07-28; Allow writes the canary, Deny not."""
    user = User("allow", "deny")
    allowed, denied = f"allowed-{mode}.txt", f"denied-{mode}.txt"

    async def scenario() -> tuple[types.ListToolsResult, list[types.CallToolResult]]:
        async with sdk_client(served, mode, user) as client:
            listed = await client.list_tools()
            results = [
                await client.call_tool("write_file", {"file_path": name, "content": mode})
                for name in (allowed, denied)
            ]
            return listed, results

    listed, (wrote, refused) = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert {"bash", "read_file", "write_file"} <= {t.name for t in listed.tools}
    assert len(user.asked) == 2 and f"+++ b/{allowed}" in user.asked[0]
    assert not wrote.is_error, text(wrote)
    assert (workspace / allowed).read_text(encoding="utf-8") == mode
    assert refused.is_error and not (workspace / denied).exists()
    assert text(refused).startswith("Denied: write_file was not allowed (user denied")
    verdicts = {e["verdict"] for e in audit(workspace) if denied in json.dumps(e)}
    assert verdicts == {"denied_by_user"}


def test_a_missing_or_wrong_token_is_refused_with_401(served: HttpServer, workspace: Path) -> None:
    missing = request(served, body=json.dumps(INIT).encode(), headers={"Authorization": ""})
    assert missing.status == 401
    assert missing.getheader("WWW-Authenticate") == 'Bearer realm="toold"'
    for wrong in (f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", f"Basic {TOKEN}", "Bearer"):
        refused = request(served, body=json.dumps(INIT).encode(), headers={"Authorization": wrong})
        assert refused.status == 401, wrong
        assert 'error="invalid_token"' in (refused.getheader("WWW-Authenticate") or "")

    async def with_a_wrong_token() -> None:
        async with sdk_client(served, "legacy", token="guess") as client:
            await client.call_tool("write_file", {"file_path": "no.txt", "content": "x"})

    with pytest.raises(BaseExceptionGroup) as raised:
        asyncio.run(asyncio.wait_for(with_a_wrong_token(), 30))
    assert "MCPError(-32600, 'a valid bearer token is required'" in repr(raised.value)
    assert not (workspace / "no.txt").exists()


def test_a_foreign_origin_or_host_is_refused(served: HttpServer) -> None:
    port = served.host_port.split(":")[1]
    assert initialize(served, {"Origin": "http://evil.example"}) == 403
    assert initialize(served, {"Origin": f"http://evil.example:{port}"}) == 403
    # DNS rebinding: the browser sends the attacker's name as Host, with or without a token.
    assert initialize(served, {"Host": f"evil.example:{port}"}) == 421
    assert initialize(served, {"Host": "evil.example", "Authorization": ""}) == 421
    assert initialize(served, {"Origin": f"http://localhost:{port}"}) == 200
    assert initialize(served, {"Host": f"localhost:{port}"}) == 200


def test_what_the_spec_does_not_allow_gets_its_status(served: HttpServer) -> None:
    body = json.dumps(INIT).encode()
    assert request(served, "PUT", body).status == 405
    assert request(served, body=body, headers={"Accept": "text/html"}).status == 406
    assert request(served, body=body, headers={"Content-Type": "text/plain"}).status == 415
    listing = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).encode()
    unknown = request(served, body=listing, headers={"Mcp-Session-Id": "no-such-session"})
    assert unknown.status == 404


def test_a_body_over_the_workspace_cap_is_refused_with_413(served: HttpServer) -> None:
    padded = dict(INIT, padding="x" * BODY_CAP)
    assert request(served, body=json.dumps(padded).encode()).status == 413
    assert initialize(served) == 200


def _held_post(server: HttpServer) -> socket.socket:
    """A POST whose headers arrived and whose body never will: a request in flight."""
    sock = socket.create_connection(tuple(server.host_port.split(":")), timeout=30)  # type: ignore[arg-type]
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: {server.host_port}\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Type: application/json\r\nAccept: {ACCEPT}\r\nContent-Length: 1000\r\n\r\n{{"
    )
    sock.sendall(head.encode())
    return sock


def test_requests_past_the_in_flight_cap_get_503_until_one_ends(served: HttpServer) -> None:
    held = [_held_post(served) for _ in range(MAX_IN_FLIGHT)]
    try:
        refused = wait_until(
            lambda: (r := request(served, body=json.dumps(INIT).encode())).status == 503 and r,
            f"the {MAX_IN_FLIGHT + 1}th request refused",
            timeout=30,
        )
        assert refused.getheader("Retry-After") == "1"
    finally:
        for sock in held:
            sock.close()
    wait_until(lambda: initialize(served) == 200, "a request accepted once the held ones ended")


def test_a_made_token_is_printed_and_sigterm_stops_cleanly(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "toold.toml").write_text('[permissions]\nmode = "bypass"\n', encoding="utf-8")
    with toold_http(workspace) as server:
        line = wait_until(
            lambda: next((x for x in server.stderr if "bearer token" in x), None),
            "the token on stderr",
        )
        assert line is not None
        token = line.split()[-1]
        assert len(token) >= 32

        async def write_then_stop() -> tuple[types.CallToolResult, int]:
            async with sdk_client(server, "legacy", token=token) as client:
                wrote = await client.call_tool(
                    "write_file", {"file_path": "made.txt", "content": "ok"}
                )
                # SIGTERM while the session (and its GET stream) is open.
                return wrote, await asyncio.to_thread(server.stop, signal.SIGTERM)

        wrote, status = asyncio.run(asyncio.wait_for(write_then_stop(), 60))
        assert not wrote.is_error
        assert (workspace / "made.txt").read_text(encoding="utf-8") == "ok"
        assert status == 0
        assert not any("Traceback" in x for x in server.stderr), "".join(server.stderr)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--http", "--host", "0.0.0.0", "--no-token"], "--token-file"),
        (["--port", "8000"], "need --http"),
        (["--http", "--token-file", "token"], "lies in the workspace"),  # relative: cwd is it
    ],
)
def test_what_must_not_start_is_refused_at_start(
    tmp_path: Path, args: list[str], says: str
) -> None:
    (tmp_path / "token").write_text("a-token\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "toold", "mcp", *args, "--workspace", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert says in done.stderr
