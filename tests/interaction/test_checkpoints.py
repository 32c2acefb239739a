"""checkpoints/list, checkpoints/diff and checkpoints/restore over the wire, raw JSON.

Moved from tests/e2e: the same requests through the in-process daemon (lsp_front.py);
``toold undo``/``toold checkpoints`` (exit codes, what they print) stay there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.interaction.lsp_front import InProcessDaemon

CONFLICT, NOT_FOUND = -33003, -33002


@pytest.fixture(autouse=True)
def user_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's state folder (the key signing checkpoints): this test's own."""
    folder = tmp_path / "user-state"
    monkeypatch.setenv("TOOLD_STATE_DIR", str(folder))
    return folder


def error_of(client: InProcessDaemon, method: str, params: dict[str, object]) -> dict[str, object]:
    reply = client.response(client.request(method, params))
    assert "error" in reply, reply
    error: dict[str, object] = reply["error"]
    return error


def test_undo_restores_byte_for_byte_and_redo_goes_forward(
    client: InProcessDaemon, workspace: Path
) -> None:
    original = b"line one\r\nline two\n\xe2\x82\xac\n"
    (workspace / "notes.txt").write_bytes(original)
    client.tool("edit_file", file_path="notes.txt", old_text="one", new_text="ONE")
    client.tool("write_file", file_path="src/new.py", content="print('new')\n")

    listed = client.call("checkpoints/list")["checkpoints"]
    assert [(c["tool"], c["origin"], c["paths"], c["undone"]) for c in listed] == [
        ("edit_file", "user", ["notes.txt"], False),
        ("write_file", "user", ["src/new.py"], False),
    ]
    assert set(listed[0]) == {"id", "tool", "origin", "time", "paths", "undone"}
    diff = client.call("checkpoints/diff", {"id": listed[0]["id"]})["diff"]
    assert "-line one\r\n+line ONE\r\n" in diff
    assert "--- /dev/null\n+++ b/src/new.py\n" in diff

    undone = client.call("checkpoints/restore", {"id": listed[0]["id"]})
    assert sorted(undone["restored"]) == ["notes.txt", "src/new.py"]
    assert undone["checkpoint"]["restores"] == listed[0]["id"]
    assert (workspace / "notes.txt").read_bytes() == original
    assert not (workspace / "src" / "new.py").exists()

    client.call("checkpoints/restore", {"id": undone["checkpoint"]["id"]})  # redo
    assert b"line ONE" in (workspace / "notes.txt").read_bytes()
    assert (workspace / "src" / "new.py").read_text() == "print('new')\n"


def test_restore_without_an_id_undoes_the_last_call(
    client: InProcessDaemon, workspace: Path
) -> None:
    client.tool("write_file", file_path="a.txt", content="1")
    client.tool("write_file", file_path="a.txt", content="2")
    client.call("checkpoints/restore", {})
    assert (workspace / "a.txt").read_text() == "1"
    client.call("checkpoints/restore", {})
    assert not (workspace / "a.txt").exists()
    error = error_of(client, "checkpoints/restore", {})
    assert error["code"] == NOT_FOUND
    assert "nothing to undo" in str(error["message"])


def test_a_file_changed_outside_toold_is_a_conflict_naming_it(
    client: InProcessDaemon, workspace: Path
) -> None:
    client.tool("write_file", file_path="a.txt", content="from the agent")
    [checkpoint] = client.call("checkpoints/list")["checkpoints"]
    (workspace / "a.txt").write_text("typed by hand since")
    error = error_of(client, "checkpoints/restore", {"id": checkpoint["id"]})
    assert error["code"] == CONFLICT
    assert error["data"] == {"paths": ["a.txt"]}
    assert "pass force" in str(error["message"])
    assert (workspace / "a.txt").read_text() == "typed by hand since"
    client.call("checkpoints/restore", {"id": checkpoint["id"], "force": True})
    assert not (workspace / "a.txt").exists()


def test_unknown_ids_and_bad_params_are_named(client: InProcessDaemon) -> None:
    error = error_of(client, "checkpoints/diff", {"id": "nope"})
    assert error["code"] == NOT_FOUND and "no checkpoint nope" in str(error["message"])
    error = error_of(client, "checkpoints/diff", {})
    assert error["code"] == -32602 and "id" in str(error["message"])


def test_restoring_toold_toml_is_a_conflict_unless_forced(
    client: InProcessDaemon, workspace: Path
) -> None:
    client.tool("write_file", file_path="toold.toml", content="# mine\n")
    error = error_of(client, "checkpoints/restore", {})
    assert error["code"] == CONFLICT and error["data"] == {"paths": ["toold.toml"]}
    assert "toold's own configuration" in str(error["message"])
    assert (workspace / "toold.toml").read_text() == "# mine\n"
    client.call("checkpoints/restore", {"force": True})
    assert not (workspace / "toold.toml").exists()
