"""Whole-tree fingerprints for undo tests: every file's bytes and mode, every folder."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

SCENARIO = "rm a.txt; echo new > b.txt; mkdir d; echo x > d/c.txt; chmod +x e.sh"
"""The issue's command: a delete, a change, a new folder with a file, a mode change."""


def fingerprint(root: Path) -> dict[str, Any]:
    """Every entry below ``root`` but .toold/: a file's bytes and mode, a folder's name."""
    found: dict[str, Any] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".toold"]
        for name in dirs:
            found[os.path.relpath(os.path.join(folder, name), root) + "/"] = "folder"
        for name in files:
            path = os.path.join(folder, name)
            mode = stat.S_IMODE(os.lstat(path).st_mode)
            found[os.path.relpath(path, root)] = (Path(path).read_bytes(), oct(mode))
    return found


def seed(root: Path) -> None:
    (root / "a.txt").write_bytes(b"alpha\r\n\x00")
    (root / "b.txt").write_text("old\n")
    (root / "e.sh").write_text("echo e\n")
    (root / "e.sh").chmod(0o644)
    (root / "keep").mkdir()
    (root / "keep" / "k.txt").write_text("k")
