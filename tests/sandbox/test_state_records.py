"""toold's records in .toold (the audit log, checkpoints, jobs, ACP sessions' history) are
read-only inside the bwrap and docker sandboxes, and .toold cannot be moved, removed or
replaced: every generated spelling of a write, a truncation, a removal, a rename, a link
or a plant leaves them as toold wrote them, while the rest of .toold (a cut call's
output, skills) stays writable. Through a real daemon on the runner."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.sandbox.conftest import Daemon

MARK = b"FORGED"
"""What every attack writes: spelled in the shell as M, so no command (nor its audit line)
holds it."""
SET_MARK = "M=$(printf 'F%sD' ORGE); "
WRITES = [
    'printf "$M" >> {t}',
    'printf "$M" > {t}',
    'printf "$M" | tee -a {t} >/dev/null',
    'python3 -c \'import sys; open(sys.argv[1], "a").write(sys.argv[2])\' {t} "$M"',
    "cp /dev/null {t}",
    "rm -rf {t}",
    "mv {t} {t}.moved",
    "ln -sf /tmp {t}",
]
TARGETS = [
    ".toold/audit.jsonl",
    "$PWD/.toold/checkpoints/index.jsonl",
    ".toold/checkpoints/objects",
    ".toold/jobs/planted.json",
    ".toold/sessions/planted.json",
    "./.toold/../.toold/jobs",
]
WHOLE = [
    'mv .toold .old && mkdir .toold && printf "$M" > .toold/audit.jsonl',
    'rm -rf .toold; mkdir -p .toold/sessions && printf "$M" > .toold/sessions/s.json',
    'find .toold/checkpoints .toold/jobs -type f -exec sh -c \'printf "$0" > "$1"\' "$M" {} \\;',
    'cd .toold && printf "$M" > audit.jsonl; cd checkpoints && ln -s /etc/passwd planted',
]
ATTACKS = [w.format(t=t) for w, t in itertools.product(WRITES, TARGETS)] + WHOLE
RECORDS = ("audit.jsonl", "checkpoints", "jobs", "sessions")


def _records(workspace: Path) -> dict[str, bytes]:
    """Every record file toold keeps, by path under .toold, with its bytes."""
    state = workspace / ".toold"
    found: dict[str, bytes] = {}
    for name in RECORDS:
        path = state / name
        files = [path] if path.is_file() else [p for p in path.rglob("*") if not p.is_dir()]
        for file in files:
            assert not file.is_symlink(), file
            found[str(file.relative_to(state))] = file.read_bytes()
    return found


def _unchanged(before: dict[str, bytes], after: dict[str, bytes], attack: str) -> None:
    """Nothing toold wrote is gone or rewritten (toold itself only appends, or adds new
    records), and no record holds the mark."""
    for name, content in before.items():
        assert name in after, (attack, name)
        assert after[name].startswith(content), (attack, name)
    for name, content in after.items():
        assert MARK not in content, (attack, name)
        assert "planted" not in name and not name.endswith(".moved"), (attack, name)


def _attack(daemon: Daemon, runner: str, workspace: Path, one_call: bool) -> None:
    client = daemon(runner)
    wrote = client.tool("write_file", file_path="a.txt", content="first")  # a checkpoint
    assert wrote["isError"] is False, wrote
    state = os.stat(workspace / ".toold")
    before = _records(workspace)
    assert any(name.startswith("checkpoints/objects/") for name in before), before
    for attack in [" ; ".join(ATTACKS)] if one_call else ATTACKS:
        client.tool("bash", command=SET_MARK + attack)
        after = _records(workspace)
        _unchanged(before, after, attack)
        assert os.stat(workspace / ".toold").st_ino == state.st_ino, attack
        assert not (workspace / ".old").exists(), attack
        before = after
    # What is not a record stays writable, and toold still records and undoes.
    skill = "mkdir -p .toold/skills/x && echo ok > .toold/skills/x/SKILL.md && echo wrote"
    assert "wrote" in client.tool("bash", command=skill)["content"]
    refused = client.tool("bash", command="echo x >> .toold/audit.jsonl")["content"]
    assert "Read-only file system" in refused and "only toold writes them" in refused, refused
    assert client.tool("write_file", file_path="a.txt", content="second")["isError"] is False
    restored = client.call("checkpoints/restore", {})  # the last call: the second write
    assert restored["restored"] == ["a.txt"], restored
    assert (workspace / "a.txt").read_text() == "first"


@pytest.mark.usefixtures("bwrap_ready")
def test_records_are_read_only_in_bwrap(daemon: Daemon, workspace: Path) -> None:
    _attack(daemon, "bwrap", workspace, one_call=False)


@pytest.mark.usefixtures("docker_ready")
def test_records_are_read_only_in_docker(daemon: Daemon, workspace: Path) -> None:
    _attack(daemon, "docker", workspace, one_call=True)


def _replaced_on_the_host(daemon: Daemon, runner: str, workspace: Path) -> None:
    """The user replaces what the sandbox protects (the audit log rotated, .toold removed,
    ``git init`` again): a bind holds the file it was made on, so the next call must get a
    fresh sandbox whose binds hold the new ones."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    client = daemon(runner)
    assert client.tool("bash", command="echo warm")["content"].strip() == "warm"
    state = workspace / ".toold"

    (state / "audit.jsonl").rename(state / "audit.jsonl.1")
    client.tool("bash", command=SET_MARK + 'printf "$M" >> .toold/audit.jsonl')
    assert MARK not in (state / "audit.jsonl").read_bytes()

    state.rename(workspace / ".toold-old")  # as rm would (the daemon may still be writing)
    client.tool("bash", command=SET_MARK + 'printf "$M" > .toold/sessions/s.json; mv .toold .x')
    assert not (state / "sessions" / "s.json").exists() and not (workspace / ".x").exists()
    assert not (workspace / ".toold-old" / "sessions" / "s.json").exists()

    shutil.rmtree(workspace / ".git")
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    config = (workspace / ".git" / "config").read_bytes()
    client.tool("bash", command="printf '[core]\\n\\tfsmonitor = true\\n' >> .git/config")
    assert (workspace / ".git" / "config").read_bytes() == config


@pytest.mark.usefixtures("bwrap_ready")
def test_what_the_host_replaces_is_protected_again_in_bwrap(
    daemon: Daemon, workspace: Path
) -> None:
    _replaced_on_the_host(daemon, "bwrap", workspace)


@pytest.mark.usefixtures("docker_ready")
def test_what_the_host_replaces_is_protected_again_in_docker(
    daemon: Daemon, workspace: Path
) -> None:
    _replaced_on_the_host(daemon, "docker", workspace)
