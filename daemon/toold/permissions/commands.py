"""Classify a shell command: what runs, whether it only reads, whether it is dangerous.

``analyse`` takes the parse (shell.py) and resolves each simple command into layers
(layers.py): the program and every program a wrapper runs, with what cannot be resolved
without running it recorded, never guessed.

The danger detector works on the same layers (danger.py, and redirections writing
outside the workspace) and fails closed: an incomplete parse or anything unresolvable
is dangerous, as is a command longer than 64 KiB (never parsed) and whatever reads the
daemon's environment (``$API_KEY``, ``printenv``, ``env`` or ``set`` alone, a process's
``environ`` file): the model would read the secrets it holds. Read-only needs the
opposite: a complete parse, nothing unresolvable, every layer read-only (readonly.py)
reading only inside the workspace (paths.py), no redirection writing except to
/dev/null. ``Analysis.touches``: whether a command may write toold.toml or .toold/,
counting words only known at run time.
"""

from __future__ import annotations

import posixpath
import re
import shlex
import threading
from dataclasses import dataclass
from functools import lru_cache

from toold.permissions.danger import DANGER_PROGRAMS, program_danger
from toold.permissions.interpreters import INTERPRETER, SHELLS, code_reason
from toold.permissions.layers import Layer, Resolved, resolve, wrapped
from toold.permissions.paths import escapes, judging, loop_paths, names_any, names_outside
from toold.permissions.readonly import PROGRAMS, has_option, is_read_only, operands
from toold.permissions.shell import Script, harmless, parse

_PLAIN_VARIABLE = re.compile(
    r"^(?:\w*[a-z]\w*|LC_\w+|LANG|LANGUAGE|TZ|NO_COLOR|FORCE_COLOR|CLICOLOR\w*|COLUMNS|LINES|TERM)$"
)


def changes_behaviour(name: str) -> bool:
    """Whether assigning ``name`` may change which program runs or what it does.

    Environment variables that steer programs (PATH, LD_PRELOAD, RIPGREP_CONFIG_PATH,
    GIT_DIR...) are upper case: only names with a lower-case letter and locale or
    terminal settings are plain.
    """
    return not _PLAIN_VARIABLE.match(name)


_SYSTEM_DIRS = ("/bin/", "/usr/bin/", "/usr/local/bin/", "/sbin/", "/usr/sbin/")
_READ_ONLY_WRAPPERS = frozenset({"time", "nice", "timeout", "command", "builtin", "stdbuf"})
_WRAPPERS = frozenset(
    {"sudo", "doas", "env", "command", "builtin", "nohup", "coproc", "setsid", "exec", "nice"}
    | {"ionice", "stdbuf", "time", "timeout", "chroot", "xargs", "find"}
)
_RUNTIME_TEXT = re.compile(r"[$`{(]")
_QUOTES = re.compile(r"[\'\"\\]")
_SQL = re.compile(r"\bdrop\s+table\b|\bdelete\s+from\b", re.IGNORECASE)
PROTECTED = ("toold.toml", ".toold")
MAX_COMMAND = 64 * 1024
"""Longer command lines are not parsed (the parse time grows with the text): they ask."""
_NAME_QUOTED = re.compile(r"[\'\"\\]")
_ENVIRON = re.compile(r"/proc\b.*env", re.DOTALL)
"""/proc/self/environ, /proc/*/env*, cd /proc/1; cat environ: a process's environment."""
_LISTS_VARIABLES = frozenset({"set", "declare", "typeset", "export", "readonly", "local"})


@dataclass
class Analysis:
    """One shell command line, classified."""

    text: str
    script: Script
    commands: list[Resolved]
    danger: str | None
    read_only: bool

    @property
    def unresolved(self) -> list[str]:
        """Everything that cannot be known without running it."""
        out = list(self.script.problems)
        if not self.script.complete:
            out.append("the command does not parse completely")
        out += [r.dynamic for r in self.commands if r.dynamic]
        out += [r.code for r in self.commands if r.code]
        return out

    @property
    def dynamic(self) -> bool:
        """Whether some program name cannot be resolved."""
        return any(r.dynamic for r in self.commands) or not self.script.complete

    def touches(self, names: tuple[str, ...] = PROTECTED, *, components: bool = False) -> bool:
        """Whether a word, redirection target or the text may name one of ``names``
        (``components``: only where the text has one as a whole path component, so
        ``.gitignore`` or ``repo.git`` do not name ``.git``)."""
        if components:
            if any(re.search(rf"(?<![\w.-]){re.escape(n)}(?![\w.-])", self.text) for n in names):
                return True
        elif any(n in self.text for n in names):
            return True
        targets = [r.target for r in self.script.redirects if r.writes and r.target]
        if any(t.value is None for t in targets):
            return True  # a write to a path only known at run time
        values = [t.value for t in targets] + [
            w.value if w.value is not None else w.text
            for r in self.commands
            for w in r.command.words
        ]
        values += [v for r in self.commands for layer in r.layers for v in layer.args if v]
        if any(v is not None and names_any(v, names) for v in values):
            return True
        return any(_may_name_anything(r, names) for r in self.commands)


def _may_name_anything(r: Resolved, names: tuple[str, ...]) -> bool:
    """Whether a command that may write files has a word only known at run time that could
    spell one of ``names`` (a substitution, an expansion, a glob that matches one)."""
    writes_nothing = [PROGRAMS.get(layer.program) for layer in r.layers]
    if r.layers and all(spec is not None and spec.any_args for spec in writes_nothing):
        return False  # echo, cat...: no option of theirs writes a file
    if any(layer.stdin_args for layer in r.layers):
        return True  # xargs: arguments read at run time
    for layer, spec in zip(r.layers, writes_nothing, strict=True):
        if layer.via == "find" and "{}" in layer.args and not (spec and spec.any_args):
            return True  # find -exec: {} is each file found, toold.toml too
    for word in r.command.words[1:]:  # a program name computed at run time is a danger
        if word.value is None:
            if _RUNTIME_TEXT.search(word.text):
                return True
            if names_any(_QUOTES.sub("", word.text), names):
                return True
    return False


_FIND_DELETERS = frozenset({"rm", "unlink", "shred", "truncate", "rmdir"})


def _layer_danger(layer: Layer) -> str | None:
    found = _program_layer_danger(layer)
    if found is None and layer.via == "find" and layer.program in _FIND_DELETERS:
        return f"find -exec {layer.program} deletes every file found"
    return found


def _program_layer_danger(layer: Layer) -> str | None:
    prog, args = layer.program, layer.args
    if layer.stdin_args and (prog in SHELLS or INTERPRETER.match(prog)):
        return f"xargs passes the arguments it reads to {prog}"
    if prog == "env" and operands(args, "uCPS"):
        return "an env prefix"
    inner = None if prog == "find" else wrapped(prog, args)  # find's own words all count
    if inner is None:
        return program_danger(prog, args, layer.stdin_args, layer.texts)
    # A wrapper's own words (env -C DIR, sudo --chdir=DIR, timeout 5) are judged here;
    # the command it runs is a layer of its own.
    own = len(args) - max((len(words) for words in inner), default=0)
    return program_danger(prog, args[: max(own, 0)], layer.stdin_args)


_GIT_RUNNERS = frozenset(
    {"submodule", "rebase", "bisect", "filter-branch", "difftool", "mergetool"}
)


def _scan_danger(layer: Layer) -> str | None:
    """An unknown program may be a wrapper or take a command as an argument.

    Look at every suffix of its arguments that starts a program (``busybox rm -rf d``)
    and at every argument holding a command line (``ssh host 'rm -rf d'``,
    ``tar --to-command='sh -c x'``); git subcommands that run commands count too.
    """
    args = layer.args
    is_git_runner = layer.program == "git" and any(a in _GIT_RUNNERS for a in args)
    if (layer.program in PROGRAMS and not is_git_runner) or layer.program in _WRAPPERS:
        return None  # known, or a wrapper whose programs are layers of their own
    suffixed = False
    candidates = 0
    for k, word in enumerate(args):
        if word is None:
            continue
        reason = _argument_danger(word)
        if not word.startswith("-"):
            prog = posixpath.basename(word)
            if prog in DANGER_PROGRAMS or prog in SHELLS or INTERPRETER.match(prog):
                candidates += 1
                if candidates > _MAX_CANDIDATES:  # each is judged on all later words
                    return f"{layer.program} names more than {_MAX_CANDIDATES} programs to judge"
                inner = Layer(prog, word, args[k + 1 :], layer.program)
                found = _layer_danger(inner) or code_reason(prog, inner.args)
                if not found and not suffixed and prog in _WRAPPERS:
                    # find -exec runs a body of its own: parse its words once as a command
                    # line (every later one again would be quadratic in the words).
                    suffixed = True
                    found = _suffix(args[k:])
                reason = reason or (None if (found or "").endswith("from its input") else found)
        if reason:
            return f"{reason} (run by {layer.program})"
    return None


_MAX_CANDIDATES = 16
"""Program names among an unknown program's words judged one by one (a bound on the work)."""
_NESTING = threading.local()
_MAX_NESTED = 16
"""``flock f flock f ... rm -rf d``: each wrapper's words are judged again, to this depth."""


def _suffix(words: list[str | None]) -> str | None:
    """The danger of the words as a command of their own (``flock f find d -exec rm {} +``)."""
    if any(w is None for w in words):
        return None
    return _argument_danger(shlex.join(str(w) for w in words), whole=True)


def _argument_danger(word: str, whole: bool = False) -> str | None:
    """The danger of a command line held in one argument (``--opt=CMD`` or ``CMD``)."""
    text = word.split("=", 1)[1] if word.startswith("-") and "=" in word and not whole else word
    if not any(c.isspace() for c in text.strip()):
        return None
    depth = getattr(_NESTING, "depth", 0)
    if depth >= _MAX_NESTED:
        return f"commands nested in arguments more than {_MAX_NESTED} deep"
    _NESTING.depth = depth + 1
    try:
        reason = analyse(text).danger
    finally:
        _NESTING.depth = depth
    if reason is None or "cannot be resolved" in reason or "does not parse" in reason:
        return None  # text that is not a command line, or nothing it would run for sure
    return reason


def _environment_danger(script: Script, resolved: list[Resolved]) -> str | None:
    """Why the command may print the daemon's environment (its API keys), or None."""
    if script.secrets:
        return f"it expands ${script.secrets[0]}, which may hold a secret of the daemon's"
    if _ENVIRON.search(script.text):
        return "it reads a process's environment (/proc/.../environ)"
    for r in resolved:
        cmd = r.command
        if cmd.kind == "declaration" and not cmd.assignments and not operands(cmd.argv[1:]):
            return f"{cmd.argv[0]} alone prints the environment"
        if (
            cmd.kind == "declaration"
            and has_option(cmd.argv[1:], "p")
            and not _names_harmless(operands(cmd.argv[1:]))
        ):
            return f"{cmd.argv[0]} -p prints variables"
        for layer in r.layers:
            if layer.program == "printenv" and not _names_harmless(operands(layer.args)):
                return "printenv prints the environment"
            if layer.program == "ps" and not is_read_only("ps", layer.args):
                return "ps e prints the environment of processes (the daemon's too)"
            if layer.program == "env" and not any(wrapped("env", layer.args) or [[]]):
                return "env alone prints the environment"
            declared = cmd.kind == "declaration"
            bare = not layer.args or (
                layer.program != "set" and not operands(layer.args) and has_option(layer.args, "p")
            )
            if layer.program in _LISTS_VARIABLES and not declared and bare:
                return f"{layer.program} alone prints the environment"
    return None


def _names_harmless(names: list[str | None]) -> bool:
    return bool(names) and all(n is not None and harmless(n) for n in names)


def _danger(script: Script, resolved: list[Resolved]) -> str | None:
    if not script.complete:
        return "the command does not parse completely"
    if _SQL.search(script.text):
        return "destructive SQL"
    for redirect in script.redirects:
        target = redirect.target.value if redirect.target else None
        if redirect.writes and target is not None and escapes(target):
            return f"a redirection writes outside the workspace ({target})"
    for r in resolved:
        for reason in (r.dynamic, r.code):
            if reason:
                return reason
        for check in (_layer_danger, _scan_danger):
            for layer in r.layers:
                reason = check(layer)
                if reason:
                    return reason
    if script.problems:
        return f"{script.problems[0]} cannot be resolved"
    return _environment_danger(script, resolved)


def _layer_read_only(layer: Layer, last: bool) -> bool:
    if "/" in layer.path and not layer.path.startswith(_SYSTEM_DIRS):
        return False
    if (posixpath.basename(layer.path) or layer.path) != layer.program:
        return False  # GIT, git.exe: another program, as far as the tables know
    if not last:
        if layer.program == "time" and has_option(layer.args, "oa", ("--output", "--append")):
            return False
        if any(a is not None and names_outside(a) for a in layer.args):
            return False  # xargs -a FILE reads its arguments from a file
        return layer.program in _READ_ONLY_WRAPPERS or layer.program == "xargs"
    if layer.stdin_args:
        spec = PROGRAMS.get(layer.program)  # arguments read at run time may name any file
        return spec is not None and spec.any_args and not spec.paths
    return is_read_only(layer.program, layer.args, layer.texts)


def _command_read_only(r: Resolved) -> bool:
    if r.dynamic or r.code or any(changes_behaviour(n) for n, _ in r.command.assignments):
        return False
    if r.command.words and _NAME_QUOTED.search(r.command.words[0].text):
        return False  # g\it, "ls": where the parse and bash may disagree on the name
    if r.command.kind == "declaration":
        return False
    if r.command.kind == "assignment":
        return True
    if any(layer.program == "find" for layer in r.layers[:-1]):
        return False  # find -exec: the body runs once per file
    last = len(r.layers) - 1
    return bool(r.layers) and all(
        _layer_read_only(lay, i == last) for i, lay in enumerate(r.layers)
    )


def _redirects_read_only(script: Script) -> bool:
    """No write but to /dev/null, every file read inside the workspace, no ``$X`` in bodies."""
    for r in script.redirects:
        if r.writes and (r.target is None or r.target.value != "/dev/null"):
            return False
        if r.target is not None and (r.target.value is None or escapes(r.target.value)):
            return False
        if r.body is not None and re.search(r"[$`]", r.body) and not r.body.startswith("'"):
            return False  # a here-document or here-string that expands variables
    return True


def analyse(text: str) -> Analysis:
    """Parse and classify one command line.

    Cached while words are judged lexically only; within ``judging_in`` (the guard's
    checks) where a word leads depends on the disk now, so it is judged afresh.
    """
    if judging():
        return _analyse(text)
    return _analyse_lexically(text)


def _analyse(text: str) -> Analysis:
    if len(text) > MAX_COMMAND or len(text.encode("utf-8", "surrogatepass")) > MAX_COMMAND:
        reason = "the command is longer than 64 KiB"
        script = Script(text, complete=False, problems=[reason])
        return Analysis(text, script, [], reason, False)
    script = parse(text)
    loops = loop_paths(script)
    resolved = [resolve(c, loops) for c in script.commands]
    read_only = (
        script.complete
        and not script.problems
        and bool(resolved)
        and _redirects_read_only(script)
        and all(_command_read_only(r) for r in resolved)
    )
    danger = _danger(script, resolved)
    return Analysis(text, script, resolved, danger, read_only and danger is None)


_analyse_lexically = lru_cache(maxsize=512)(_analyse)


def dangerous_reason(command: str) -> str | None:
    """Why the command is dangerous (or cannot be resolved), or None."""
    return analyse(command).danger


def is_auto_safe(command: str) -> bool:
    """Whether the command only reads (complete parse, every command read-only)."""
    return analyse(command).read_only
