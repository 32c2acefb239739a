"""False asks: 100 everyday read-only commands (readonly_commands.txt), pipelines included.

A guard that asks too often trains people to click Allow; the target is at most 5% of
these asked about. The figure is printed (run with -s) and asserted, by the classifier
and over the wire (default mode, a user who answers Deny: an ask fails the command).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from tests.security.conftest import DaemonFactory
from toold.permissions.commands import analyse

COMMANDS = [
    line
    for line in (Path(__file__).parent / "readonly_commands.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
]
TARGET = 0.05
# What read-only programs may touch: git's index stat cache, toold's own audit log.
TOLERATED = (".git/index", ".toold/")


def _tree(root: Path) -> dict[str, str]:
    """Digest of every file below ``root`` that a read-only command must leave alone."""
    files = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not rel.startswith(TOLERATED):
            files[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return files


def test_the_list_holds_100_commands() -> None:
    assert len(COMMANDS) == 100
    assert len(set(COMMANDS)) == 100


def test_the_classifier_asks_about_at_most_5_percent() -> None:
    asked = [c for c in COMMANDS if not analyse(c).read_only]
    rate = len(asked) / len(COMMANDS)
    print(f"\nfalse asks (classifier): {len(asked)}/{len(COMMANDS)} = {rate:.0%}: {asked}")
    assert rate <= TARGET, asked


def test_over_the_wire_at_most_5_percent_are_asked(daemon_for: DaemonFactory) -> None:
    daemon = daemon_for("default")
    files = _tree(daemon.workspace)
    asked: list[str] = []
    for command in COMMANDS:
        before = len(daemon.client.asked)
        daemon.call("bash", {"command": command})
        if len(daemon.client.asked) > before:
            asked.append(command)
    rate = len(asked) / len(COMMANDS)
    print(f"\nfalse asks (over the wire): {len(asked)}/{len(COMMANDS)} = {rate:.0%}: {asked}")
    assert rate <= TARGET, asked
    assert daemon.damage() == []
    assert _tree(daemon.workspace) == files  # what ran unasked wrote nothing
