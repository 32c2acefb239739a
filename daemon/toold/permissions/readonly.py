"""Which programs, with which arguments, only read: the tables behind auto-approval.

A command is read-only when its program is in ``PROGRAMS`` and the program's check
accepts its arguments. Checks look at options the way the program parses them: short
options may be clustered (``-rf``), and GNU long options may be abbreviated to any
unambiguous prefix (``--out`` is ``--output``), so a forbidden long option matches
every prefix of three or more characters. An argument whose value is only known at
run time (``$X``) fails every check except for programs that have no option that
writes or runs anything.

Deliberately absent: pytest and ``python -m pytest`` (conftest.py is project code),
mypy (plugins named in the project's configuration are imported), ``ruff check``
without ``--no-fix`` or ``--diff`` (the configuration may say ``fix = true``), ``npm test`` and
``npm run`` (package.json scripts), pagers (``!cmd``), tee, xargs (only as a wrapper
of a read-only command). ruff and git may write their own caches and index stat data;
that is not counted as a write.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from toold.permissions.paths import names_outside, runtime_word_inside

Args = Sequence[str | None]


def _options(args: Args) -> list[str]:
    """The option words (before ``--``); unknown values count as options (fail closed)."""
    out: list[str] = []
    for arg in args:
        if arg == "--":
            break
        if arg is None or arg.startswith("-"):
            out.append("-?" if arg is None else arg)
    return out


def has_option(args: Args, short: str = "", long: Sequence[str] = ()) -> bool:
    """Whether a short option letter (clusters too) or a long option (prefixes too) is given."""
    for opt in _options(args):
        if opt.startswith("--"):
            name = opt.split("=", 1)[0]
            if any(full == name or (len(name) >= 3 and full.startswith(name)) for full in long):
                return True
        elif opt == "-?" or (short and set(opt[1:]) & set(short)):
            return True
    return False


def operands(
    args: Args, takes_value: str = "", long_values: Sequence[str] = ()
) -> list[str | None]:
    """Non-option arguments, skipping the values of options that take one."""
    out: list[str | None] = []
    skip = False
    rest = False
    for arg in args:
        if skip:
            skip = False
        elif rest or arg is None or not arg.startswith("-") or arg == "-":
            out.append(arg)
        elif arg == "--":
            rest = True
        elif arg.startswith("--"):
            skip = arg in long_values
        elif arg[-1] in takes_value:
            skip = True
    return out


@dataclass(frozen=True)
class Spec:
    """How to tell whether one program's arguments keep it read-only."""

    any_args: bool = False
    """No option of the program writes or runs anything: every argument is fine."""
    short: str = ""
    long: tuple[str, ...] = ()
    check: Callable[[Args], bool] | None = None
    paths: bool = True
    """Its arguments may name files it reads (the default): each must lie in the workspace."""
    script: tuple[str, str, tuple[str, ...]] | None = None
    """When its first operand is a pattern or a program, not a path: the short options
    that take a value, and the short and long options that give the script instead."""

    def allows(self, args: Args) -> bool:
        """Whether these arguments keep the program read-only."""
        if self.any_args:
            # Its few forbidden options read file names from a file or from stdin.
            known = [a for a in args if a is not None]
            return not (self.short or self.long) or not has_option(known, self.short, self.long)
        if any(a is None for a in args):
            return False
        if has_option(args, self.short, self.long):
            return False
        return self.check is None or self.check(args)

    def reads_inside(self, args: Args, texts: Sequence[str]) -> bool:
        """Whether every word that may name a file it reads lies inside the workspace."""
        skip = self._script_index(args)
        for i, (arg, text) in enumerate(zip(args, texts, strict=False)):
            if arg is None:
                if not runtime_word_inside(text, self.paths):
                    return False
            elif self.paths and i != skip and names_outside(arg):
                return False
        return True

    def _script_index(self, args: Args) -> int | None:
        if self.script is None:
            return None
        takes_value, short, long = self.script
        if has_option(args, short, long):
            return None
        skip = False
        for i, arg in enumerate(args):
            if skip:
                skip = False
            elif arg == "--":
                return i + 1 if i + 1 < len(args) else None
            elif arg is None or not arg.startswith("-") or arg == "-":
                return i
            elif not arg.startswith("--") and arg[-1] in takes_value:
                skip = True
        return None


def _no_operands(args: Args) -> bool:
    return not operands(args)


def _date(args: Args) -> bool:
    found = operands(args, takes_value="dfr", long_values=("--date", "--file", "--reference"))
    return all(o is not None and o.startswith("+") for o in found)


def _uniq(args: Args) -> bool:
    return len(operands(args, takes_value="fsw")) <= 1


def _xxd(args: Args) -> bool:
    return len(operands(args, takes_value="cglnosC")) <= 1


def _find(args: Args) -> bool:
    actions = {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fls", "-files0-from"}
    return not any(a in actions or (a or "").startswith("-fprint") for a in args)


_SED_SIMPLE = frozenset("pdqQ=nNPDlhHgGx{}!")


def sed_script_ok(script: str) -> bool:
    """Only substitutions without w/e flags and commands that print, delete or move lines."""
    i, n = 0, len(script)
    while i < n:
        c = script[i]
        if c in " \t\n;0123456789,$~+" or c in _SED_SIMPLE:
            i += 1
        elif c == "/":  # an address /re/
            end = script.find("/", i + 1)
            if end < 0:
                return False
            i = end + 1
        elif c in "sy" and i + 1 < n:
            delim = script[i + 1]
            if delim in "\\\n" or delim.isalnum():
                return False
            i, parts = i + 2, 0
            while i < n and parts < 2:
                if script[i] == "\\":
                    i += 1
                elif script[i] == delim:
                    parts += 1
                i += 1
            if parts < 2:
                return False
            allowed = " \t" if c == "y" else "gpiImM0123456789 \t"
            while i < n and script[i] not in ";\n}":
                if script[i] not in allowed:
                    return False
                i += 1
        else:
            return False
    return True


def sed_scripts(args: Args) -> list[str] | None:
    """The scripts a sed command runs (None when one is in a file or cannot be known).

    Short options are read as getopt does: in ``-ne p`` the ``e`` takes ``p``, in
    ``-l 5`` the ``5`` is the line length, not the script.
    """
    scripts: list[str] = []
    rest: list[str] = []
    words = list(args)
    i = 0
    while i < len(words):
        arg = words[i]
        if arg is None:
            return None
        if arg == "--":
            rest += [w for w in words[i + 1 :] if w is not None]
            break
        if arg.startswith("--"):
            name, _, value = arg.partition("=")
            if "--expression".startswith(name) and len(name) > 2:
                scripts.append(value or (words[i + 1] or "" if i + 1 < len(words) else ""))
                i += 0 if value else 1
            elif "--file".startswith(name) and len(name) > 2:
                return None
            elif "--line-length".startswith(name) and len(name) > 2 and not value:
                i += 1
        elif arg.startswith("-") and arg != "-":
            for j, letter in enumerate(arg[1:], start=2):
                if letter in "efl":
                    given = arg[j:] or (words[i + 1] if i + 1 < len(words) else None)
                    i += 0 if arg[j:] else 1
                    if letter == "f" or given is None:
                        return None
                    if letter == "e":
                        scripts.append(given)
                    break
        else:
            rest.append(arg)
        i += 1
    if not scripts and rest:
        scripts.append(rest[0])
    return scripts


def _sed(args: Args) -> bool:
    scripts = sed_scripts(args)
    return bool(scripts) and all(sed_script_ok(s) for s in scripts or ())


_AWK_WRITES = (
    "system", "|", ">", "getline", "close", "fflush", "@", "printf -v", "ENVIRON", "ARGV", "ARGC",
    "PROCINFO",
)  # fmt: skip
"""Also what reads files the guard never sees: ARGV[1]="/etc/shadow", getline < FILE."""
_SED_SCRIPT = ("--expression", "--file")


def _awk(args: Args) -> bool:
    if has_option(args, "fiElEW", ("--file", "--include", "--load", "--exec", "--source")):
        return False
    program = next((a for a in operands(args, takes_value="vF") if a is not None), None)
    return program is not None and not any(w in program for w in _AWK_WRITES)


def _ruff(args: Args) -> bool:
    sub = next((a for a in args if a is not None and not a.startswith("-")), None)
    if sub == "check":
        # The project's configuration may say ``fix = true``: only --no-fix or --diff
        # guarantee that nothing is rewritten.
        return (
            ("--no-fix" in args or "--diff" in args)
            and not has_option(args, "o", ("--fix", "--unsafe-fixes", "--output-file"))
            and not has_option(args, "", ("--add-noqa", "--fix-only", "--watch"))
        )
    if sub == "format":
        return "--check" in args or "--diff" in args
    return sub in ("rule", "version", "linter", "config") or args in (["--version"], ["-V"])


_GIT_READERS = frozenset(
    {"log", "status", "diff", "show", "rev-parse", "ls-files", "blame", "shortlog"}
    | {"describe", "rev-list", "cat-file", "ls-tree", "show-ref", "name-rev", "merge-base"}
    | {"whatchanged", "version", "grep", "count-objects", "check-ignore"}
)
_GIT_GLOBAL_FLAGS = frozenset(
    {"--no-pager", "-P", "--paginate", "-p", "--no-replace-objects", "--literal-pathspecs"}
    | {"--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs", "--no-optional-locks"}
    | {"--bare", "--no-lazy-fetch"}
)
_GIT_FORBIDDEN = (
    "--output", "--ext-diff", "--textconv", "--filters", "--open-files-in-pager", "--exec",
    "--upload-pack", "--receive-pack",
)  # fmt: skip


def _git_listing(sub: str, rest: list[str]) -> bool:
    if sub == "branch":
        listing = {"-a", "-r", "-v", "-vv", "--all", "--remotes", "--show-current", "--no-color"}
        patterns = "--list" in rest or "-l" in rest
        return all(
            a in listing or a in ("--list", "-l") or (patterns and not a.startswith("-"))
            for a in rest
        )
    if sub == "tag":
        tags = "-l" in rest or "--list" in rest
        return all(a in ("-l", "--list", "-n") or (tags and not a.startswith("-")) for a in rest)
    if sub == "remote":
        return all(a in ("-v", "--verbose") for a in rest)
    if sub == "stash":
        return rest[:1] in (["list"], ["show"])
    if sub == "config":
        # One named key; listing would print the global configuration (tokens in URLs).
        return len(rest) == 2 and rest[0] in ("--get", "--get-all")
    return False


def _git(args: Args) -> bool:
    words = [a for a in args if a is not None]
    i = 0
    while i < len(words) and words[i].startswith("-"):
        if words[i] not in _GIT_GLOBAL_FLAGS:
            return False  # -c, -C, --git-dir, --work-tree, --exec-path, ... change what runs
        i += 1
    if i == len(words):
        return False
    sub, rest = words[i], words[i + 1 :]
    if has_option(rest, "", _GIT_FORBIDDEN) or (sub == "grep" and has_option(rest, "O")):
        return False
    return sub in _GIT_READERS or _git_listing(sub, rest)


def _cd(args: Args) -> bool:
    # No operand, "-" and "~" go to $HOME or $OLDPWD; the one operand is checked as a path.
    found = operands(args)
    return len(found) == 1 and found[0] not in ("-", None)


def _ps(args: Args) -> bool:
    # BSD-style "e" (ps e, ps auxe) prints each process's environment: the daemon's too.
    return not any(a is not None and not a.startswith("-") and "e" in a for a in args)


def _jq(args: Args) -> bool:
    # env and $ENV are the daemon's environment.
    return not any(re.search(r"\benv\b|\$ENV|\$__loc__", a or "") for a in args)


_ANY = Spec(any_args=True)
_WORDS = Spec(any_args=True, paths=False)
_ANY_ARGS = """cat head tail ls true false realpath readlink [ test [[ cut nl tac rev fold
        paste join comm expand unexpand column base64 od hexdump strings diff cmp stat df fmt"""
# Programs that read file names from a file or standard input with one option: names
# the guard never sees (printf '/etc/shadow\0' | wc --files0-from=-, sha256sum -c LIST).
_NAMES_FROM = {
    **dict.fromkeys(("wc", "du"), Spec(any_args=True, long=("--files0-from",))),
    **dict.fromkeys(
        ("md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum", "b2sum"),
        Spec(any_args=True, short="c", long=("--check",)),
    ),
    "cksum": Spec(any_args=True, short="c", long=("--check",)),
}
# Programs whose arguments are words, never files they read.
_WORD_ARGS = """echo pwd basename dirname which whoami id uname nproc seq tty groups arch type
        sleep uptime free locale whereis lsb_release getconf numfmt expr tr"""
_GREP = Spec(any_args=True, script=("ABCDdm", "ef", ("--regexp", "--file")))
PROGRAMS: dict[str, Spec] = {
    **dict.fromkeys(_ANY_ARGS.split(), _ANY),
    **dict.fromkeys(_WORD_ARGS.split(), _WORDS),
    **_NAMES_FROM,
    **dict.fromkeys(("grep", "egrep", "fgrep"), _GREP),
    "printf": Spec(short="v", paths=False),
    "date": Spec(short="s", long=("--set",), check=_date),
    "uniq": Spec(check=_uniq),
    "xxd": Spec(short="r", long=("--revert",), check=_xxd),
    "sort": Spec(short="o", long=("--output", "--compress-program", "--files0-from")),
    "file": Spec(short="Cf", long=("--compile", "--files-from")),
    "tree": Spec(short="oR", long=("--output", "--fromfile")),
    "find": Spec(check=_find),
    "sed": Spec(short="i", long=("--in-place",), check=_sed, script=("l", "ef", _SED_SCRIPT)),
    **dict.fromkeys(("awk", "gawk", "mawk"), Spec(check=_awk, script=("vF", "f", ("--file",)))),
    "rg": Spec(
        long=("--pre", "--hostname-bin"),
        script=("ABCEMmjgtTf", "ef", ("--regexp", "--file", "--files")),
    ),
    "jq": Spec(check=_jq, script=("L", "f", ("--from-file",))),
    "ruff": Spec(check=_ruff),
    "git": Spec(check=_git),
    "cd": Spec(check=_cd),
    "ps": Spec(check=_ps, paths=False),
    # Only the version: parsed and printed before the interpreter imports anything.
    **dict.fromkeys(
        ("python", "python3"), Spec(check=lambda a: a in (["--version"], ["-V"]), paths=False)
    ),
    "hostname": Spec(short="Fb", long=("--file", "--boot"), check=_no_operands, paths=False),
    "command": Spec(check=lambda args: bool(args) and args[0] in ("-v", "-V"), paths=False),
}
# Deliberately absent: env and printenv (they print the daemon's environment: API keys).


def is_read_only(program: str, args: Args, texts: Sequence[str] | None = None) -> bool:
    """Whether ``program`` (a bare name) with ``args`` (written as ``texts``) only reads,
    and only inside the workspace."""
    spec = PROGRAMS.get(program)
    shown = texts if texts is not None else ["$X" if a is None else a for a in args]
    return spec is not None and spec.allows(args) and spec.reads_inside(args, shown)
