"""Atomic writes and per-path locks."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from toold import storage
from toold.storage import atomic_write_bytes, atomic_write_text, path_lock


def test_atomic_write_creates_file(tmp_path: Path) -> None:
    target = tmp_path / "f.bin"
    atomic_write_bytes(target, b"\x00data")
    assert target.read_bytes() == b"\x00data"
    assert os.listdir(tmp_path) == ["f.bin"]


def test_atomic_write_replaces_by_rename(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    target.write_text("old")
    os.chmod(target, 0o750)
    inode = target.stat().st_ino
    with open(target) as reader:
        atomic_write_text(target, "néw")
        assert reader.read() == "old"
    assert target.read_bytes() == "néw".encode()
    assert target.stat().st_ino != inode
    assert stat.S_IMODE(target.stat().st_mode) == 0o700  # a state file: its owner's bits
    assert os.listdir(tmp_path) == ["f.txt"]


def test_atomic_write_failure_leaves_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    target.write_text("old")

    with pytest.raises(TypeError):
        atomic_write_bytes(target, "not bytes")  # type: ignore[arg-type]
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["f.txt"]


def test_atomic_write_refuses_a_symlink_and_never_writes_its_target(tmp_path: Path) -> None:
    real = tmp_path / "real.txt"
    real.write_text("real")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    with pytest.raises(PermissionError, match=f"Refusing toold state file {link}: it is a symlink"):
        atomic_write_text(link, "new")
    assert real.read_text() == "real"
    assert link.is_symlink()
    (tmp_path / "linked_dir").symlink_to(tmp_path)
    with pytest.raises(PermissionError, match="Symlink detected in path chain"):
        atomic_write_text(tmp_path / "linked_dir" / "f.txt", "new")
    assert sorted(os.listdir(tmp_path)) == ["link.txt", "linked_dir", "real.txt"]


def test_atomic_write_into_missing_folder_fails(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        atomic_write_text(tmp_path / "missing" / "f.txt", "x")
    assert os.listdir(tmp_path) == []


def test_path_lock_is_per_path(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    with path_lock(a):
        assert storage._locks[os.fspath(a)].locked()
        # A different path is not blocked by a.
        with path_lock(b):
            assert storage._locks[os.fspath(b)].locked()
    assert not storage._locks[os.fspath(a)].locked()
