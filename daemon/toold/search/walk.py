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

    Order is os.walk's with names sorted: a folder's files first, then each
    sub-folder in turn (the order ``walk_key`` sorts by). Symlinks are never
    followed nor yielded; ``skip_dirs`` apply only below ``root``, so an explicit
    root inside one is searched.
    """
    if root.is_file() and not root.is_symlink():
        yield root
        return
    pending = [os.fspath(root)]
    while pending:
        folder = pending.pop()
        subdirs: list[str] = []
        for entry in _sorted_entries(folder):
            if not include_hidden and entry.name.startswith("."):
                continue
            try:
                if entry.is_symlink():
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in skip_dirs:
                        subdirs.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    yield Path(entry.path)
            except OSError:
                continue
        pending.extend(reversed(subdirs))


def walk_key(rel_posix: str) -> tuple[tuple[int, str], ...]:
    """Sort key reproducing walk_files' order for root-relative posix paths."""
    *folders, name = rel_posix.split("/")
    return (*((1, f) for f in folders), (0, name))
