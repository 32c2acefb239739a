"""No descriptor is kept by a walk or an open that is refused, fails, or succeeds.

Every way the descriptor walk ends (a symlink on the way or at the end, a file where a
folder should be, nothing there, a folder moved out) is set up on disk, each entry point
of sandbox.paths and search.walk is called on it, and the process's descriptors are
counted before and after. A Tree on a sub-folder once kept its parent's descriptor on
every call (808 descriptors of the workspace root after a swap-race run).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from toold.sandbox.paths import DIR_FLAGS, open_in_workspace
from toold.search.walk import Tree, lstat_in_workspace

PATHS = (
    ".",
    "dir",
    "dir/sub",
    "dir/file.txt",
    "dir/sub/deep.txt",
    "link",  # -> outside folder
    "link/secret.txt",
    "dir/filelink",  # -> outside file
    "dir/file.txt/below",  # a file where a folder should be
    "missing",
    "missing/below",
    "dir/missing.txt",
    "dir/fifo",
)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path.resolve()
    ws, outside = root / "ws", root / "outside"
    (ws / "dir" / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n", encoding="utf-8")
    (ws / "dir" / "file.txt").write_text("inside\n", encoding="utf-8")
    (ws / "dir" / "sub" / "deep.txt").write_text("deep\n", encoding="utf-8")
    (ws / "link").symlink_to(outside)
    (ws / "dir" / "filelink").symlink_to(outside / "secret.txt")
    os.mkfifo(ws / "dir" / "fifo")
    return ws


def _count() -> int:
    return len(os.listdir("/proc/self/fd"))


def _walk(ws: Path, path: str) -> None:
    with Tree(ws, path, respect_ignores=True) as tree:
        for found in tree.files():
            found.read(1 << 16)


def _select(ws: Path, path: str) -> None:
    with Tree(ws, path) as tree:
        list(tree.select(["sub/deep.txt", "file.txt", "nope/x"]))


def _abandoned(ws: Path, path: str) -> None:
    with Tree(ws, path) as tree:
        next(tree.files(), None)  # the generator is dropped half-way


def _open(flags: int, **options: bool) -> Callable[[Path, str], None]:
    def opened(ws: Path, path: str) -> None:
        os.close(open_in_workspace(ws, path, flags, **options))

    return opened


ENTRIES: dict[str, Callable[[Path, str], object]] = {
    "tree": _walk,
    "select": _select,
    "abandoned": _abandoned,
    "lstat": lstat_in_workspace,
    "open_dir": _open(DIR_FLAGS),
    "open_read": _open(os.O_RDONLY | os.O_NONBLOCK),
    "open_append": _open(os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK, single_link=True),
    "make_dirs": _open(DIR_FLAGS, create_parents=True),
}


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_no_descriptor_is_kept_whatever_the_path(workspace: Path, entry: str) -> None:
    call = ENTRIES[entry]
    outcomes = set()
    for path in PATHS:
        for _ in range(2):  # once warm: the first call may import or cache
            before = _count()
            try:
                call(workspace, path)
                outcome = "ok"
            except OSError as exc:  # PermissionError, FileNotFoundError, ELOOP, ENXIO...
                outcome = type(exc).__name__
            assert _count() == before, (entry, path, outcome)
        outcomes.add(outcome)
    assert "ok" in outcomes and len(outcomes) > 1, outcomes  # both paths were taken


def test_a_folder_moved_out_mid_walk_keeps_no_descriptor(workspace: Path, tmp_path: Path) -> None:
    """The walk stands in dir/sub when dir/ moves outside: require_inside refuses."""
    before = _count()
    away = tmp_path.resolve() / "away"
    with contextlib.suppress(PermissionError), Tree(workspace, "dir") as tree:
        for found in tree.files():
            if found.name == "file.txt":
                os.rename(workspace / "dir", away)
    os.rename(away, workspace / "dir")
    assert _count() == before
