"""A simple command resolved into layers: the program and every program a wrapper runs.

``resolve`` unwraps one simple command of the parse (shell.py): the program, then every
program a wrapper runs (``sudo``, ``env``, ``command``, ``builtin``, ``exec``, ``xargs``,
``nice``, ``ionice``, ``timeout``, ``nohup``, ``stdbuf``, ``time``, ``chroot``, ``doas``,
``setsid``, ``coproc``, ``find -exec``), each a ``Layer``. What cannot be resolved
without running it is recorded, never guessed: a program name computed at run time, code
handed to a shell or an interpreter (interpreters.py: ``sh -c``, ``| sh``, here-strings,
``eval``, ``source``, ``python -c``, ``perl -e``...), assignments to variables that make
programs run code (``BASH_ENV``, ``GIT_PAGER``...). commands.py judges the layers.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field

from toold.permissions.interpreters import CODE_VARIABLE, code_reason, git_arguments, skip_options
from toold.permissions.paths import LOOP_WORD
from toold.permissions.shell import SimpleCommand

_GLOB = re.compile(r"[*?\[]")
_NOT_A_NAME = re.compile(r"[\s\'\"\\]")


@dataclass
class Layer:
    """One program of a simple command: the command itself or what a wrapper runs."""

    program: str
    """The basename of the program."""
    path: str
    args: list[str | None]
    via: str | None = None
    """The wrapper that runs it (None for the command itself)."""
    stdin_args: bool = False
    """Arguments are added at run time (xargs)."""
    parent: int | None = None
    """Index of the wrapper's layer in ``Resolved.layers``."""
    texts: list[str] = field(default_factory=list)
    """Each argument as written (for those only known at run time)."""

    def normalised(self) -> str:
        """The layer as rules see it: basename, git's global options dropped, quotes normalised."""
        args = git_arguments(self.args) if self.program == "git" else self.args
        return shlex.join([self.program, *("$?" if a is None else a for a in args)])


@dataclass
class Resolved:
    """A simple command resolved into layers, with what could not be resolved."""

    command: SimpleCommand
    layers: list[Layer] = field(default_factory=list)
    dynamic: str | None = None
    """Why the program that runs cannot be known (a name computed at run time)."""
    code: str | None = None
    """Why it runs code the parse cannot see."""


_VALUED = {"nice": "n", "ionice": "cnp", "stdbuf": "ioe", "time": "fo"}
"""Short options that take a value, per wrapper (``time -p`` takes none: rm follows)."""


def program_name(path: str) -> str:
    """The program as the tables name it: the basename, lower case, without ``.exe``.

    A case-insensitive file system (macOS) runs git for ``GIT``; WSL runs Windows
    programs named ``git.exe``. The danger tables judge them as git; read-only needs
    the name exactly as listed.
    """
    name = (posixpath.basename(path) or path).lower()
    return name[:-4] if name.endswith(".exe") and len(name) > 4 else name


def wrapped(program: str, args: list[str | None]) -> list[list[str | None]] | None:
    """The argument lists of the programs a wrapper runs (None: not a wrapper)."""
    if program in ("sudo", "doas"):
        return [args[skip_options(args, "ugCDhprtTUa", ("--user", "--group", "--chdir")) :]]
    if program == "env":
        i = skip_options(args, "uCPS", ("--unset", "--chdir", "--split-string"))
        while i < len(args) and args[i] is not None and "=" in str(args[i]):
            i += 1
        return [args[i:]]
    options = [a for a in args[: skip_options(args, "")] if a is not None]
    if program == "command" and any(set(a[1:]) & set("vV") for a in options):
        return []  # command -v only prints where a program is
    if program in ("command", "builtin", "nohup", "coproc", "setsid", "exec"):
        return [args[skip_options(args, "a") :]]
    if program in _VALUED:
        return [
            args[skip_options(args, _VALUED[program], ("--adjustment", "--output", "--format")) :]
        ]
    if program in ("timeout", "chroot"):
        i = skip_options(args, "sk", ("--signal", "--kill-after", "--userspec", "--groups"))
        return [args[i + 1 :]]
    if program == "xargs":
        i = skip_options(args, "InPLdEsa", ("--max-args", "--max-procs", "--delimiter"))
        return [args[i:] or ["echo"]]
    if program == "find":
        bodies: list[list[str | None]] = []
        for i, arg in enumerate(args):
            if arg in ("-exec", "-execdir", "-ok", "-okdir"):
                body: list[str | None] = []
                for word in args[i + 1 :]:
                    if word in (";", "+"):
                        break
                    body.append(word)
                bodies.append(body)
        return bodies
    return None


def _texts_of(inner: list[str | None], args: list[str | None], texts: list[str]) -> list[str]:
    """How the words of a wrapped command were written: its slice of the wrapper's words."""
    n = len(inner)
    starts = [len(args) - n, *range(len(args) - n + 1)]
    for start in starts:
        if n and start >= 0 and args[start : start + n] == inner:
            return texts[start : start + n]
    return ["$X" for _ in inner]  # xargs' default echo: nothing was written


def resolve(cmd: SimpleCommand, loops: frozenset[str] = frozenset()) -> Resolved:
    """``cmd`` resolved into layers (``loops``: variables of ``for`` loops over workspace
    paths, paths.loop_paths)."""
    out = Resolved(cmd)
    texts = [w.text for w in cmd.words]
    for i, text in enumerate(texts):
        found = LOOP_WORD.match(text)
        if found and found.group(1) in loops:
            texts[i] = "loop-item"  # one of the loop's paths, all inside the workspace
    for variable, _ in cmd.assignments:
        if CODE_VARIABLE.match(variable):
            out.code = f"assigning {variable} changes what programs run"
    pending: list[tuple[list[str | None], int | None, bool, list[str]]] = [
        (cmd.argv, None, False, texts)
    ]
    while pending:
        argv, parent, stdin_args, texts = pending.pop(0)
        via = None if parent is None else out.layers[parent].program
        if not argv:
            continue
        name = argv[0]
        if (
            name is None
            or (_GLOB.search(name) and name not in ("[", "[["))
            or name[:1] == "~"
            or _NOT_A_NAME.search(name)
        ):
            shown = cmd.words[0].text if via is None and cmd.words else (name or "$?")
            out.dynamic = f"the program name {shown} cannot be resolved"
            continue
        layer = Layer(program_name(name), name, list(argv[1:]), via, stdin_args, parent)
        layer.texts = texts[1:] if len(texts) == len(argv) else ["$X" for _ in layer.args]
        index = len(out.layers)
        out.layers.append(layer)
        out.code = out.code or code_reason(layer.program, layer.args)
        if layer.program == "env":
            for arg in layer.args:
                if arg is not None and "=" in arg and CODE_VARIABLE.match(arg.split("=")[0]):
                    out.code = f"assigning {arg.split('=')[0]} changes what programs run"
        for inner in wrapped(layer.program, layer.args) or []:
            inner_texts = _texts_of(inner, layer.args, layer.texts)
            pending.append((inner, index, stdin_args or layer.program == "xargs", inner_texts))
    return out
