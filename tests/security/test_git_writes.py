"""A shell command that may write .git's config, hooks or info asks, under every runner
(inside bwrap and docker those are read-only too: tests/sandbox/test_default_runner.py).
Under the local and subprocess runners the guard is the only wall: what a command writes
there runs at the user's next git command, outside any sandbox."""

from __future__ import annotations

import hashlib
import itertools
import random
from pathlib import Path

import pytest

from tests.security.conftest import DaemonFactory, held
from toold.permissions.guard import GIT_CODE, PermissionGuard

TARGETS = [".git/config", ".git/hooks/pre-commit", ".git/info/attributes"]
SPELLINGS = ["{t}", "./{t}", "'{t}'", '"{t}"', "src/../{t}", "{d}/./{n}", ".git//{n}", ".g*/{n}"]
WRITERS = [
    "echo x >> {p}",
    "echo x > {p}",
    "printf '[core]\\n\\tfsmonitor = x\\n' 1>>{p}",
    "tee -a {p} < /dev/null",
    "cp src/main.py {p}",
    "mv src/helper.txt {p}",
    "ln -sf ../../evil {p}",
    "touch {p}",
    "sed -i s/a/b/ {p}",
    "install -m 755 src/main.py {p}",
    "python3 -c \"open('{p}', 'a').write('x')\"",
    "dd if=src/main.py of={p}",
    "cat src/main.py | tee {p}",
]
CONFIG_WRITES = [
    "git config core.fsmonitor 'touch pwned'",
    "git config --local core.hooksPath hooks",
    "git -C . config core.pager 'touch pwned'",
    "git --no-pager config alias.st '!touch pwned'",
    "cd .git && echo '[core] fsmonitor = x' >> config",
    "cd src/../.git/hooks && printf '#!/bin/sh' > post-checkout",
]


def _lines() -> list[str]:
    """Each writer x each target x each spelling of its path, then git's own writes."""
    out = []
    for target, spelling, writer in itertools.product(TARGETS, SPELLINGS, WRITERS):
        inner = target.removeprefix(".git/")
        path = spelling.format(t=target, d=".git", n=inner)
        out.append(writer.format(p=path))
    return out + CONFIG_WRITES


LINES = _lines()
EVERYDAY = [
    "git commit -qm msg",
    "git add -A && git commit -q -m 'a change'",
    "echo build/ >> .gitignore",
    "git clone -q https://example.invalid/x.git vendor/x",
    "git config --get user.name",
    "cat .git/config",
    "git log --oneline -3",
]


@pytest.mark.parametrize("mode", ["default", "auto"])
def test_every_generated_write_to_git_code_asks_and_cannot_be_always_allowed(mode: str) -> None:
    guard = PermissionGuard(mode=mode)  # type: ignore[arg-type]
    missed = []
    for line in LINES:
        decision = guard.decide("bash", {"command": line})
        if decision.action != "ask" or decision.approvable:
            missed.append((line, decision.reason))
    assert missed == [], f"{len(missed)} of {len(LINES)} ran unasked: {missed[:5]}"


def test_everyday_git_work_is_not_asked_about_in_auto_mode() -> None:
    guard = PermissionGuard(mode="auto")
    asked = [
        line for line in EVERYDAY if guard.decide("bash", {"command": line}).reason == GIT_CODE
    ]
    assert asked == []


def _digests(workspace: Path) -> dict[str, str]:
    git = workspace / ".git"
    files = [p for p in sorted(git.rglob("*")) if p.is_file() and "objects" not in p.parts]
    wanted = [p for p in files if p.relative_to(git).parts[0] in ("config", "hooks", "info")]
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in wanted}


def test_over_the_wire_on_the_local_runner_git_code_is_unchanged(
    daemon_for: DaemonFactory,
) -> None:
    """The guard alone (the harness's local runner), auto mode, a user who answers Deny."""
    daemon = daemon_for("auto", extra_config="# a daemon of its own: it commits\n")
    before = _digests(daemon.workspace)
    sample = random.Random(22).sample(LINES, 40) + CONFIG_WRITES
    ran = [line for line in sample if not held(daemon.call("bash", {"command": line}))]
    assert ran == []
    assert _digests(daemon.workspace) == before
    assert not (daemon.workspace / "pwned").exists()
    commit = daemon.call("bash", {"command": "git commit -q --allow-empty -m ok && echo done"})
    assert not held(commit) and "done" in str(commit)
