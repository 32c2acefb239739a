"""Programs that run code the parse cannot see: shells, interpreters, code-taking builtins.

``code_reason`` says why one program with its arguments runs code that is not in the
command line as parsed: ``sh -c``, a shell or interpreter reading its program from
standard input (``| sh``, here-strings, ``python -``), inline code options
(``python -c``, ``perl -e``, ``node -e``, ``php -r``...), ``eval``/``source``/``.``,
``alias``/``trap`` bodies, awk programs calling ``system``, sed's ``e`` command, and git
configuration given with ``-c`` that names a command (``core.pager``, ``alias.*``...).
"""

from __future__ import annotations

import re

from toold.permissions.readonly import has_option, sed_script_ok, sed_scripts

SHELLS = frozenset(
    {"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "busybox"}
)
INTERPRETER = re.compile(
    r"^(?:python[0-9.]*|pypy[0-9.]*|perl[0-9.]*|ruby[0-9.]*|node|nodejs|deno|bun|php[0-9.]*"
    r"|lua[0-9.]*|luajit|tclsh[0-9.]*|wish|rscript|osascript|pwsh|powershell|jshell|irb|ghci)$",
    re.IGNORECASE,
)
# Per interpreter: short option letters that take code, letters whose option takes the
# rest of the word (or the next word) as a value, and long options that take code.
_CODE_FLAGS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "python": ("c", "WXmQ", ("--command",)),
    "pypy": ("c", "WXmQ", ()),
    "perl": ("eE", "MmIixl0DCd", ()),
    "ruby": ("e", "IrCEFKTWx", ("--eval",)),
    "node": ("ep", "r", ("--eval", "--print")),
    "nodejs": ("ep", "r", ("--eval", "--print")),
    "bun": ("e", "r", ("--eval", "--print")),
    "deno": ("", "", ("eval",)),
    "php": ("rBRE", "cdzf", ()),
    "lua": ("e", "l", ()),
    "luajit": ("e", "lj", ()),
    "rscript": ("e", "", ("--expr",)),
    "osascript": ("e", "", ()),
    "pwsh": ("c", "", ("-command", "-Command", "-c", "-EncodedCommand")),
    "powershell": ("c", "", ("-command", "-Command", "-EncodedCommand")),
}
# Options that load code the command line does not show: modules, startup files, an
# interactive session reading its input (``python -i``, ``perl -M``, ``node -r``...).
_LOAD_FLAGS: dict[str, tuple[str, tuple[str, ...]]] = {
    "python": ("i", ()),
    "pypy": ("i", ()),
    "perl": ("Mm", ()),
    "ruby": ("r", ("--require",)),
    "node": ("ri", ("--require", "--import", "--loader", "--experimental-loader", "--interactive")),
    "nodejs": ("ri", ("--require", "--import", "--loader", "--experimental-loader")),
    "bun": ("r", ("--preload", "--require")),
    "php": ("dac", ()),
    "lua": ("il", ()),
    "luajit": ("il", ()),
}
_SHELL_LOADS = ("--rcfile", "--init-file", "--interactive")
_CODE_BUILTINS = {
    "eval": "eval runs its arguments as code",
    "source": "source runs a file as code",
    ".": ". runs a file as code",
    "alias": "alias defines code",
    "trap": "trap defines code",
    "enable": "enable loads builtins",
    "fc": "fc runs commands from history",
    "watch": "watch runs its arguments through sh",
}
CODE_VARIABLE = re.compile(
    r"^(?:PATH|BASH_ENV|ENV|PROMPT_COMMAND|PS4|SHELLOPTS|BASHOPTS|LD_PRELOAD|LD_AUDIT"
    r"|LD_LIBRARY_PATH|DYLD_\w+|\w*PAGER|EDITOR|VISUAL|SSH_ASKPASS|BROWSER|PERL5OPT"
    r"|PERL5LIB|PERLLIB|NODE_OPTIONS|PYTHONSTARTUP|PYTHONPATH|PYTHONHOME|RUBYOPT|RUBYLIB"
    r"|LESSOPEN|LESSCLOSE|GIT_(?:EXTERNAL_DIFF|SSH|SSH_COMMAND|EDITOR|SEQUENCE_EDITOR"
    r"|ASKPASS|CONFIG\w*|EXEC_PATH|PROXY_COMMAND|TEMPLATE_DIR))$"
)
# Variables that change what a read-only program does or which program runs.

_SAFE_GIT_CONFIG = (
    "user.", "color.", "core.quotepath", "core.autocrlf", "core.safecrlf", "advice.",
    "init.defaultbranch", "commit.gpgsign", "tag.gpgsign", "log.", "column.", "i18n.",
    "diff.noprefix", "diff.renames", "diff.algorithm", "merge.conflictstyle", "push.default",
    "pull.rebase", "fetch.prune", "gc.auto", "safe.directory",
)  # fmt: skip
GIT_GLOBAL_VALUES = frozenset(
    {"-c", "-C", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix"}
)


def git_arguments(args: list[str | None]) -> list[str | None]:
    """git's arguments with the global options before the subcommand removed."""
    i = 0
    while i < len(args) and (args[i] is None or str(args[i]).startswith("-")):
        i += 2 if args[i] in GIT_GLOBAL_VALUES else 1
    return args[i:]


def _git_config_keys(args: list[str | None]) -> list[str | None]:
    keys: list[str | None] = []
    i = 0
    while i < len(args) and (args[i] is None or str(args[i]).startswith("-")):
        arg = args[i]
        if arg == "-c":
            value = args[i + 1] if i + 1 < len(args) else None
            keys.append(None if value is None else value.split("=", 1)[0].lower())
        elif arg is None or arg.startswith("--config-env"):
            keys.append(None)
        i += 2 if arg in GIT_GLOBAL_VALUES else 1
    return keys


def skip_options(args: list[str | None], values: str, long_values: tuple[str, ...] = ()) -> int:
    """Index of the first operand: options (and their separate values) skipped."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg is None or arg == "-" or not arg.startswith("-"):
            return i
        if arg == "--":
            return i + 1
        if arg.startswith("--"):
            i += 2 if arg in long_values else 1
        else:
            i += 2 if arg[-1] in values else 1
    return i


_ASSIGNING_BUILTINS = frozenset(
    {"read", "mapfile", "readarray", "getopts", "printf", "declare", "typeset", "local"}
    | {"export", "readonly", "let", "wait", "unset"}
)


_VIM = frozenset(
    {"vi", "vim", "nvim", "view", "vimdiff", "gvim", "rvim", "rview", "evim", "nvi", "vis"}
)
_VIM_CODE = ("--cmd", "--headless", "--startuptime")
_VIM_CODE_LETTERS = frozenset("cSsuleEwW")
"""-c/-S/-s/-u/-l/-e/-E/-w: commands, scripts, keys, config, Lua, ex mode (read from input)."""
_EMACS_CODE = (
    "--eval", "-eval", "-e", "--execute", "-l", "--load", "-f", "--funcall", "--script", "-x",
    "-batch", "--batch",
)  # fmt: skip


def editor_code(program: str, args: list[str | None]) -> str | None:
    """Editors and pagers fed commands: vim -c/+cmd/--cmd/-S, ex and ed, emacs --eval, less +."""
    if program in ("ex", "ed", "red", "edit", "at", "batch"):
        return f"{program} reads commands (which may run a shell) from its input"
    if program in _VIM or program.startswith("emacs"):
        code = _VIM_CODE if program in _VIM else _EMACS_CODE
        for arg in args:
            letters = set(arg[1:]) if arg and arg[:1] == "-" and arg[1:2] != "-" else set()
            if (
                arg is None
                or arg.startswith("+")
                or arg.split("=", 1)[0] in code
                or (program in _VIM and letters & _VIM_CODE_LETTERS)
            ):
                return f"{program} {arg or '$?'} runs editor commands"
    if program in ("less", "more", "most") and any(a is None or a.startswith("+") for a in args):
        return f"{program} + runs pager commands"
    return None


TOOLD_READ_ONLY = frozenset({"tools", "jobs", "--version", "--help", "-h"})
"""toold subcommands that run no tool: listing the tools, the jobs, the version."""


def toold_code(args: list[str | None]) -> str | None:
    """toold itself (or ``python -m toold``): ``call``, ``run``, ``serve``, ``mcp``, ``acp``
    run tools as the user, through the workspace's engine, outside this call's guard;
    ``daemon`` starts or stops the engine every session shares."""
    words = [a for a in args if a is None or not a.startswith("-") or a in TOOLD_READ_ONLY]
    if words and words[0] in TOOLD_READ_ONLY and "status" not in words:
        return None
    first = words[0] if words else None
    if first == "daemon":
        return "toold daemon starts or stops the engine every session shares"
    return f"toold {first or '(no command)'} runs tools as you, outside this call's guard"


def code_reason(program: str, args: list[str | None]) -> str | None:
    """Why this program runs code that the parse cannot see, or None."""
    found = editor_code(program, args)
    if found:
        return found
    if program == "toold":
        return toold_code(args)
    if program == "hash" and any(a is None or a.startswith("-p") for a in args):
        return "hash -p renames a program"
    if program in _ASSIGNING_BUILTINS and (program != "printf" or "-v" in args):
        for arg in args:
            name = (arg or "").split("=", 1)[0].split("[", 1)[0]
            if arg is None or CODE_VARIABLE.match(name) or "[" in arg:
                return f"{program} may assign {name or 'a variable'} (which program runs, or code)"
    if program in _CODE_BUILTINS:
        if program == "alias" and not any(a is None or "=" in a for a in args):
            return None  # listing aliases
        if program in ("trap", "enable", "fc") and not args:
            return None
        return _CODE_BUILTINS[program]
    if program in SHELLS:
        i = skip_options(args, "oO", ("--rcfile", "--init-file"))
        options = [a for a in args[:i] if a is None or a.startswith(("-", "+"))]
        if any(a is None or (not a.startswith("--") and "c" in a[1:]) for a in options):
            return f"{program} -c runs a command string"
        flags = [a for a in options if a is not None]
        loads = next((a for a in flags if a.split("=")[0] in _SHELL_LOADS), None)
        if loads is not None or any(a[:1] == "-" and a[1:2] != "-" and "i" in a for a in flags):
            return f"{program} {loads or '-i'} runs startup code the guard cannot see"
        if program == "busybox" or "--version" in options or "--help" in options:
            return None
        if i < len(args) and args[i] is None:
            return f"the script {program} runs cannot be resolved"
        if arg_index_is_stdin(args, i) or "-s" in options:
            return f"{program} reads commands from its input"
        return None
    if program == "env" and has_option(args, "S", ("--split-string",)):
        return "env -S splits a string into a command"
    if program in ("awk", "gawk", "mawk", "nawk"):
        text = " ".join(a or "$?" for a in args)
        if "system" in text or "|" in text or "@load" in text or any(a is None for a in args):
            return f"the {program} program runs commands"
    if program == "sed":
        scripts = sed_scripts(args)
        if scripts is None or any(not sed_script_ok(s) and "e" in s for s in scripts):
            return "the sed script may run commands (e)"
    if program == "git":
        for key in _git_config_keys(args):
            if key is None or not key.startswith(_SAFE_GIT_CONFIG):
                return f"git -c {key or '?'} can make git run commands"
    if program in ("pwsh", "powershell"):
        return _powershell_code(program, args)
    if INTERPRETER.match(program):
        return _interpreter_code(program, args)
    return None


def _powershell_code(program: str, args: list[str | None]) -> str | None:
    """PowerShell takes -Command, -EncodedCommand and their abbreviations (-c, -e, -ec,
    -enc), case-insensitive, after - or /; with no script it reads its input."""
    for arg in args:
        name = (arg or "-?").lstrip("-/").lower()
        if arg is None or (
            arg[:1] in "-/" and (name in ("ec", "enc", "?") or "encodedcommand".startswith(name))
        ):
            return f"{program} {arg or '$?'} runs a command string"
        if name and "command".startswith(name) and arg[:1] in "-/":
            return f"{program} {arg} runs a command string"
    if not [a for a in args if a and a[:1] not in "-/"]:
        return f"{program} reads commands from its input"
    return None


def _interpreter_code(program: str, args: list[str | None]) -> str | None:
    if any(a in ("-V", "--version", "-h", "--help", "-v") for a in args[:1]):
        return None
    family = re.sub(r"[0-9.]+$", "", program.lower())
    code, valued, long_code = _CODE_FLAGS.get(family, ("", "", ()))
    loads, long_loads = _LOAD_FLAGS.get(family, ("", ()))
    i = 0
    while i < len(args):
        arg = args[i]
        if arg is None:
            return f"{program} options cannot be resolved"
        if arg in long_code or any(arg.startswith(f"{c}=") for c in long_code):
            return f"{program} {arg} runs inline code"
        if arg.split("=", 1)[0] in long_loads:
            return f"{program} {arg} loads code the guard cannot see"
        if arg == "--" or not arg.startswith("-") or arg == "-":
            break
        if not arg.startswith("--"):
            for j, letter in enumerate(arg[1:]):
                if letter in code:
                    return f"{program} -{letter} runs inline code"
                if letter in loads:
                    return f"{program} -{letter} loads code the guard cannot see"
                if letter in valued:
                    if letter == "m" and family in ("python", "pypy"):
                        rest = arg[j + 2 :] or (args[i + 1] if i + 1 < len(args) else None)
                        if rest is None or rest.split(".")[0] == "toold":
                            return toold_code(args[i + (1 if not arg[j + 2 :] else 0) + 1 :])
                        return None  # a module: a file, like a script
                    i += 1 if j + 2 == len(arg) else 0
                    break
        i += 1
    if arg_index_is_stdin(args, i):
        return f"{program} reads code from its input"
    return None


def arg_index_is_stdin(args: list[str | None], i: int) -> bool:
    """Whether the interpreter's script operand is missing or standard input."""
    while i < len(args) and args[i] == "--":
        i += 1
    return i >= len(args) or args[i] in ("-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0")
