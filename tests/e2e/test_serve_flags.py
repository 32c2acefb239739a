"""``toold serve`` under an LSP client's launch convention: --stdio and --clientProcessId.

Spawned because these are command-line flags, the exit status, and a watched editor
process that dies.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.wire import WireClient


def _editor() -> subprocess.Popen[bytes]:
    """A stand-in for the editor process the daemon should outlive no longer."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])


@pytest.mark.parametrize("form", ["equals", "separate"])
def test_stdio_and_client_process_id_are_accepted_and_watched(workspace: Path, form: str) -> None:
    """LSP clients append ``--stdio`` and ``--clientProcessId=N``; the daemon serves,
    then exits when process N dies, even though initialize named no processId."""
    editor = _editor()
    flag = (
        [f"--clientProcessId={editor.pid}"]
        if form == "equals"
        else ["--clientProcessId", str(editor.pid)]
    )
    c = WireClient(workspace, "--stdio", *flag)
    try:
        c.initialize()
        assert c.tool("read_file", file_path="src/main.py")["content"] == "1: print('needle')"
        assert c.proc.poll() is None
        editor.kill()
        editor.wait()
        assert c.proc.wait(timeout=20) == 0
    finally:
        editor.kill()
        c.close()


def test_client_process_id_that_is_already_gone_stops_the_daemon(workspace: Path) -> None:
    editor = _editor()
    editor.kill()
    editor.wait()
    c = WireClient(workspace, "--stdio", f"--clientProcessId={editor.pid}")
    try:
        assert c.proc.wait(timeout=20) == 0
    finally:
        c.close()


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["--pipe=/tmp/x"], "unrecognized arguments: --pipe=/tmp/x"),
        (["--clientProcessId=abc"], "argument --clientProcessId: invalid int value: 'abc'"),
        (["--stdio", "--socket=9000"], "unrecognized arguments: --socket=9000"),
    ],
)
def test_other_arguments_are_refused(workspace: Path, args: list[str], complaint: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toold", "serve", *args],
        cwd=workspace,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert complaint in done.stderr
    assert done.stdout == ""
