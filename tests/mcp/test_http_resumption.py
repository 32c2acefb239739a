"""Stream resumption over ``toold mcp --http``: a client reconnecting with
``Last-Event-ID`` gets its own session's missed events, and never another session's.

Raw HTTP (httpx2), so the test holds the event ids: two sessions each send a request
with the same JSON-RPC id ("2", the stream id the SDK names both streams by), then
each reconnects with a ``GET`` and ``Last-Event-ID``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import mcp.types as types
import pytest

from tests.mcp.http_process import HttpServer, toold_http
from toold.bridge import mcp_events
from toold.bridge.mcp_events import SessionEvents

VERSION = "2025-11-25"
"""A revision whose SSE streams are primed with an event id (the SDK's: 2025-11-25 on)."""
ACCEPT = {"Accept": "application/json, text/event-stream"}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[HttpServer]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a-only.txt").write_text("a\n", encoding="utf-8")
    with toold_http(workspace, "--no-token") as server:
        yield server
        assert server.stop() == 0


def events(response: httpx2.Response, wanted: int | None = None) -> list[tuple[str, str]]:
    """The (id, data) of the SSE events of ``response``, until ``wanted`` of them carried
    data (then the stream is left: a resumed stream stays open for what comes next)."""
    found: list[tuple[str, str]] = []
    event_id, data = "", ""
    for line in response.iter_lines():
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data += line[5:].strip()
        elif not line and (event_id or data):
            found.append((event_id, data))
            event_id, data = "", ""
            if wanted is not None and sum(1 for _, d in found if d) >= wanted:
                break
    return found


def post(http: httpx2.Client, server: HttpServer, session: str | None, body: Any) -> Any:
    """POST one message; the response, its session id, and its SSE events."""
    headers = {**ACCEPT, "MCP-Protocol-Version": VERSION}
    if session is not None:
        headers["Mcp-Session-Id"] = session
    with http.stream("POST", server.url, json=body, headers=headers) as response:
        assert response.status_code in (200, 202), response.read()
        got = events(response) if response.status_code == 200 else []
        return response.headers.get("mcp-session-id"), got


def opened(http: httpx2.Client, server: HttpServer, call: dict[str, Any]) -> tuple[str, str]:
    """A session that made ``call`` as request 2: its id, and the id of that stream's
    priming event (what a client whose stream broke reconnects with)."""
    init = {
        "protocolVersion": VERSION,
        "capabilities": {},
        "clientInfo": {"name": "resumption-test", "version": "1"},
    }
    session, _ = post(
        http, server, None, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}
    )
    assert session
    post(http, server, session, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    _, got = post(http, server, session, {"jsonrpc": "2.0", "id": 2, **call})
    priming = [event_id for event_id, data in got if not data]
    assert len(priming) == 1 and priming[0], got
    assert json.loads(got[-1][1])["id"] == 2
    return session, priming[0]


def resumed(
    http: httpx2.Client, server: HttpServer, session: str, last: str, wanted: int
) -> list[tuple[str, str]]:
    """Reconnect to ``session`` with ``Last-Event-ID: last``: the events replayed, up to
    ``wanted`` (a stream that replayed nothing ends at once)."""
    headers = {
        "Accept": "text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Session-Id": session,
        "Last-Event-ID": last,
    }
    with http.stream("GET", server.url, headers=headers) as response:
        assert response.status_code == 200
        return [(i, d) for i, d in events(response, wanted) if d]


def test_a_reconnecting_client_gets_its_own_events_and_never_another_sessions(
    served: HttpServer,
) -> None:
    glob = {"method": "tools/call", "params": {"name": "glob", "arguments": {"pattern": "*"}}}
    with httpx2.Client(timeout=30) as http:
        first, first_primed = opened(http, served, glob)
        second, second_primed = opened(http, served, {"method": "tools/list", "params": {}})
        mine = resumed(http, served, first, first_primed, wanted=1)
        # The second session names the first's event: its store has no such event, so
        # nothing is replayed and the stream ends (the same request id, "2", in both).
        theirs = resumed(http, served, second, first_primed, wanted=1)
        own = resumed(http, served, second, second_primed, wanted=1)
    assert len(mine) == 1 and mine[0][0] != first_primed
    replayed = json.loads(mine[0][1])
    assert replayed["id"] == 2 and "a-only.txt" in json.dumps(replayed["result"])
    assert theirs == []
    assert len(own) == 1 and "tools" in json.loads(own[0][1])["result"]
    assert first_primed.partition("-")[0] != second_primed.partition("-")[0]


def _message(request_id: int, text: str = "") -> types.JSONRPCMessage:
    return types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result={"text": text})


def test_a_session_keeps_its_events_within_its_caps() -> None:
    events = SessionEvents()
    first = events.store("1", None)
    ids = [events.store("1", _message(1)) for _ in range(mcp_events.MAX_EVENTS)]
    assert len(events.events) == mcp_events.MAX_EVENTS
    assert events.after(first) is None  # dropped (the oldest): nothing, not a gap
    found = events.after(ids[0])
    assert found is not None and found[0] == "1" and len(found[1]) == len(ids) - 1
    other = SessionEvents()
    assert other.after(ids[0]) is None  # another session's id: nothing
    big = "x" * (mcp_events.MAX_BYTES // 4)  # a few bytes more each, as JSON: 3 fit
    kept = [other.store("2", _message(2, big)) for _ in range(5)]
    assert other.size <= mcp_events.MAX_BYTES and len(other.events) == 3
    assert other.after(kept[1]) is None and other.after(kept[2]) is not None
    too_big = other.store("2", _message(2, "x" * mcp_events.MAX_BYTES))
    assert too_big not in other.events
    assert other.after(kept[-1]) is None  # a replay from before it would miss it
