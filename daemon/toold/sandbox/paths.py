"""safe_path: the workspace boundary every file and search tool passes through."""

from __future__ import annotations

import os
import re
from pathlib import Path

_WINDOWS_ABSOLUTE = re.compile(r"^(?:[A-Za-z]:[\\/]|\\\\|//)")


def safe_path(workspace: Path, path: str | os.PathLike[str]) -> Path:
    """Resolve ``path`` inside ``workspace`` or raise PermissionError.

    Checks, in the spec's order: home-relative, absolute, escaping the workspace,
    then any existing symlink in the chain. ``workspace`` must already be resolved.
    """
    raw = os.fspath(path)
    if "\x00" in raw:
        raise PermissionError(f"NUL bytes are not allowed in paths: {raw!r}")
    if raw.startswith("~"):
        raise PermissionError(f"Home-relative paths are not allowed: '{raw}'")
    if os.path.isabs(raw) or _WINDOWS_ABSOLUTE.match(raw):
        raise PermissionError(f"Absolute paths are not allowed: '{raw}'")
    root = os.fspath(workspace)
    candidate = os.path.normpath(os.path.join(root, raw))
    if candidate != root and not candidate.startswith(root.rstrip(os.sep) + os.sep):
        raise PermissionError(f"Path '{raw}' escapes workspace {workspace}")
    current = root
    for part in Path(os.path.relpath(candidate, root)).parts:
        if part == ".":
            continue
        current = os.path.join(current, part)
        if os.path.islink(current):
            raise PermissionError(f"Symlink detected in path chain: {current}")
    return Path(candidate)


def relative_posix(workspace: Path, target: Path) -> str:
    """Workspace-relative posix form of an absolute path inside the workspace."""
    rel = os.path.relpath(target, workspace)
    return Path(rel).as_posix()
