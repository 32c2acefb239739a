"""A restore reports the diagnostics of the files it put back (it writes past the gateway,
so its own result carries them): ``checkpoints/restore``'s ``diagnostics`` over the wire,
and ``toold undo``'s text. ``toold checkpoints`` shows what a shell call left uncovered."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.diagnostics.conftest import UNUSED_OS
from tests.interaction.lsp_front import InProcessDaemon

HUNG = str(Path(__file__).with_name("hung_server.py"))


def codes(found: list[dict[str, Any]]) -> list[tuple[str, int, str | None]]:
    return [(d["path"], d["line"], d["code"]) for d in found]


def test_a_restore_reports_what_it_fixed_and_a_redo_what_it_brought_back(
    client: InProcessDaemon, root: Path
) -> None:
    client.tool("write_file", file_path="a.py", content="x = 1\n")
    broke = client.tool("edit_file", file_path="a.py", old_text="x = 1", new_text="import os")
    assert codes(broke["diagnostics"]["new"]) == [("a.py", 1, "F401")]
    client.tool("write_file", file_path="notes.txt", content="no server checks me\n")

    # Undo the last two calls: notes.txt goes, a.py comes back clean.
    edit_id = client.call("checkpoints/list")["checkpoints"][1]["id"]
    undone = client.call("checkpoints/restore", {"id": edit_id})
    assert sorted(undone["restored"]) == ["a.py", "notes.txt"]
    assert (root / "a.py").read_text() == "x = 1\n"
    assert undone["diagnostics"] == {
        "new": [],
        "fixed": [UNUSED_OS],
        "unchanged": 0,
        "pending": [],
        "missing": [],
    }
    # diagnostics/changed told the editors too (after the edit's own announcement).
    assert client.notification("diagnostics/changed")["params"]["diagnostics"] != []
    assert client.notification("diagnostics/changed")["params"] == {
        "path": "a.py",
        "diagnostics": [],
    }

    # Restoring the restore redoes: the unused import is new again.
    redone = client.call("checkpoints/restore", {"id": undone["checkpoint"]["id"]})
    assert codes(redone["diagnostics"]["new"]) == [("a.py", 1, "F401")]
    assert redone["diagnostics"]["fixed"] == []


def test_a_restore_of_files_no_server_checks_keeps_the_plain_result(
    client: InProcessDaemon,
) -> None:
    client.tool("write_file", file_path="notes.txt", content="one\n")
    undone = client.call("checkpoints/restore", {})
    assert undone["restored"] == ["notes.txt"] and "diagnostics" not in undone


def toold(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "toold", *args, "--workspace", str(root)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def test_toold_undo_prints_the_diagnostics_and_checkpoints_what_was_not_covered(
    root: Path,
) -> None:
    """Through real commands (the workspace's engine): ``toold undo`` ends with the
    diagnostics its restore changed; ``toold checkpoints`` shows a shell call's
    ``uncovered``, short (``--json`` has it whole)."""
    (root / ".gitignore").write_text("build/\n")
    write = json.dumps({"file_path": "a.py", "content": "import os\n"})
    assert toold(root, "call", "write_file", write).returncode == 0
    undone = toold(root, "undo")
    assert undone.returncode == 0, undone.stderr
    lines = undone.stdout.splitlines()
    assert lines[0].startswith("restored a.py (redo: toold undo ")
    assert lines[1:] == [
        "Diagnostics fixed by this change (1):",
        "  warning a.py:1:8 `os` imported but unused; help: Remove unused import: `os` [Ruff F401]",
    ]

    shell = json.dumps({"command": "mkdir -p build && echo x > build/out.o && echo y > b.txt"})
    assert toold(root, "call", "bash", shell).returncode == 0
    listed = toold(root, "checkpoints")
    assert listed.returncode == 0, listed.stderr
    newest = listed.stdout.splitlines()[0].split("\t")
    assert newest[2:] == [
        "bash (user)",
        "b.txt",
        "not covered: 1 ignored path (build/) (ignore files, skipped folders)",
    ]
    as_json = json.loads(toold(root, "checkpoints", "--json").stdout)
    assert as_json[-1]["uncovered"].startswith("undo does not cover 1 ignored path (build/)")


def test_a_hung_server_does_not_hold_a_restore_past_the_budget(root: Path) -> None:
    wait_ms = 300
    servers = {
        "ruff": {"enabled": False},
        "ty": {"enabled": False},
        # In the workspace: the default runner's sandbox (bwrap) shows it, not tests/.
        "hung": {"command": [sys.executable, str(root / "hung_server.py")], "files": ["*.py"]},
    }
    shutil.copy(HUNG, root / "hung_server.py")
    options = {"config": {"diagnostics": {"wait_ms": wait_ms, "servers": servers}}}
    client = InProcessDaemon(root)
    client.initialize(rootUri=root.as_uri(), processId=None, initializationOptions=options)
    try:
        client.tool("write_file", file_path="a.py", content="import os\n")
        started = time.monotonic()
        undone = client.call("checkpoints/restore", {})
        took = time.monotonic() - started
        assert undone["restored"] == ["a.py"] and not (root / "a.py").exists()
        assert undone["diagnostics"]["pending"] == ["a.py"], undone
        # The server would hold it for initialize's 30 s; the budget ends it.
        assert took < 10 * wait_ms / 1000, took
    finally:
        assert client.close() == 0
