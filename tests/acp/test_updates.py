"""ACP kinds and titles of toold's tools, from their own annotations (no process)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toold.acp.calls import TurnEvents
from toold.acp.mcp_servers import tool_name
from toold.acp.updates import SHOWN_CHARS, locations, plan_entries, tool_kind, tool_title
from toold.tools.annotations import ToolAnnotations
from toold.tools.registry import BuiltinToolProvider
from toold.tools.toolset import ToolSet

EXPECTED = {
    "bash": "execute",
    "background_run": "execute",
    "python_repl": "execute",
    "read_file": "read",
    "file_info": "read",
    "write_file": "edit",
    "edit_file": "edit",
    "str_replace": "edit",
    "grep": "search",
    "glob": "search",
    "list_dir": "search",
    "http_request": "fetch",
    "duckduckgo_search": "fetch",
    "todo_write": "think",
    "todo_read": "think",
}


def test_every_builtin_has_the_kind_its_annotations_say() -> None:
    classes = BuiltinToolProvider.tool_classes()
    kinds = {name: tool_kind(name, classes[name].annotations) for name in EXPECTED}
    assert kinds == EXPECTED
    assert all(tool_kind(n, c.annotations) for n, c in classes.items())


def test_unannotated_tools_are_other_unless_their_name_says_more() -> None:
    unknown = ToolAnnotations()
    assert tool_kind("notes__add_note", unknown) == "other"
    assert tool_kind("fs__delete_file", unknown) == "delete"
    assert tool_kind("fs__move_file", unknown) == "move"
    reads = ToolAnnotations(read_only=True, open_world=False)
    assert tool_kind("fs__delete_file", reads) == "read"


def test_titles_locations_and_names(tmp_path: Path) -> None:
    assert tool_title("bash", {"command": "make test\nmake lint"}, shell=True) == "Run `make test`…"
    assert tool_title("grep", {"pattern": "TODO"}) == "Grep 'TODO'"
    assert tool_title("read_file", {"file_path": "a.py"}) == "Read file a.py"
    shown = [loc.model_dump(exclude_none=True) for loc in locations(tmp_path, {"path": "a.py"})]
    assert shown == [{"path": str(tmp_path / "a.py")}]
    line = locations(tmp_path, {"file_path": "/abs/b.py", "offset": 3})[0]
    assert (line.path, line.line) == ("/abs/b.py", 3)
    assert tool_name("my server", "do.it") == "my_server__do_it"
    assert len(tool_name("s" * 80, "t")) == 64


def test_todos_become_plan_entries() -> None:
    entries = plan_entries(
        [
            {"id": "t1", "task": "a", "status": "done", "priority": "high"},
            {"id": "t2", "task": "b", "status": "in_progress", "priority": "normal"},
        ]
    )
    assert [e.model_dump(exclude_none=True) for e in entries] == [
        {"content": "a", "priority": "high", "status": "completed"},
        {"content": "b", "priority": "medium", "status": "in_progress"},
    ]


def test_only_a_shell_is_titled_run() -> None:
    # An MCP server's tool named like toold's shell, or any tool with a command argument,
    # is shown under its own name: a permission prompt never passes it off as toold's bash.
    assert tool_title("evil__bash", {"command": "ls"}) == "Evil: bash 'ls'"
    assert tool_title("bash", {"command": "ls"}) == "Bash 'ls'"


def test_a_commands_output_is_kept_only_as_far_as_it_is_shown(tmp_path: Path) -> None:
    class Sent(list[Any]):
        def put(self, update: Any) -> None:
            self.append(update)

    sent = Sent()
    events = TurnEvents(tmp_path, ToolSet([]), sent)
    events.tool_started("call-1", "bash", {"command": "yes"})
    for n in range(2000):
        events.tool_progress("call-1", f"line {n} " + "y" * 100)
    assert len(events.open["call-1"].output) == SHOWN_CHARS + 1
    shown = sent[-1].content[0].content.text
    assert shown.startswith("…") and shown.endswith("line 1999 " + "y" * 100 + "\n")


def test_raw_output_carries_an_edits_diagnostics() -> None:
    from toold.acp.calls import raw_output
    from toold.outcome import ToolOutcome
    from toold_protocol.models import Diagnostic, DiagnosticsDelta

    plain = ToolOutcome("Wrote 3 characters to a.py", False)
    assert raw_output(plain) == "Wrote 3 characters to a.py"
    found = Diagnostic(path="a.py", line=1, column=8, severity="warning", message="unused")
    checked = ToolOutcome("Wrote 10 characters to a.py", False)
    checked.diagnostics = DiagnosticsDelta(new=[found], unchanged=2)
    raw = raw_output(checked)
    assert raw["content"] == "Wrote 10 characters to a.py"
    assert raw["diagnostics"]["new"] == [
        {"path": "a.py", "line": 1, "column": 8, "severity": "warning", "message": "unused"}
    ]
    assert raw["diagnostics"]["unchanged"] == 2
