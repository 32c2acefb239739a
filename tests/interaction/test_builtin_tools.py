"""Jianmu's builtin tools through the in-process daemon, asserted on the raw wire JSON.

Calls carry origin "user" (a person at the command palette): these tests are about the
tools, not about the permission prompts agent calls may meet. Moved from tests/e2e: the
same calls through the daemon's own session and transport (lsp_front.py).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.interaction.conftest import LOCAL_RUNNER, OpenLsp
from tests.interaction.lsp_front import InProcessDaemon
from tests.processes import wait_gone
from tests.waiting import wait_until

JIANMU = [
    "calculator",
    "python_repl",
    "list_dir",
    "glob_search",
    "grep_search",
    "file_info",
    "str_replace",
    "http_request",
    "duckduckgo_search",
]


@pytest.fixture(scope="module")
def shared_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("builtin") / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "main.py").write_text("print('needle')\n", encoding="utf-8")
    (ws / "src" / "helper.txt").write_text("needle line\n", encoding="utf-8")
    return ws


@pytest.fixture(scope="module")
def shared(shared_workspace: Path) -> Iterator[InProcessDaemon]:
    """One daemon for the tests that leave nothing behind that others could see.

    It runs with DDGS_PROXY set: a loopback port nobody listens on, so a web search fails
    at once and nothing leaves the machine.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DDGS_PROXY", f"http://127.0.0.1:{port}")
        c = InProcessDaemon(shared_workspace)
        # http.block_private refuses loopback: allow the test server's 127.0.0.1.
        allow_local = {"config": {"http": {"allow_hosts": ["127.0.0.1"]}}}
        c.initialize(rootUri=shared_workspace.as_uri(), initializationOptions=allow_local)
        yield c
        assert c.close() == 0


@pytest.fixture
def repl_client(lsp: OpenLsp, workspace: Path) -> InProcessDaemon:
    """A local-runner daemon whose python_repl gives up after one second (set through
    initialize; the local runner for the tests that read the interpreter's host pid)."""
    config = {"python_repl": {"timeout": 1.0}, **LOCAL_RUNNER["config"]}
    return lsp(workspace, initializationOptions={"config": config})


def _params(name: str, arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments, "origin": "user"}


def _call(client: InProcessDaemon, name: str, arguments: Any) -> dict[str, Any]:
    result: dict[str, Any] = client.call("tools/call", _params(name, arguments))
    return result


def test_catalogue_lists_jianmus_tools(shared: InProcessDaemon) -> None:
    tools = {t["name"]: t for t in shared.call("tools/list", {})["tools"]}
    assert set(JIANMU) <= set(tools)
    assert tools["calculator"]["parameters"] == {
        "type": "object",
        "properties": {
            "input": {"type": "string", "description": "Python math expression, e.g. '2+2'"}
        },
        "required": ["input"],
    }
    assert tools["duckduckgo_search"]["aliases"] == ["web_search"]
    assert tools["python_repl"]["aliases"] == ["python_eval"]
    assert tools["str_replace"]["effectTags"] == ["filesystem:write"]
    assert tools["str_replace"]["parallelSafe"] is False
    openai = shared.call("tools/list", {"format": "openai"})["tools"]
    calc = next(t for t in openai if t["function"]["name"] == "calculator")
    assert calc["function"]["parameters"]["required"] == ["input"]


def test_calculator_on_the_wire(shared: InProcessDaemon) -> None:
    assert _call(shared, "calculator", {"input": "2+2"}) == {"content": "4", "isError": False}
    assert _call(shared, "calculator", {"input": "9**9**9"}) == {
        "content": "Error: result too large (more than 30,103 digits)",
        "isError": True,
    }


def test_python_eval_alias_keeps_names(shared: InProcessDaemon) -> None:
    """On the default runner (the sandbox), as in the daemon."""
    assert _call(shared, "python_eval", {"code": "x = 21"})["content"] == "(No output)"
    assert _call(shared, "python_repl", {"code": "x * 2"}) == {
        "content": "42",
        "isError": False,
    }


def test_python_repl_timeout_then_fresh_interpreter(repl_client: InProcessDaemon) -> None:
    _call(repl_client, "python_repl", {"code": "kept = 1"})
    slow = repl_client.request("tools/call", _params("python_repl", {"code": "while True: pass"}))
    # The daemon answers other calls while the snippet spins.
    assert _call(repl_client, "calculator", {"input": "6*7"})["content"] == "42"
    reply = repl_client.response(slow)
    assert reply["result"]["content"].startswith("Error: Code execution timed out after 1.0s")
    after = _call(repl_client, "python_repl", {"code": "kept"})["content"]
    assert after.startswith("[python_repl: the previous snippet timed out after 1.0s;")
    assert "NameError" in after


def test_python_repl_cancel_kills_the_worker(
    local_client: InProcessDaemon, workspace: Path
) -> None:
    client = local_client
    pid = int(_call(client, "python_repl", {"code": "import os; print(os.getpid())"})["content"])
    code = "open('started', 'w').close()\nimport time\nwhile True: time.sleep(0.01)"
    msg_id = client.request("tools/call", _params("python_repl", {"code": code}))
    wait_until(lambda: (workspace / "started").exists(), "the code to start")
    client.notify("$/cancelRequest", {"id": msg_id})
    assert client.response(msg_id)["error"]["code"] == -32800
    wait_gone(pid, "the cancelled worker")
    after = _call(client, "python_repl", {"code": "1+1"})["content"]
    assert after.endswith("names defined before are lost]\n2")


def test_file_tools_with_jianmus_names(shared: InProcessDaemon, shared_workspace: Path) -> None:
    assert _call(shared, "write_file", {"path": "notes/a.txt", "content": "alpha beta\n"}) == {
        "content": "Wrote 11 characters to notes/a.txt",
        "isError": False,
    }
    assert _call(shared, "file_read", {"path": "notes/a.txt"})["content"] == "1: alpha beta"
    assert _call(shared, "list_dir", {"path": "notes"})["content"] == "FILE       11 B  a.txt"
    assert _call(shared, "str_replace", {"path": "notes/a.txt", "old": "beta", "new": "gamma"}) == {
        "content": "Replaced 1 occurrence in notes/a.txt",
        "isError": False,
    }
    assert (shared_workspace / "notes" / "a.txt").read_text() == "alpha gamma\n"
    info = _call(shared, "file_info", {"path": "notes/a.txt"})["content"]
    assert {k: info[k] for k in ("path", "type", "size", "extension")} == {
        "path": "notes/a.txt",
        "type": "file",
        "size": 12,
        "extension": ".txt",
    }
    assert _call(shared, "glob_search", {"pattern": "*.txt"})["content"] == (
        "notes/a.txt\nsrc/helper.txt"
    )
    assert _call(shared, "grep_search", {"query": "needle", "glob": "*.py"})["content"] == (
        "src/main.py:1:print('needle')"
    )


def test_failures_are_error_results(shared: InProcessDaemon) -> None:
    missing = _call(shared, "str_replace", {"path": "src/main.py", "old": "nope", "new": "x"})
    assert missing["isError"] is True
    assert missing["content"].startswith("Error: ValueError: No match in src/main.py")
    escape = _call(shared, "list_dir", {"path": "../"})
    assert escape["isError"] is True and "PermissionError" in escape["content"]
    bad = _call(shared, "read_file", {"offset": 1})
    assert bad == {
        "content": "Error: invalid arguments for read_file: "
        "file_path: Field required; pass file_path (or path)",
        "isError": True,
        "decision": "refused",
    }


def test_bash_accepts_cmd(shared: InProcessDaemon) -> None:
    assert _call(shared, "bash", {"cmd": "echo via-cmd"}) == {
        "content": "via-cmd",
        "isError": False,
        "exitCode": 0,
    }


class _JsonHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"greeting": "你好"}).encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def http_base() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _JsonHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def test_http_request_through_the_daemon(shared: InProcessDaemon, http_base: str) -> None:
    assert _call(shared, "http_request", {"url": http_base + "/hello"}) == {
        "content": '[HTTP 200]\n{\n  "greeting": "你好"\n}',
        "isError": False,
    }
    refused = _call(shared, "http_request", {"url": "file:///etc/passwd"})
    assert refused["content"] == "Error: Only http and https URLs are allowed, got: file"


def test_web_search_alias_offline(shared: InProcessDaemon) -> None:
    result = _call(shared, "web_search", {"query": "python"})
    try:
        import ddgs  # noqa: F401
    except ImportError:
        assert result["isError"] is True
        assert "requires optional dependency 'ddgs' or 'duckduckgo-search'" in result["content"]
    else:
        assert result["isError"] is True
        assert result["content"].startswith("Error performing search: ")
