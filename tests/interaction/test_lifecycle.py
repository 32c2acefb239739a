"""LSP lifecycle in process: initialize's answer, requests before it, the workspace a
session binds (folders, rootPath, the --workspace flag's create_server argument), and a
prompt answered during the shutdown grace.

Moved from tests/e2e: the same messages through the in-process daemon (lsp_front.py).
What is about the process stays there: exit codes, stdin closing or being a file, the
client process dying, the daemon's working folder, debug logs.
"""

from __future__ import annotations

from pathlib import Path

from tests.interaction.conftest import OpenLsp
from tests.interaction.lsp_front import InProcessDaemon


def test_initialize_reports_server_info_and_methods(raw_client: InProcessDaemon) -> None:
    result = raw_client.initialize()
    assert result["serverInfo"]["name"] == "toold"
    assert result["serverInfo"]["version"]
    toold_caps = result["capabilities"]["experimental"]["toold"]
    assert {"tools/list", "tools/call"} <= set(toold_caps["methods"])
    assert toold_caps["protocolVersion"] == "1"


def test_request_before_initialize_is_refused(raw_client: InProcessDaemon) -> None:
    reply = raw_client.response(raw_client.request("tools/list", {}))
    assert reply["error"]["code"] == -32002
    raw_client.initialize()
    assert raw_client.call("tools/list", {})["tools"]


def test_workspace_from_workspace_folders(lsp: OpenLsp, tmp_path: Path) -> None:
    ws = tmp_path / "from-folders"
    ws.mkdir()
    c = lsp(None, workspaceFolders=[{"uri": ws.as_uri(), "name": "w"}], rootUri=None)
    assert c.tool("bash", command="pwd")["content"] == str(ws)


def test_workspace_from_root_path_and_flag_wins(lsp: OpenLsp, tmp_path: Path) -> None:
    flagged, other = tmp_path / "flag", tmp_path / "other"
    flagged.mkdir()
    other.mkdir()
    c = lsp(None, rootPath=str(other))
    assert c.tool("bash", command="pwd")["content"] == str(other)
    assert c.close() == 0
    c = lsp(flagged, rootUri=other.as_uri())
    assert c.tool("bash", command="pwd")["content"] == str(flagged)


def test_a_prompt_answered_during_the_shutdown_grace_lets_its_call_finish(
    lsp: OpenLsp, workspace: Path
) -> None:
    """shutdown waits for the calls received before it; the answer to one's permission
    prompt, arriving after shutdown, must reach that call (it was dropped: denied)."""
    client = lsp(workspace, capabilities={"window": {"showMessage": {}}})
    arguments = {"file_path": "late.txt", "content": "allowed\n"}
    call = client.request(
        "tools/call", {"name": "write_file", "arguments": arguments, "origin": "agent"}
    )
    prompt = client.next_message(lambda m: m.get("method") == "window/showMessageRequest")
    shutdown = client.request("shutdown")
    client.send({"jsonrpc": "2.0", "id": prompt["id"], "result": {"title": "Allow"}})
    assert client.response(call)["result"] == {
        "content": "Wrote 8 characters to late.txt",
        "isError": False,
        "decision": "allowed",
    }
    assert client.response(shutdown)["result"] is None
    assert (workspace / "late.txt").read_text() == "allowed\n"
    client.notify("exit")
    assert client.wait_exit() == 0
    assert client.close() == 0
