"""Read-only stays read-only only while it is: generated spellings, both ways.

For each read-only form (ls, cat, git status, grep, wc, sort, find, sed -n, awk...),
``smuggled`` adds a write or code in every way the generator knows (a compound
command, a redirection writing at every gap, a substitution or a secret's expansion at
every word, a control character where bash and tree-sitter split words differently,
quoting in the program name, a prefix that changes what runs): none of those may be
read-only. ``harmless`` makes spellings that must stay read-only (a redirection to
/dev/null at every gap, quoted arguments, braces, pipes into head): the false-ask side.
A sample of the smuggled ones runs through the daemon in default mode against a user
who answers Deny; the canaries must survive.
"""

from __future__ import annotations

import random
from collections import Counter

from tests.security.conftest import DaemonFactory, held
from tests.security.spellings import harmless, join, smuggled
from toold.permissions.commands import analyse

READ_ONLY = {
    "ls": ["ls", "-la"],
    "cat": ["cat", "f"],
    "git status": ["git", "status", "--short"],
    "git log": ["git", "log", "-1", "--oneline"],
    "grep": ["grep", "-n", "line", "f"],
    "wc": ["wc", "-l", "f"],
    "head": ["head", "-1", "f"],
    "sort": ["sort", "f"],
    "diff": ["diff", "a", "b"],
    "find": ["find", ".", "-name", "*.py"],
    "sed -n": ["sed", "-n", "1p", "f"],
    "awk": ["awk", "{print $1}", "f"],
    "echo": ["echo", "hello"],
    "stat": ["stat", "f"],
}
WRITE_OPTIONS = {
    "sort": [
        "sort -o a f",
        "sort f -o a",
        "sort --output=a f",
        "sort --out=a f",
        "sort --files0-from=- <<< f",
    ],
    "find": [
        "find . -delete",
        "find . -name '*.py' -delete",
        "find . -fprint a",
        "find . -exec rm {} +",
        "find -files0-from - -name x",
    ],
    "sed -n": [
        "sed -i -n 1p f",
        "sed -n 1p f -i",
        "sed --in-place -n 1p f",
        "sed 'w a' f",
        "sed -n '1e rm a' f",
        "sed 's/x/y/w a' f",
    ],
    "git log": [
        "git log --output=a",
        "git log -1 --output=a",
        "git log --ext-diff",
        "git -c core.pager='rm a' log",
    ],
    "git status": [
        "git -c core.pager='rm a' status",
        "git -C /tmp status",
        "git --git-dir=/tmp/x status",
    ],
    "awk": [
        "awk -f a f",
        "awk 'BEGIN{ARGV[1]=\"/etc/shadow\";ARGC=2}{print}'",
        "awk '{getline x < \"/etc/shadow\"}' f",
        "awk '{system(\"rm a\")}' f",
    ],
    "wc": ["wc --files0-from=- <<< f", "wc -l f /etc/shadow"],
    "cat": ["cat /proc/self/environ", "cat /etc/shadow", "cat f ../x", "cat ~/.ssh/id_rsa"],
    "grep": ["grep -r x /etc", "grep -n line f /etc/shadow"],
}
"""Program options that write, run code or read what the guard never sees."""
CONTEXTS = ("{}", "{{ {}; }}", "{} | head", "echo $({})")
SAMPLE = 150


def _cases() -> list[tuple[str, str, str]]:
    cases = []
    for base, words in READ_ONLY.items():
        for construct, text in smuggled(words):
            for context in CONTEXTS:
                shown = construct if context == "{}" else f"{construct} in {context}"
                cases.append((base, shown, context.format(text)))
        cases += [(base, "write option", text) for text in WRITE_OPTIONS.get(base, [])]
    return cases


CASES = _cases()


def test_the_read_only_forms_are_read_only() -> None:
    # The control: without what is smuggled in, each form runs unasked.
    assert [b for b, w in READ_ONLY.items() if not analyse(join(w)).read_only] == []


def test_nothing_smuggled_into_a_read_only_command_is_read_only() -> None:
    per_base: dict[str, Counter[str]] = {}
    per_construct: dict[str, Counter[str]] = {}
    passed = []
    for base, construct, text in CASES:
        asks = not analyse(text).read_only
        for key, table in ((base, per_base), (construct, per_construct)):
            counts = table.setdefault(key, Counter())
            counts["tried"] += 1
            counts["held"] += asks
        if not asks:
            passed.append((base, construct, text))
    print(f"\n{len(CASES)} smuggled spellings of {len(READ_ONLY)} read-only forms")
    for name, table in (("base form", per_base), ("construct", per_construct)):
        print(f"per {name} (not read-only/tried):")
        for key, c in sorted(table.items()):
            print(f"  {key!r}: {c['held']}/{c['tried']}")
    assert len(CASES) > 1500
    assert passed == []


def test_harmless_spellings_stay_read_only() -> None:
    cases = [(b, c, t) for b, w in READ_ONLY.items() for c, t in harmless(w)]
    asked = [(b, c, t) for b, c, t in cases if not analyse(t).read_only]
    print(f"\nharmless spellings asked about: {len(asked)}/{len(cases)}")
    assert asked == []


def test_a_sample_is_held_in_default_mode_and_the_canaries_survive(
    daemon_for: DaemonFactory,
) -> None:
    daemon = daemon_for("default")
    sample = random.Random(23).sample(CASES, SAMPLE)
    ran = []
    for base, construct, text in sample:
        result = daemon.call("bash", {"command": text})
        damage = daemon.damage()
        if not held(result) or damage:
            ran.append((base, construct, text, damage))
    print(f"\ncanary sample (default mode): {SAMPLE - len(ran)}/{SAMPLE} held")
    assert ran == []
