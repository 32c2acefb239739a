"""``toold checkpoints`` and ``toold undo`` as processes: exit codes, what they print, a
forged entry refused, and an agent's command refused through the shared engine.

Spawned because these are facts about the command line (its exit status, stdout and
stderr) and about a ``toold undo`` run inside an engine's tool call; the
checkpoints/* requests themselves are tested in process (tests/interaction).
"""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def user_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's state folder (the key signing checkpoints): this test's own; every
    toold command started here inherits it."""
    folder = tmp_path / "user-state"
    monkeypatch.setenv("TOOLD_STATE_DIR", str(folder))
    return folder


def toold(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "toold", *args, "--workspace", str(workspace)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def test_undo_and_checkpoints_from_the_command_line(workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\n")
    edit = '{"file_path": "a.txt", "old_text": "one", "new_text": "two"}'
    assert toold(workspace, "call", "edit_file", edit).returncode == 0
    listed = toold(workspace, "checkpoints")
    assert listed.returncode == 0
    [line] = listed.stdout.splitlines()
    checkpoint, _, what, paths = line.split("\t")
    assert (what, paths) == ("edit_file (user)", "a.txt")
    diff = toold(workspace, "checkpoints", "diff", checkpoint)
    assert "-one\n+two\n" in diff.stdout

    (workspace / "a.txt").write_text("by hand\n")
    refused = toold(workspace, "undo")
    assert refused.returncode == 1
    assert "a.txt changed outside toold since checkpoint" in refused.stderr
    assert "nothing restored; toold undo --force" in refused.stderr
    assert (workspace / "a.txt").read_text() == "by hand\n"
    forced = toold(workspace, "undo", "--force")
    assert forced.returncode == 0 and forced.stdout.startswith("restored a.txt (redo: toold undo ")
    assert (workspace / "a.txt").read_text() == "one\n"
    again = toold(workspace, "undo")
    assert again.returncode == 1 and "nothing to undo" in again.stderr


def test_an_agents_command_cannot_undo(workspace: Path) -> None:
    """A restore writes files past the guard (toold.toml too), so a command run by a tool
    call (an agent's bash running ``toold undo``) is refused; the editor's own undo works."""
    from tests.engine.support import Engines

    engines = Engines()
    try:
        editor = engines.editor(workspace)
        (workspace / "a.txt").write_text("one\n")
        assert not editor.tool("write_file", file_path="a.txt", content="two\n")["isError"]
        inside = editor.tool("bash", command=f"{sys.executable} -m toold undo --force")
        assert "checkpoints/restore from inside a tool call" in str(inside["content"]), inside
        assert (workspace / "a.txt").read_text() == "two\n"
        editor.call("checkpoints/restore", {})
        assert (workspace / "a.txt").read_text() == "one\n"
    finally:
        engines.close()


def test_the_command_line_never_prints_a_control_character(workspace: Path) -> None:
    """A file name may hold an escape sequence; ``toold checkpoints`` and ``toold undo``
    write it escaped, so it cannot act on the user's terminal."""
    name = "a\x1b[2J\r.txt"
    write = json.dumps({"file_path": name, "content": "x"})
    assert toold(workspace, "call", "write_file", write).returncode == 0
    listed = toold(workspace, "checkpoints")
    assert listed.returncode == 0 and "a\\x1b[2J\\r.txt" in listed.stdout
    undone = toold(workspace, "undo")
    assert undone.returncode == 0 and "restored a\\x1b[2J\\r.txt" in undone.stdout
    assert not any(c in listed.stdout + undone.stdout for c in "\x1b\r")


EVIL = b"[core]\n\tfsmonitor = touch pwned\n"
FORGE = """
import hashlib, json, pathlib
store = pathlib.Path('.toold/checkpoints')
evil = {evil!r}
digest = hashlib.sha256(evil).hexdigest()
(store / 'objects' / digest).write_bytes(evil)
last = json.loads((store / 'index.jsonl').read_text().splitlines()[-1])
with (store / 'index.jsonl').open('a') as index:
    index.write(json.dumps({{'id': 'evil', 'tool': 'write_file', 'origin': 'agent',
        'time': 't', 'files': [{{'path': '.git/config', 'before': digest, 'after': None}}],
        'mac': last['mac']}}) + '\\n')
"""


def test_a_checkpoint_forged_by_a_command_is_refused_by_toold_undo(
    workspace: Path, user_state: Path
) -> None:
    """A command (here a bash tool call) writes an entry naming .git/config and its object
    into the store, with a genuine entry's MAC copied: the user's ``toold undo`` refuses
    it by name and git's configuration is untouched. On the subprocess runner, where a
    command can write the store: the bwrap and docker sandboxes make it read-only
    (tests/sandbox/test_state_records.py), and the signature is the wall behind."""
    (workspace / "toold.toml").write_text('[execution]\ntool_runner = "subprocess"\n')
    git_config = workspace / ".git" / "config"
    git_config.parent.mkdir()
    git_config.write_bytes(b"[core]\n\tbare = false\n")
    (workspace / "a.txt").write_text("one\n")
    assert (
        toold(workspace, "call", "write_file", '{"file_path": "a.txt", "content": "2"}').returncode
        == 0
    )
    forge = json.dumps({"command": f"{sys.executable} -c {shlex.quote(FORGE.format(evil=EVIL))}"})
    ran = toold(workspace, "call", "bash", forge)
    assert ran.returncode == 0, ran.stderr
    digest = hashlib.sha256(EVIL).hexdigest()
    assert (workspace / ".toold" / "checkpoints" / "objects" / digest).read_bytes() == EVIL
    refused = toold(workspace, "undo", "--force")
    assert refused.returncode == 1
    assert "checkpoint evil was not written by toold (bad signature)" in refused.stderr
    assert git_config.read_bytes() == b"[core]\n\tbare = false\n"
    assert (workspace / "a.txt").read_text() == "2"
    assert not (workspace / "pwned").exists()
    assert not any(workspace.rglob("checkpoints.key"))  # the key is not in the workspace
    assert (user_state / "checkpoints.key").stat().st_mode & 0o777 == 0o600
