"""Edits an agent cannot botch, over the wire (raw JSON): multi_edit and apply_patch all or
nothing, dry runs, the stale-file guard, and the diff a permission prompt carries.

Moved from tests/e2e: the same calls and prompts through the in-process daemon's own
session and transport (lsp_front.py); the test answers the daemon's prompts itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.interaction.conftest import OpenLsp
from tests.interaction.lsp_front import InProcessDaemon

ASK = "window/showMessageRequest"
PREVIEW = "permissions/preview"


def agent(client: InProcessDaemon, name: str, **arguments: Any) -> dict[str, Any]:
    """tools/call as the agent (origin "agent": the guard and the stale-file guard apply)."""
    return client.tool(name, origin="agent", **arguments)


@pytest.fixture
def bypass(lsp: OpenLsp, workspace: Path) -> InProcessDaemon:
    """A daemon whose guard lets the agent's calls run unasked (bypass mode)."""
    (workspace / "toold.toml").write_text('[permissions]\nmode = "bypass"\n')
    return lsp(workspace)


def asking(lsp: OpenLsp, workspace: Path, diff_preview: bool) -> InProcessDaemon:
    """A daemon in default mode whose client can answer prompts (and maybe show diffs)."""
    capabilities: dict[str, Any] = {"window": {"showMessage": {}}}
    if diff_preview:
        capabilities["experimental"] = {"toold": {"diffPreview": True}}
    return lsp(workspace, capabilities=capabilities)


def test_a_botched_multi_edit_changes_nothing(bypass: InProcessDaemon, workspace: Path) -> None:
    (workspace / "m.py").write_text("a = 1\nb = 2\n")
    agent(bypass, "read_file", file_path="m.py")
    edits = [
        {"old_text": "a = 1", "new_text": "a = 10"},
        {"old_text": "b = 2", "new_text": "b = 20"},
        {"old_text": "c = 3", "new_text": "c = 30"},
    ]
    result = agent(bypass, "multi_edit", file_path="m.py", edits=edits)
    assert result["isError"] is True
    assert result["content"].startswith("Error: ValueError: edits[2]: old_text not found in m.py")
    assert (workspace / "m.py").read_text() == "a = 1\nb = 2\n"
    done = agent(bypass, "multi_edit", file_path="m.py", edits=edits[:2])
    assert done == {"content": "Applied 2 edits to m.py", "isError": False}
    assert (workspace / "m.py").read_text() == "a = 10\nb = 20\n"


def test_an_outside_change_between_read_and_edit_is_caught(
    bypass: InProcessDaemon, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("one\n")
    unread = agent(bypass, "edit_file", file_path="a.txt", old_text="one", new_text="1")
    assert unread["isError"] and "has not been read in this session" in unread["content"]
    agent(bypass, "read_file", file_path="a.txt")
    (workspace / "a.txt").write_text("one, typed in the editor\n")
    stale = agent(bypass, "edit_file", file_path="a.txt", old_text="one", new_text="1")
    assert stale == {
        "content": "Error: FileChangedError: a.txt changed since it was last read; "
        "read it again before editing",
        "isError": True,
        "decision": "refused",
    }
    assert (workspace / "a.txt").read_text() == "one, typed in the editor\n"
    agent(bypass, "read_file", file_path="a.txt")
    fresh = agent(bypass, "edit_file", file_path="a.txt", old_text="one", new_text="1")
    assert fresh == {"content": "Edited a.txt", "isError": False}


def test_apply_patch_across_files_is_all_or_nothing(
    bypass: InProcessDaemon, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("one\ntwo\n")
    (workspace / "b.txt").write_text("red\nblue\n")
    for name in ("a.txt", "b.txt"):
        agent(bypass, "read_file", file_path=name)
    good_a = "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n"
    bad_b = "--- a/b.txt\n+++ b/b.txt\n@@ -1,2 +1,2 @@\n red\n-green\n+GREEN\n"
    new_c = "--- /dev/null\n+++ b/c/new.txt\n@@ -0,0 +1 @@\n+made\n"
    failed = agent(bypass, "apply_patch", patch=good_a + new_c + bad_b)
    assert failed["isError"] is True
    assert failed["content"] == (
        "Error: ValueError: b/b.txt hunk 1 (@@ -1,2 +1,2 @@): removed line does not match "
        "line 2; read the file again and make the patch from its current text"
    )
    assert (workspace / "a.txt").read_text() == "one\ntwo\n"
    assert not (workspace / "c").exists()
    good_b = bad_b.replace("-green", "-blue")
    applied = agent(bypass, "apply_patch", patch=good_a + new_c + good_b)
    assert applied["content"] == "Applied patch: modified a.txt, created c/new.txt, modified b.txt"
    assert (workspace / "a.txt").read_text() == "one\nTWO\n"
    assert (workspace / "b.txt").read_text() == "red\nGREEN\n"
    assert (workspace / "c" / "new.txt").read_text() == "made\n"
    unparsable = agent(bypass, "apply_patch", patch="--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1 @@\n-x\n")
    assert unparsable["isError"] and "cannot parse the patch" in unparsable["content"]


def test_a_dry_run_changes_nothing_and_needs_no_permission(
    client: InProcessDaemon, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("one\n")
    # Default mode, and this client cannot answer prompts: a write would be refused.
    refused = agent(client, "write_file", file_path="n.txt", content="x")
    assert refused == {"content": "User denied.", "isError": True, "decision": "denied_by_rule"}
    diff = agent(
        client, "edit_file", file_path="a.txt", old_text="one", new_text="two", dry_run=True
    )
    assert diff == {
        "content": "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n",
        "isError": False,
    }
    patch = "--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1 @@\n+x\n"
    assert "+++ b/n.txt" in agent(client, "apply_patch", patch=patch, dry_run=True)["content"]
    assert (workspace / "a.txt").read_text() == "one\n" and not (workspace / "n.txt").exists()
    assert client.call("checkpoints/list")["checkpoints"] == []


def answer(client: InProcessDaemon, prompt: dict[str, Any], title: str) -> None:
    client.send({"jsonrpc": "2.0", "id": prompt["id"], "result": {"title": title}})


def test_a_client_that_shows_diffs_gets_the_preview_before_the_prompt(
    lsp: OpenLsp, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("one\n")
    client = asking(lsp, workspace, diff_preview=True)
    patch = (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n"
        "--- /dev/null\n+++ b/b.txt\n@@ -0,0 +1 @@\n+new\n"
    )
    agent(client, "read_file", file_path="a.txt")
    call = client.request(
        "tools/call", {"name": "apply_patch", "arguments": {"patch": patch}, "origin": "agent"}
    )
    first = client.next_message(lambda m: m.get("method") in (PREVIEW, ASK))
    assert first["method"] == PREVIEW and "id" not in first
    assert first["params"] == {
        "tool": "apply_patch",
        "reason": "apply_patch always asks",
        "diff": "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n"
        "--- /dev/null\n+++ b/b.txt\n@@ -0,0 +1 @@\n+new\n",
        "files": [
            {"path": "a.txt", "original": "one\n", "modified": "two\n"},
            {"path": "b.txt", "original": None, "modified": "new\n"},
        ],
    }
    prompt = client.next_message(lambda m: m.get("method") == ASK)
    # The diff went to the diff editor: the message ends with the question.
    assert prompt["params"]["message"].endswith("(apply_patch always asks). Allow it?")
    answer(client, prompt, "Deny")
    denied = {"content": "User denied.", "isError": True, "decision": "denied_by_user"}
    assert client.response(call)["result"] == denied
    assert (workspace / "a.txt").read_text() == "one\n" and not (workspace / "b.txt").exists()


def test_a_client_without_it_gets_the_capped_diff_in_the_message(
    lsp: OpenLsp, workspace: Path
) -> None:
    (workspace / "big.txt").write_text("".join(f"old line {i}\n" for i in range(400)))
    client = asking(lsp, workspace, diff_preview=False)
    agent(client, "read_file", file_path="big.txt")
    arguments = {"file_path": "big.txt", "content": "short\n"}
    call = client.request(
        "tools/call", {"name": "write_file", "arguments": arguments, "origin": "agent"}
    )
    prompt = client.next_message(lambda m: m.get("method") in (PREVIEW, ASK))
    assert prompt["method"] == ASK
    message = prompt["params"]["message"]
    head, diff = message.split("\n\n", 1)
    assert head.startswith("toold: the agent wants to run write_file")
    assert diff.startswith("--- a/big.txt\n+++ b/big.txt\n@@ -1,400 +1 @@\n-old line 0\n")
    body, marker = diff.rsplit("\n", 1)
    full = sum(len(f"-old line {i}\n") for i in range(400)) + len("+short\n")
    full += len("--- a/big.txt\n+++ b/big.txt\n@@ -1,400 +1 @@\n")
    assert len(body) == 4000 and marker == f"... ({full - 4000} more characters)"
    answer(client, prompt, "Allow")
    assert client.response(call)["result"]["isError"] is False
    assert (workspace / "big.txt").read_text() == "short\n"
