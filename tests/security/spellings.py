"""Equivalent spellings of one shell command: the generator behind the equivalence tests.

A command is a list of words. ``spellings(words)`` yields (construct, text) pairs that
bash runs as the same command (or runs it among others): a redirection at every gap
between words with every operator, each word quoted or escaped, assignment prefixes,
every wrapper of the guard's wrapper table, compound and nested contexts, substitutions,
and some of these combined. ``smuggled(words)`` yields the same forms with a write or a
secret's expansion added, for the read-only side.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator

REDIRECTIONS = (
    ">out.txt", ">>out.txt", "1>out.txt", "2>&1", "2>/dev/null", "&>out.txt", "<f",
    "<>out.txt", ">|out.txt", "0<f", "3>&-", "<<<x",
)  # fmt: skip
"""Every redirection operator; targets the canary workspace has (``f``) or tolerates."""
QUOTINGS = {
    "'single'": lambda w: f"'{w}'",
    '"double"': lambda w: f'"{w}"',
    "\\escape": lambda w: "\\" + w,
    "split ''": lambda w: f"{w[:1]}''{w[1:]}",
    'split ""': lambda w: f'{w[:1]}"{w[1:]}"',
    "escape last": lambda w: f"{w[:-1]}\\{w[-1]}",
}
PREFIXES = ("X=1 ", "LC_ALL=C ", "A=1 B=2 ")
WRAPPERS = (
    "sudo", "sudo -u root", "doas", "env", "env -i", "env X=1", "command", "command --",
    "builtin", "exec", "exec -a x", "nice", "nice -n 5", "timeout 5", "timeout -s KILL 5",
    "nohup", "stdbuf -o0", "time", "time -p", "setsid", "xargs", "xargs -0", "ionice -c 3",
    "flock out.txt", "taskset -c 0", "busybox",
)  # fmt: skip
CONTEXTS = (
    "true; {}", "true && {}", "false || {}", "true | {}", "{} | cat", "({})", "{{ {}; }}",
    "if true; then {}; fi", "if {}; then :; fi", "while true; do {}; break; done",
    "until false; do {}; break; done", "for i in 1; do {}; done", "case a in a) {};; esac",
    "f() {{ {}; }}; f", "function f {{ {}; }}; f", "echo $({})", 'echo "$({})"', "echo `{}`",
    "cat <({})", "x=$({})", "! {}", "true\n{}", "{} &", "echo \"$(echo $({}))\"",
    "{} 2>&1 | cat", "[ -e f ] && {}",
)  # fmt: skip
"""Where a command can stand; ``{}`` is the command (braces doubled are literal)."""
_NO_CANARY = ("{} &", "setsid", "sudo", "doas", "builtin", "busybox")
"""Constructs that cannot show an effect here (background, absent programs): verdicts only."""


def join(words: list[str]) -> str:
    """The words as a command line, quoted where needed."""
    return " ".join(w if w and all(c not in w for c in " '\"$`\\;&|<>()*?[]{}!#~") else
                    shlex.quote(w) for w in words)  # fmt: skip


def _insert(words: list[str], gap: int, token: str) -> str:
    """The words with ``token`` (a redirection, written as is) before word ``gap``."""
    return " ".join(part for part in (join(words[:gap]), token, join(words[gap:])) if part)


def _gaps(words: list[str], token: str) -> Iterator[tuple[int, str]]:
    for gap in range(len(words) + 1):
        yield gap, _insert(words, gap, token)


def spellings(words: list[str]) -> Iterator[tuple[str, str]]:
    """Every spelling of ``words`` the generator makes: (construct, command line)."""
    plain = join(words)
    yield "plain", plain
    for op in REDIRECTIONS:
        for _, text in _gaps(words, op):
            yield f"redirect {op}", text
    for name, quote in QUOTINGS.items():
        for i, word in enumerate(words):
            if len(word) > 1 and word.isprintable() and "'" not in word and '"' not in word:
                yield (
                    f"quote {name}",
                    join(words[:i])
                    + " " * bool(i)
                    + " ".join([quote(word)] + [join([w]) for w in words[i + 1 :]]),
                )
    for prefix in PREFIXES:
        yield "assignment prefix", prefix + plain
    for wrapper in WRAPPERS:
        yield f"wrapper {wrapper.split()[0]}", f"{wrapper} {plain}"
        for op in (">out.txt", "2>/dev/null", "<f"):
            yield f"wrapper {wrapper.split()[0]} + redirect", f"{wrapper} {op} " + plain
            if len(words) > 1:
                yield (
                    f"wrapper {wrapper.split()[0]} + redirect",
                    (f"{wrapper} {words[0]} {op} {join(words[1:])}"),
                )
    for context in CONTEXTS:
        yield f"context {context}", context.format(plain)
        for op in REDIRECTIONS:
            inner = _insert(words, 1, op)
            yield f"context {context} + redirect", context.format(inner)
        for quote in list(QUOTINGS.values())[:3]:
            yield (
                f"context {context} + quote",
                context.format(" ".join([quote(words[0])] + [join([w]) for w in words[1:]])),
            )
    yield from _substitutions(words)


def _substitutions(words: list[str]) -> Iterator[tuple[str, str]]:
    rest = join(words[1:])
    program = words[0]
    yield "program from $( )", f"$(echo {program}) {rest}"
    yield "program from ` `", f"`echo {program}` {rest}"
    yield "program from a variable", f"P={program}; $P {rest}"
    yield "program from a variable", f'P={program}; "${{P}}" {rest}'
    yield "program from a glob", f"{program[:-1]}? {rest}" if len(program) > 1 else "? " + rest
    if len(words) > 1:
        arg = words[1]
        yield (
            "argument from $( )",
            join(words[:1]) + f" $(echo {shlex.quote(arg)}) " + join(words[2:]),
        )
        yield "argument from a variable", f"A={shlex.quote(arg)}; {program} $A " + join(words[2:])
        yield (
            "brace expansion",
            "{" + ",".join(words) + "}"
            if all("," not in w and " " not in w and "{" not in w for w in words)
            else join(words),
        )


def canary_safe(construct: str) -> bool:
    """Whether running this construct in the canary workspace would show its effect."""
    return not any(marker in construct for marker in _NO_CANARY)


SMUGGLED = (
    ("; rm a", "{} ; rm a"), ("&& touch pwned", "{} && touch pwned"),
    ("|| rm a", "false || rm a; {}"), ("| tee a", "{} | tee a"), ("| sh", "{} | sh"),
    ("newline", "{}\nrm a"), ("&", "{} & rm a"), ("$( ) before", "$(rm a) {}"),
    ("env prefix", "env {}"), ("PATH prefix", "PATH=. {}"), ("LD_PRELOAD", "LD_PRELOAD=x.so {}"),
    ("eval", "eval {}"), ("sh -c", "sh -c {}"),
)  # fmt: skip
"""A write or code added around a read-only command: (construct, template)."""
WRITES = (">a", ">>a", "1>a", "&>a", ">|a", "2>a", "<>a", "3>a")
SUBSTITUTED = ("$(rm a)", "`rm a`", "<(rm a)", ">(rm a)", '"$(rm a)"', "$(touch pwned)")
SECRETS = ("$ANTHROPIC_API_KEY", '"$API_TOKEN"', "${SECRET}", "${!A*}", "${#OPENAI_API_KEY}")
CONTROL = ("\v", "\f", "\r", "\x00", "\x1b", "\u00a0")


def smuggled(words: list[str]) -> Iterator[tuple[str, str]]:
    """``words`` (read-only) with something added that must make it not read-only."""
    plain = join(words)
    for name, template in SMUGGLED:
        if name == "sh -c":
            yield name, template.format(shlex.quote(plain))
        else:
            yield name, template.format(plain)
    for op in WRITES:
        for _, text in _gaps(words, op):
            yield f"write {op}", text
    for token in SUBSTITUTED + SECRETS:
        kind = "secret" if "$" in token and "(" not in token else "substitution"
        for gap in range(1, len(words) + 1):
            yield f"{kind} {token}", _insert(words, gap, token)
    for char in CONTROL:
        if len(words) > 1:
            yield f"control {char!r}", join(words[:1]) + char + join(words[1:])
        yield f"control {char!r} in the name", words[0][:1] + char + words[0][1:]
    for name, quote in QUOTINGS.items():
        yield f"program name {name}", " ".join([quote(words[0]), *map(shlex.quote, words[1:])])


def harmless(words: list[str]) -> Iterator[tuple[str, str]]:
    """Spellings of a read-only command that stay read-only (no false asks from them)."""
    for op in ("2>/dev/null", ">/dev/null", "&>/dev/null", "2>&1", "<f"):
        for _, text in _gaps(words, op):
            yield f"redirect {op}", text
    for i, word in enumerate(words[1:], start=1):
        if "'" not in word:
            yield (
                "quoted argument",
                " ".join(
                    [*map(shlex.quote, words[:i]), f"'{word}'", *map(shlex.quote, words[i + 1 :])]
                ),
            )
    plain = join(words)
    for context in ("{{ {}; }}", "({})", "{} | head", "true && {}", "{} | wc -l"):
        yield f"context {context}", context.format(plain)
