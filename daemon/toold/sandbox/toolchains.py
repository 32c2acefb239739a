"""The user's toolchains, visible read-only inside the bwrap and docker sandboxes.

Everyday work (a project's tests, its build) needs the interpreters and compilers the
user installed in their home: pyenv, nvm, rustup's toolchains and cargo's proxies, Go.
The sandboxes bind those folders read-only at their own paths and point the tools at
them (their HOME inside is the sandbox's own). Never a folder that holds secrets:
``~/.cargo`` whole holds ``credentials.toml``, so only its ``bin``; nothing of ``~/.ssh``,
``~/.aws``, ``~/.gnupg``, ``~/.config``, ``~/.local/share`` (keyrings), ``~/.netrc``,
``~/.docker``, ``~/.git-credentials``, ``~/.npmrc``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

HOME_TOOLCHAINS = (".pyenv", ".nvm", ".cargo/bin", ".rustup", "go", ".local/bin")
"""Folders under the daemon user's home bound read-only where they exist."""
SYSTEM_TOOLCHAINS = ("/usr/local/go", "/opt/go")
"""Outside /usr (bound whole) or under it: bound when they exist and are not already."""
TOOL_HOMES = {"RUSTUP_HOME": ".rustup", "PYENV_ROOT": ".pyenv", "NVM_DIR": ".nvm"}
"""Variables telling a tool where its toolchain lives (its default is under HOME)."""
SECRET_NAMES = frozenset(
    {".ssh", ".aws", ".gnupg", ".netrc", ".docker", ".git-credentials", ".npmrc", ".config"}
)
"""Never bound, even when a toolchain path would lead into one (checked, not assumed)."""


def _home(source: Mapping[str, str] | None = None) -> str | None:
    home = (source if source is not None else os.environ).get("HOME") or os.path.expanduser("~")
    return home if home.startswith("/") and os.path.isdir(home) else None


def toolchain_paths(source: Mapping[str, str] | None = None) -> list[str]:
    """Existing toolchain folders to bind read-only (absolute, resolved, no secrets)."""
    home = _home(source)
    candidates = [os.path.join(home, name) for name in HOME_TOOLCHAINS] if home else []
    candidates += SYSTEM_TOOLCHAINS
    chosen: list[str] = []
    for path in candidates:
        if not os.path.isdir(path):
            continue
        real = os.path.realpath(path)
        if home and any(part in SECRET_NAMES for part in Path(real).relative_to("/").parts):
            continue
        if real not in chosen:
            chosen.append(real)
    return chosen


def toolchain_env(source: Mapping[str, str] | None = None) -> dict[str, str]:
    """RUSTUP_HOME, PYENV_ROOT, NVM_DIR and GOPATH for the toolchains that exist: the
    daemon's own value when it has one, else the folder under its home."""
    source = source if source is not None else os.environ
    home = _home(source)
    env: dict[str, str] = {}
    for name, folder in TOOL_HOMES.items():
        value = source.get(name) or (os.path.join(home, folder) if home else "")
        if value and os.path.isdir(value):
            env[name] = value
    gopath = source.get("GOPATH") or (os.path.join(home, "go") if home else "")
    if gopath and os.path.isdir(gopath):
        env["GOPATH"] = gopath
    return env


def git_identity(folder: Path) -> Path | None:
    """A global gitconfig holding only the user's name and email (``git commit`` needs
    them; nothing else of ~/.gitconfig crosses: it may name credential helpers or tokens).
    Written into ``folder``; None when the user has no identity configured."""
    lines = []
    for key in ("user.name", "user.email"):
        try:
            done = subprocess.run(
                ["git", "config", "--global", "--get", key],
                capture_output=True,
                text=True,
                timeout=5,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        value = done.stdout.strip()
        if done.returncode == 0 and value and "\n" not in value:
            escaped = value.replace("\\", "\\\\").replace('"', '\\"')
            lines.append(f'\t{key.partition(".")[2]} = "{escaped}"\n')
    if not lines:
        return None
    path = folder / "gitconfig"
    path.write_text("[user]\n" + "".join(lines), encoding="utf-8")
    return path
