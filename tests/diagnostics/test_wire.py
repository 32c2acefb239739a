"""Over LSP framing: tools/call's diagnostics field, diagnostics/get, diagnostics/changed and
the diagnostics tool, as raw wire JSON (in process: the daemon's own server and framing)."""

from __future__ import annotations

from pathlib import Path

from tests.diagnostics.conftest import UNUSED_OS
from tests.interaction.lsp_front import InProcessDaemon


def test_tools_call_carries_the_new_diagnostics(client: InProcessDaemon) -> None:
    result = client.tool("write_file", file_path="a.py", content="import os\n")
    assert result["isError"] is False
    assert result["diagnostics"] == {
        "new": [UNUSED_OS],
        "fixed": [],
        "unchanged": 0,
        "pending": [],
        "missing": [],
    }
    assert "warning a.py:1:8 `os` imported but unused" in result["content"]
    plain = client.tool("write_file", file_path="notes.txt", content="hi\n")
    assert "diagnostics" not in plain  # no server checks it: the plain result
    # A clean file, new or rewritten clean, keeps the plain result too.
    clean = client.tool("write_file", file_path="c.py", content="x = 1\n")
    assert clean == {"content": "Wrote 6 characters to c.py", "isError": False}
    again = client.tool("write_file", file_path="c.py", content="x = 2\n")
    assert again == {"content": "Wrote 6 characters to c.py", "isError": False}


def test_diagnostics_get_and_changed(client: InProcessDaemon, root: Path) -> None:
    (root / "pkg").mkdir()
    (root / "pkg" / "m.py").write_text("import re\n")
    everything = client.call("diagnostics/get", {})
    assert [(d["path"], d["code"]) for d in everything["diagnostics"]] == [("pkg/m.py", "F401")]
    assert everything["checked"] == 1 and everything["pending"] == []
    # The first look is a change too (from nothing known); then the fix empties the list.
    first = client.notification("diagnostics/changed")["params"]
    assert first == {"path": "pkg/m.py", "diagnostics": everything["diagnostics"]}
    client.tool("edit_file", file_path="pkg/m.py", old_text="import re\n", new_text="x = 1\n")
    changed = client.notification("diagnostics/changed")["params"]
    assert changed == {"path": "pkg/m.py", "diagnostics": []}
    one = client.call("diagnostics/get", {"path": "pkg/m.py"})
    assert one == {"diagnostics": [], "pending": [], "checked": 1}
    outside = client.response(client.request("diagnostics/get", {"path": "../x.py"}))
    assert outside["error"]["code"] == -32602 and "path" in outside["error"]["message"]


def test_the_diagnostics_tool(client: InProcessDaemon, root: Path) -> None:
    (root / "b.py").write_text("import sys\n")
    result = client.tool("diagnostics", path="b.py")
    assert result["isError"] is False
    assert result["content"] == (
        "1 diagnostics in 1 files checked (b.py):\n"
        "warning b.py:1:8 `sys` imported but unused; help: Remove unused import: `sys` "
        "[Ruff F401]"
    )
    assert client.tool("diagnostics", path="ruff.toml")["content"] == (
        "No file in ruff.toml is checked by a language server."
    )


def test_changed_reaches_a_session_that_never_asked(client: InProcessDaemon) -> None:
    """bind wires diagnostics/changed to the workspace's sessions: no diagnostics/get first."""
    client.tool("write_file", file_path="d.py", content="import json\n")
    changed = client.notification("diagnostics/changed")["params"]
    assert changed["path"] == "d.py"
    assert [d["code"] for d in changed["diagnostics"]] == ["F401"]
