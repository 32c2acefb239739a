"""The engine's files and socket under attack from processes of the same user (an agent's
command can reach the runtime folder): nothing is written through a planted symlink."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine.support import Engines, live_engines
from tests.waiting import wait_until
from toold.engine.engine import LOG_LIMIT


def _key(workspace: Path) -> str:
    return hashlib.sha256(os.fsencode(os.path.realpath(workspace))).hexdigest()[:20]


@pytest.mark.parametrize("suffix", [".pid", ".start.lock", ".log"])
def test_a_symlink_planted_for_an_engine_file_is_never_written_through(
    engines: Engines, workspace: Path, tmp_path: Path, suffix: str
) -> None:
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me\n")
    planted = engines.runtime / f"{_key(workspace)}{suffix}"
    planted.symlink_to(victim)
    done = engines.toold("call", "todo_read", cwd=workspace)
    assert victim.read_text() == "keep me\n"
    if suffix == ".log":  # the last engine's log is set aside (the link itself moved)
        assert done.returncode == 0, done.stderr
        assert (engines.runtime / f"{_key(workspace)}.log.1").is_symlink()
        assert not planted.is_symlink()
    else:
        assert done.returncode != 0
        assert "remove it" in done.stderr and str(planted) in done.stderr, done.stderr
        assert live_engines(engines.runtime) == []


def test_a_dangling_symlink_for_the_lock_creates_nothing(
    engines: Engines, workspace: Path, tmp_path: Path
) -> None:
    target = tmp_path / "created-by-engine"
    (engines.runtime / f"{_key(workspace)}.start.lock").symlink_to(target)
    done = engines.toold("call", "todo_read", cwd=workspace)
    assert done.returncode != 0 and not target.exists()


def test_a_log_past_its_limit_is_set_aside(engines: Engines, workspace: Path) -> None:
    (workspace / "toold.toml").write_text("[daemon]\nidle_timeout = 0.4\n")  # checks often
    editor = engines.editor(workspace)  # attached: the engine stays up
    log = engines.runtime / f"{_key(workspace)}.log"
    with log.open("ab") as flood:  # what weeks of sessions add up to
        flood.write(b"x" * (LOG_LIMIT + 1))
    old = engines.runtime / f"{_key(workspace)}.log.1"
    wait_until(lambda: old.exists() and old.stat().st_size > LOG_LIMIT, "the log set aside")
    assert engines.toold("call", "todo_read", cwd=workspace).returncode == 0
    assert 0 < log.stat().st_size < LOG_LIMIT
    assert "attached" in log.read_text()
    editor.close()


_IMPOSTOR = """
import json, os, socket, sys
server = socket.socket(socket.AF_UNIX)
server.bind(sys.argv[1])
server.listen(4)
print("listening", flush=True)
while True:
    conn, _ = server.accept()
    heard = conn.recv(1 << 16)
    sys.stdout.write("heard " + heard.decode(errors="replace").splitlines()[0] + "\\n")
    sys.stdout.flush()
    conn.sendall(json.dumps({"ok": True, "pid": os.getpid(), "session": 1}).encode() + b"\\n")
"""


def test_a_socket_another_user_planted_is_never_spoken_to(
    engines: Engines, workspace: Path
) -> None:
    """A runtime folder once open to others may hold another user's socket under the
    engine's name: a client that said hello to it would hand it its calls (and with
    toold serve, its stdio). The client checks who listens before saying anything."""
    engines.runtime.chmod(0o777)
    socket_path = engines.runtime / f"{_key(workspace)}.sock"
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    impostor = subprocess.Popen(
        [python, "-I", "-c", _IMPOSTOR, str(socket_path)],
        user=65534,
        group=65534,
        extra_groups=[],
        stdout=subprocess.PIPE,
        text=True,
        cwd="/",
    )
    try:
        assert impostor.stdout is not None
        assert impostor.stdout.readline() == "listening\n"
        done = engines.toold("call", "todo_read", cwd=workspace)
        assert done.returncode != 0
        assert "uid 65534" in done.stderr and str(socket_path) in done.stderr, done.stderr
    finally:
        impostor.kill()
        out, _ = impostor.communicate(timeout=30)
    assert "heard" not in out
