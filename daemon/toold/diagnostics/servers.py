"""Which language servers check which files: the defaults detected on PATH, and the user's.

``[diagnostics.servers.<name>]`` in toold.toml adds a server (``command`` and ``files``),
changes a default's command or globs, or turns it off (``enabled = false``). A default
is used when its program is found on the daemon's PATH or beside its Python (a
virtualenv's ``bin``); for Python, ty is preferred, then basedpyright, then pyright, and
ruff runs beside whichever of them is there.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import PurePosixPath

from toold.config import DIAGNOSTICS_DEFAULTS, DiagnosticsConfig

PYTHON = ("*.py", "*.pyi")
TYPESCRIPT = ("*.ts", "*.tsx", "*.js", "*.jsx", "*.mjs", "*.cjs", "*.mts", "*.cts")
SHELL = ("*.sh", "*.bash")

DEFAULTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "ruff": (("ruff", "server"), PYTHON),
    "ty": (("ty", "server"), PYTHON),
    "basedpyright": (("basedpyright-langserver", "--stdio"), PYTHON),
    "pyright": (("pyright-langserver", "--stdio"), PYTHON),
    "typescript": (("typescript-language-server", "--stdio"), TYPESCRIPT),
    "bash": (("bash-language-server", "start"), SHELL),
}
"""Each default server's command and globs (the names are toold.config's)."""
assert tuple(DEFAULTS) == DIAGNOSTICS_DEFAULTS
TYPE_CHECKERS = ("ty", "basedpyright", "pyright")
"""One Python type checker at most: the first of these that is installed."""
MATCHES_KEPT = 4096
"""Matches one Servers keeps (file names, or paths when a glob has "/"); then it starts over."""

LANGUAGE_IDS = {
    ".py": "python",
    ".pyi": "python",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "typescriptreact",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascriptreact",
    ".sh": "shellscript",
    ".bash": "shellscript",
}


@dataclass(frozen=True)
class ServerSpec:
    """A server to run for the files its globs match."""

    name: str
    argv: tuple[str, ...]
    globs: tuple[str, ...]

    def matches(self, relative: str) -> bool:
        """Whether the file (its path in the workspace, "/"-separated) is this server's."""
        name = PurePosixPath(relative).name
        return any(
            fnmatch.fnmatchcase(relative if "/" in glob else name, glob) for glob in self.globs
        )


@dataclass(frozen=True)
class Servers:
    """The servers to use, and those the user configured that are not installed (named
    to the user once)."""

    usable: tuple[ServerSpec, ...]
    missing: tuple[ServerSpec, ...]
    _matched: dict[str, tuple[tuple[ServerSpec, ...], tuple[ServerSpec, ...]]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """Each match, by what it depends on (``_match``): every write asks (the
    diagnostics step's before_call), and a reload makes a new Servers (``resolved``)."""

    @cached_property
    def _by_path(self) -> bool:
        """Whether a glob has a "/": then the match depends on the whole path."""
        return any("/" in glob for spec in self.usable + self.missing for glob in spec.globs)

    def _match(self, relative: str) -> tuple[tuple[ServerSpec, ...], tuple[ServerSpec, ...]]:
        """The usable and the missing servers whose globs match the file."""
        # A glob without "/" matches the file's name; one with "/" its whole path.
        key = relative if self._by_path else PurePosixPath(relative).name
        found = self._matched.get(key)
        if found is None:
            if len(self._matched) >= MATCHES_KEPT:
                self._matched.clear()
            found = self._matched[key] = (
                tuple(spec for spec in self.usable if spec.matches(relative)),
                tuple(spec for spec in self.missing if spec.matches(relative)),
            )
        return found

    def for_file(self, relative: str) -> list[ServerSpec]:
        """The usable servers checking this file."""
        return list(self._match(relative)[0])

    def missing_for(self, relative: str) -> list[ServerSpec]:
        """Servers that would check this file but are not installed, when none is usable."""
        usable, missing = self._match(relative)
        return [] if usable else list(missing)


def find_program(program: str) -> str | None:
    """The program's absolute path: as given, on PATH, or beside this Python."""
    if os.sep in program:
        return program if os.access(program, os.X_OK) else None
    beside = os.path.dirname(os.path.realpath(sys.executable))
    return shutil.which(program, path=beside) or shutil.which(program)


def resolve(config: DiagnosticsConfig) -> Servers:
    """The servers for this configuration, each command's program found on disk."""
    usable: list[ServerSpec] = []
    missing: list[ServerSpec] = []
    checker_found = False
    names = [*DEFAULTS, *(name for name in config.servers if name not in DEFAULTS)]
    for name in names:
        own = config.servers.get(name)
        if own is not None and not own.enabled:
            continue
        argv, globs = DEFAULTS.get(name, ((), ()))
        if own is not None:
            argv = tuple(own.command) if own.command is not None else argv
            globs = tuple(own.files) if own.files is not None else globs
        program = find_program(argv[0])
        spec = ServerSpec(name, argv if program is None else (program, *argv[1:]), globs)
        if name in TYPE_CHECKERS and own is None:
            # Only the first installed checker, and only the first one named when none is.
            if checker_found or (program is None and name != TYPE_CHECKERS[0]):
                continue
            checker_found = program is not None
        if program is None:
            if own is not None:  # a default not installed is simply not used
                missing.append(spec)
        else:
            usable.append(spec)
    return Servers(tuple(usable), tuple(missing))


_RESOLVED: dict[int, tuple[DiagnosticsConfig, Servers]] = {}


def resolved(config: DiagnosticsConfig) -> Servers:
    """``resolve``, once per configuration object (a reload makes a new one)."""
    kept = _RESOLVED.get(id(config))
    if kept is None or kept[0] is not config:
        if len(_RESOLVED) > 64:  # old configurations: their ids may be reused
            _RESOLVED.clear()
        kept = _RESOLVED[id(config)] = (config, resolve(config))
    return kept[1]


def language_id(relative: str) -> str:
    """The LSP languageId for a file, by its extension ("plaintext" when unknown)."""
    return LANGUAGE_IDS.get(PurePosixPath(relative).suffix.lower(), "plaintext")
