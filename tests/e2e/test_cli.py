"""The command line, as people and CI scripts use it.

Spawned because what is checked is the process: ``toold tools``/``toold call``'s exit
status, what goes to stdout and stderr, arguments read from stdin, a reader that closes
the pipe early (SIGPIPE). What a tool call does is tested in process (tests/interaction).
"""

from __future__ import annotations

import fcntl
import json
import os
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
    # A list prints one item a line (grep, glob), so it pipes into other tools.
    assert grep.stdout.splitlines() == [
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
    typo = toold("call", "gerp", '{"pattern": "x"}', cwd=workspace)
    assert typo.returncode == 2
    assert (
        typo.stderr.strip() == "toold: Unknown tool: gerp; did you mean 'grep'? see `toold tools`"
    )
    bad_json = toold("call", "grep", "{not json", cwd=workspace)
    assert bad_json.returncode == 2
    assert "not valid JSON" in bad_json.stderr


def test_call_json_prints_whole_result(workspace: Path) -> None:
    done = toold("call", "bash", '{"command": "echo hi"}', "--json", cwd=workspace)
    assert json.loads(done.stdout) == {"content": "hi", "isError": False, "exitCode": 0}


def test_call_error_text_of_a_tool_exits_non_zero(workspace: Path) -> None:
    done = toold("call", "calculator", '{"input": "1/0"}', "--json", cwd=workspace)
    assert done.returncode == 1
    assert json.loads(done.stdout) == {"content": "Error: division by zero", "isError": True}
    plain = toold("call", "calculator", '{"input": "1/0"}', cwd=workspace)
    assert plain.returncode == 1
    assert plain.stderr.strip() == "toold: calculator failed: Error: division by zero"


def _read_one_line_then_close(argv: list[str], cwd: Path) -> tuple[int, str]:
    """Run ``argv`` with its stdout on a real pipe whose reader stops after one line
    (``| head -1``); return its exit status and stderr.

    The pipe holds one page (F_SETPIPE_SZ), so any longer output is still being written
    when the reader closes it: the writer meets the closed pipe every time.
    """
    read_fd, write_fd = os.pipe()
    fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, 4096)
    proc = subprocess.Popen(argv, cwd=cwd, stdout=write_fd, stderr=subprocess.PIPE)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb", buffering=0) as reader:
        first = reader.read(1)
        while first and not first.endswith(b"\n"):
            first += reader.read(1)
    assert first, "no output at all"
    assert proc.stderr is not None
    stderr = proc.stderr.read().decode()
    proc.stderr.close()
    return proc.wait(timeout=60), stderr


def test_a_reader_that_stops_early_ends_the_command_quietly(workspace: Path) -> None:
    for i in range(50):
        (workspace / "src" / f"f{i}.txt").write_text("needle\n" * 5, encoding="utf-8")
    for args in (["call", "grep", '{"pattern": "needle"}'], ["tools", "--json"]):
        status, stderr = _read_one_line_then_close(
            [sys.executable, "-m", "toold", *args], workspace
        )
        assert stderr == "", stderr  # no BrokenPipeError traceback
        assert status == 141, (args, status)  # 128 + SIGPIPE, as a shell reports `yes | head`


def test_what_the_daemon_shows_reaches_the_terminal_without_control_characters(
    workspace: Path,
) -> None:
    """A toold.toml key spelled with an escape sequence and a bidirectional override (a
    workspace is untrusted): the error toold call prints names it escaped, through the
    engine (the message it shows) and a private daemon (its log on stderr) alike."""
    (workspace / "toold.toml").write_text(
        '[execution]\n"\\u001b]52;c;cHduZWQ=\\u0007x\\u202e" = 1\n'
    )
    for private in ([], ["--no-daemon"]):
        done = toold("call", "read_file", '{"file_path": "toold.toml"}', *private, cwd=workspace)
        assert "toold.toml is invalid" in done.stderr, done.stderr
        assert "\\x1b]52;c;cHduZWQ=\\x07x\\u202e" in done.stderr, done.stderr
        assert not any(c in done.stderr for c in "\x1b\x07\u202e"), repr(done.stderr)
