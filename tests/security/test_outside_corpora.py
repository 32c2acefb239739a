"""Other projects' shell-guard cases, imported as data, judged by toold's analysis.

corpora/bareagent_dangerous.txt holds BareAgent's tests/test_dangerous_patterns.py
lists (the seed spec project); corpora/codex_execpolicy.txt holds the commands Codex's
exec-policy tests do not allow. Each file names its source and commit in its header.
Every case BareAgent calls dangerous must be dangerous here; every case it asks about
in default mode must not be read-only; every command Codex forbids or prompts for must
not be read-only, except where only the test's own policy rule prompts for a command
toold lists as read-only. Counts are printed (run with -s).
"""

from __future__ import annotations

import json
from pathlib import Path

from toold.permissions.commands import analyse

CORPORA = Path(__file__).parent / "corpora"
POLICY_ONLY = frozenset({"git status", "/usr/bin/git status"})
"""Codex prompts for these because its test policy has a rule ``git → prompt``."""


def _load(name: str) -> list[tuple[str, ...]]:
    rows = []
    for line in (CORPORA / name).read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            *fields, command = line.split("\t")
            rows.append((*fields, json.loads(command)))
    return rows


def test_the_corpora_name_their_source() -> None:
    for name in ("bareagent_dangerous.txt", "codex_execpolicy.txt"):
        header = (CORPORA / name).read_text(encoding="utf-8").splitlines()[0]
        assert (
            header.startswith("# ")
            and "github.com/" in header
            and "@" in "".join((CORPORA / name).read_text(encoding="utf-8").splitlines()[:3])
        )


def test_bareagent_dangerous_cases_are_dangerous_and_its_asks_are_not_read_only() -> None:
    rows = _load("bareagent_dangerous.txt")
    missed = []
    tried = {"dangerous": 0, "ask": 0, "benign": 0}
    for expected, command in rows:
        analysis = analyse(command)
        tried[expected] += 1
        if expected == "dangerous" and analysis.danger is None:
            missed.append((expected, command))
        if expected == "ask" and analysis.read_only:
            missed.append((expected, command))
    benign = [c for e, c in rows if e == "benign"]
    runs = [c for c in benign if analyse(c).danger is None]
    print(
        f"\nBareAgent: dangerous {tried['dangerous']}, default-mode asks {tried['ask']}: "
        f"{tried['dangerous'] + tried['ask'] - len(missed)} held; "
        f"benign substitutions run in auto mode: {len(runs)}/{len(benign)}"
    )
    assert len(rows) > 200
    assert missed == []


def test_codex_forbidden_and_prompted_commands_are_not_read_only() -> None:
    rows = _load("codex_execpolicy.txt")
    judged = [r for r in rows if r[0] in ("forbidden", "prompt", "unsafe")]
    missed = [r for r in judged if analyse(r[2]).read_only and r[2] not in POLICY_ONLY]
    unproven = [r[2] for r in rows if r[0] == "unproven"]
    print(
        f"\nCodex: {len(judged) - len(missed) - len(POLICY_ONLY)}/{len(judged)} not read-only "
        f"({len(POLICY_ONLY)} prompted by the test's own rule only: {sorted(POLICY_ONLY)}); "
        f"{sum(not analyse(c).read_only for c in unproven)}/{len(unproven)} of the shapes "
        "its checker cannot prove are asked about here"
    )
    assert missed == []
    assert all(analyse(r[2]).danger for r in rows if r[0] == "unsafe")
    assert analyse("rm -rf /some/important/folder").danger == "recursive rm"
