"""Walking a workspace in sorted order with the skip list."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

SKIP_DIRS = frozenset({".git", ".pytest_cache", ".venv", "__pycache__", "node_modules", ".toold"})


def _sorted_entries(folder: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as it:
            return sorted(it, key=lambda e: e.name)
    except OSError:
        return []


def walk_files(
    root: Path,
    *,
    skip_dirs: frozenset[str] = SKIP_DIRS,
    include_hidden: bool = True,
) -> Iterator[Path]:
    """Yield regular files under ``root`` (or ``root`` itself if it is a file).

    Order is that of sorted path parts: depth-first, names sorted, a folder's
    files in the position of its name. Symlinks are never followed nor yielded;
    ``skip_dirs`` apply only below ``root``, so an explicit root inside one is searched.
    """
    if root.is_file() and not root.is_symlink():
        yield root
        return
    stack = [iter(_sorted_entries(os.fspath(root)))]
    while stack:
        entry = next(stack[-1], None)
        if entry is None:
            stack.pop()
            continue
        if not include_hidden and entry.name.startswith("."):
            continue
        try:
            if entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in skip_dirs:
                    stack.append(iter(_sorted_entries(entry.path)))
            elif entry.is_file(follow_symlinks=False):
                yield Path(entry.path)
        except OSError:
            continue


def sort_key(path: str) -> tuple[str, ...]:
    """Key that orders posix paths by their parts, like sorted(Path objects)."""
    return tuple(path.split("/"))
