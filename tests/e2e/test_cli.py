"""The command line, as people and CI scripts use it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def toold(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toold", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_tools_lists_names_and_formats(workspace: Path) -> None:
    plain = toold("tools", cwd=workspace)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.splitlines()[0].startswith("bash ")
    openai = toold("tools", "--format", "openai", cwd=workspace)
    tools = json.loads(openai.stdout)
    assert tools[0]["type"] == "function" and tools[0]["function"]["name"] == "bash"


def test_call_prints_text_or_json(workspace: Path) -> None:
    grep = toold("call", "grep", '{"pattern": "needle"}', cwd=workspace)
    assert grep.returncode == 0, grep.stderr
    assert json.loads(grep.stdout) == [
        "src/helper.txt:1:needle line",
        "src/main.py:1:print('needle')",
    ]
    read = toold("call", "read_file", '{"file_path": "src/main.py"}', cwd=workspace)
    assert read.stdout == "1: print('needle')\n"


def test_call_reads_arguments_from_stdin(workspace: Path) -> None:
    done = toold(
        "call", "write_file", "-", cwd=workspace, stdin='{"file_path": "x.txt", "content": "hi"}'
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Wrote 2 characters to x.txt"
    assert (workspace / "x.txt").read_text() == "hi"


def test_call_uses_workspace_flag(workspace: Path, tmp_path: Path) -> None:
    done = toold("call", "bash", '{"command": "pwd"}', "--workspace", str(workspace), cwd=tmp_path)
    assert done.stdout.strip() == str(workspace)


def test_call_failures_exit_non_zero_with_reason(workspace: Path) -> None:
    failed = toold(
        "call",
        "edit_file",
        '{"file_path": "src/main.py", "old_text": "zz", "new_text": "y"}',
        cwd=workspace,
    )
    assert failed.returncode == 1
    assert "old_text not found in file" in failed.stderr
    bash = toold("call", "bash", '{"command": "exit 4"}', cwd=workspace)
    assert bash.returncode == 1
    assert "Command failed with exit code 4" in bash.stderr
    unknown = toold("call", "nope", cwd=workspace)
    assert unknown.returncode == 2
    assert "Unknown tool: nope" in unknown.stderr
    bad_json = toold("call", "grep", "{not json", cwd=workspace)
    assert bad_json.returncode == 2
    assert "not valid JSON" in bad_json.stderr


def test_call_json_prints_whole_result(workspace: Path) -> None:
    done = toold("call", "bash", '{"command": "echo hi"}', "--json", cwd=workspace)
    assert json.loads(done.stdout) == {"content": "hi", "isError": False, "exitCode": 0}
