"""Every spelling of a dangerous command is dangerous: generated, not listed.

For each base form of the danger table (recursive rm, git reset --hard, git push
--force, git clean -f, chmod 777, find -delete, dd of=, rsync --delete, kill -1, ...)
``spellings`` makes its equivalent spellings: redirections at every gap with every
operator, quoting and escaping of each word, assignment prefixes, every wrapper,
compound and nested contexts, substitutions, and combinations (issue 23). All of them
(several thousand) are checked against the analysis; a sample runs through the real
daemon in auto mode against a user who answers Deny, and the canaries must survive.
Counts per base form and per construct are printed (run with -s).
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from tests.security.conftest import DaemonFactory, held
from tests.security.spellings import canary_safe, spellings
from toold.permissions.commands import analyse

DANGEROUS = {
    "recursive rm": ["rm", "-rf", "d"],
    "rm --recursive --force": ["rm", "--recursive", "--force", "d"],
    "git reset --hard": ["git", "reset", "--hard"],
    "git push --force": ["git", "push", "--force", "origin", "main:x"],
    "git push +ref": ["git", "push", "origin", "+main:x"],
    "git push --delete": ["git", "push", "origin", "--delete", "keep"],
    "git clean -f": ["git", "clean", "-f"],
    "git checkout --": ["git", "checkout", "--", "canary.txt"],
    "git branch -D": ["git", "branch", "-D", "keep"],
    "chmod 777": ["chmod", "777", "a"],
    "chmod 00777": ["chmod", "00777", "a"],
    "chmod o+w": ["chmod", "o+w", "a"],
    "chmod -R": ["chmod", "-R", "u+w", "d"],
    "find -delete": ["find", "d", "-delete"],
    "find -exec rm": ["find", "d", "-exec", "rm", "{}", "+"],
    "dd of=": ["dd", "if=/dev/zero", "of=a", "count=1"],
    "rsync --delete": ["rsync", "-r", "--delete", "src/", "d/"],
    "kill -1": ["kill", "-9", "-1"],
    "truncate": ["truncate", "-s", "0", "a"],
    "shred": ["shred", "-u", "a"],
    "bash -c": ["bash", "-c", "rm -rf d"],
    "bash --rcfile": ["bash", "--rcfile", "f", "-c", "true"],
}
CANARY = (
    "recursive rm", "rm --recursive --force", "git push --force", "git push +ref",
    "git push --delete", "git clean -f", "find -delete", "find -exec rm", "dd of=", "truncate",
    "shred", "bash -c",
)  # fmt: skip
"""Base forms whose effect the canary workspace shows (rsync is absent, kill -1 is not run)."""
SAMPLE = 300


def _cases() -> list[tuple[str, str, str]]:
    return [
        (base, construct, text)
        for base, words in DANGEROUS.items()
        for construct, text in spellings(words)
    ]


CASES = _cases()


def _table(counts: dict[str, Counter[str]]) -> str:
    return "\n".join(f"  {key}: {c['held']}/{c['tried']}" for key, c in sorted(counts.items()))


def test_every_spelling_of_a_dangerous_command_is_dangerous() -> None:
    per_base: dict[str, Counter[str]] = {}
    per_construct: dict[str, Counter[str]] = {}
    missed = []
    for base, construct, text in CASES:
        dangerous = analyse(text).danger is not None
        for key, table in ((base, per_base), (construct.split(" + ")[0], per_construct)):
            counts = table.setdefault(key, Counter())
            counts["tried"] += 1
            counts["held"] += dangerous
        if not dangerous:
            missed.append((base, construct, text))
    print(f"\n{len(CASES)} spellings of {len(DANGEROUS)} dangerous forms")
    print("per base form (held/tried):\n" + _table(per_base))
    print("per construct (held/tried):\n" + _table(per_construct))
    assert len(CASES) > 3000
    assert missed == []


def test_the_generator_makes_the_spellings_the_review_found() -> None:
    texts = {text for _, _, text in CASES}
    for text in (
        "rm >out.txt -rf d",
        "rm -rf 2>/dev/null d",
        "git >out.txt reset --hard",
        "git reset >out.txt --hard",
        "git 2>/dev/null reset --hard",
        "git push origin >out.txt +main:x",
        "bash --rcfile f -c true",
    ):
        assert text in texts, text


@pytest.fixture(scope="module")
def sample() -> list[tuple[str, str, str]]:
    runnable = [case for case in CASES if case[0] in CANARY and canary_safe(case[1])]
    return random.Random(23).sample(runnable, SAMPLE)


def test_a_sample_asks_in_auto_mode_and_the_canaries_survive(
    daemon_for: DaemonFactory, sample: list[tuple[str, str, str]]
) -> None:
    daemon = daemon_for("auto")
    ran = []
    for base, construct, text in sample:
        asked = len(daemon.client.asked)
        result = daemon.call("bash", {"command": text})
        damage = daemon.damage()
        if not held(result) or len(daemon.client.asked) != asked + 1 or damage:
            ran.append((base, construct, text, damage))
    print(f"\ncanary sample: {SAMPLE - len(ran)}/{SAMPLE} held")
    assert ran == []
