"""Malformed frames and messages get the right JSON-RPC error; the daemon keeps serving.

Moved from tests/e2e and tests/inprocess: the same bytes through the in-process daemon's
own framing transport over an OS pipe (lsp_front.py).
"""

from __future__ import annotations

import pytest

from tests.interaction.lsp_front import InProcessDaemon


def still_serving(client: InProcessDaemon) -> None:
    assert client.tool("read_file", file_path="src/main.py")["content"] == "1: print('needle')"


def error_without_id(client: InProcessDaemon) -> dict:
    return client.next_message(lambda m: "error" in m and m.get("id") is None)


@pytest.mark.parametrize(
    "frame",
    [
        pytest.param(b'Content-Length: 9\r\n\r\n{"jsonrpc', id="truncated-json"),
        pytest.param(b"Content-Length: 4\r\n\r\n\xff\xfe\xfd\xfc", id="invalid-utf8"),
        pytest.param(b"Content-Length: 5\r\n\r\nhello", id="not-json"),
    ],
)
def test_unparsable_body_is_parse_error(client: InProcessDaemon, frame: bytes) -> None:
    client.send_raw(frame)
    assert error_without_id(client)["error"]["code"] == -32700
    still_serving(client)


@pytest.mark.parametrize(
    "header",
    [
        pytest.param(b"Content-Type: application/json\r\n\r\n", id="missing"),
        pytest.param(b"Content-Length: abc\r\n\r\n", id="not-a-number"),
        pytest.param(b"Content-Length: -5\r\n\r\n", id="negative"),
        pytest.param(b"garbage line\r\n\r\n", id="garbage"),
    ],
)
def test_malformed_headers_are_parse_errors(client: InProcessDaemon, header: bytes) -> None:
    client.send_raw(header)
    reply = error_without_id(client)
    assert reply["error"]["code"] == -32700
    assert "Content-Length" in reply["error"]["message"] or "header" in reply["error"]["message"]
    still_serving(client)


def test_batch_is_invalid_request(client: InProcessDaemon) -> None:
    client.send([{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}])
    assert error_without_id(client)["error"]["code"] == -32600
    still_serving(client)


@pytest.mark.parametrize(
    "message",
    [
        pytest.param({"id": 50, "method": "tools/list"}, id="no-jsonrpc"),
        pytest.param({"jsonrpc": "1.0", "id": 51, "method": "tools/list"}, id="wrong-version"),
        pytest.param({"jsonrpc": "2.0", "id": 52, "method": 7}, id="method-not-string"),
        pytest.param(42, id="not-an-object"),
    ],
)
def test_invalid_request_shapes(client: InProcessDaemon, message: object) -> None:
    client.send(message)
    reply = client.next_message(lambda m: "error" in m)
    assert reply["error"]["code"] == -32600
    if isinstance(message, dict) and isinstance(message.get("method"), str):
        assert reply["id"] == message["id"]
    still_serving(client)


def test_response_to_nothing_is_ignored(client: InProcessDaemon) -> None:
    client.send({"jsonrpc": "2.0", "id": "never-sent", "result": {"x": 1}})
    client.send({"jsonrpc": "2.0", "id": 999, "error": {"code": 1, "message": "x"}})
    still_serving(client)


def test_duplicate_ids_each_get_an_answer(client: InProcessDaemon) -> None:
    client.request("tools/list", {"format": "anthropic"}, msg_id=77)
    client.request("tools/list", {"format": "openai"}, msg_id=77)
    first = client.response(77)
    second = client.response(77)
    assert {"result"} <= set(first) and {"result"} <= set(second)


def test_wrong_param_types_for_lsp_methods(raw_client: InProcessDaemon) -> None:
    reply = raw_client.response(raw_client.request("initialize", {"processId": "not-a-pid"}))
    assert reply["error"]["code"] in (-32602, -32603)
    raw_client.initialize()
    still_serving(raw_client)


def test_unknown_method_and_notification(client: InProcessDaemon) -> None:
    reply = client.response(client.request("tools/frobnicate", {}))
    assert reply["error"]["code"] == -32601
    client.notify("tools/frobnicated", {})  # unknown notifications are ignored
    still_serving(client)


def test_params_must_be_an_object(client: InProcessDaemon) -> None:
    reply = client.response(client.request("tools/call", ["read_file"]))
    assert reply["error"]["code"] == -32602
    assert "object" in reply["error"]["message"]
    missing = client.response(client.request("tools/call", {"arguments": {}}))
    assert missing["error"]["code"] == -32602
    assert "name" in missing["error"]["message"]
