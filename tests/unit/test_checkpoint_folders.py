"""The checkpoint store keeps its folders open between calls (toold.checkpoints.folders):
whatever happens to them meanwhile, the next call sees it as a fresh walk of the path
would: a symlink put in the way is refused, a removed folder is made again, a folder
opened to others is made private again, a moved one is not written into any more."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from toold.checkpoints import CheckpointStore
from toold.checkpoints.folders import HeldFolder


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's state folder (the signing key): this test's own, outside the workspace."""
    folder = tmp_path / "user-state"
    monkeypatch.setenv("TOOLD_STATE_DIR", str(folder))
    return folder


def write(store: CheckpointStore, workspace: Path, name: str, text: str) -> None:
    """A checkpointed write of ``name``, as the gateway records one."""
    pending = store.snapshot([name])
    (workspace / name).write_text(text)
    store.record(pending, "write_file", "agent")


def test_a_symlink_put_in_place_of_the_held_folder_is_refused(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    folder = workspace / ".toold" / "checkpoints"
    held = HeldFolder(folder)
    os.close(held.open())  # held open from now on
    outside = tmp_path / "outside"
    outside.mkdir()
    folder.rename(workspace / ".toold" / "moved")
    folder.symlink_to(outside)
    with pytest.raises(PermissionError, match="symlink"):
        held.open()


def test_a_symlinked_parent_leading_to_the_same_folder_is_refused(tmp_path: Path) -> None:
    """The held folder itself, reached through a link: a fresh walk refuses it, so must
    the held descriptor (the same inode is not enough)."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    folder = workspace / ".toold" / "checkpoints"
    held = HeldFolder(folder)
    os.close(held.open())
    (workspace / ".toold").rename(workspace / "elsewhere")
    (workspace / ".toold").symlink_to(workspace / "elsewhere")
    with pytest.raises(PermissionError, match="symlink"):
        held.open()


def test_a_removed_folder_is_made_again_and_a_widened_one_made_private(tmp_path: Path) -> None:
    folder = tmp_path / "ws" / ".toold" / "checkpoints"
    held = HeldFolder(folder)
    os.close(held.open())
    folder.rmdir()
    fd = held.open()
    try:
        assert os.fstat(fd).st_ino == folder.stat().st_ino
    finally:
        os.close(fd)
    folder.chmod(0o755)
    os.close(held.open())
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_records_follow_the_store_folder_as_it_is_now(tmp_path: Path) -> None:
    """A store whose folder was moved away (and one whose folder became a symlink)
    between two calls never writes into the moved or the linked folder."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    folder = workspace / ".toold" / "checkpoints"
    store = CheckpointStore(workspace, folder, 1 << 20, 1 << 20)
    write(store, workspace, "a.txt", "one")
    assert len(store.entries()) == 1
    moved = workspace / "moved"
    folder.rename(moved)
    before = sorted(p.name for p in (moved / "objects").iterdir())
    index = (moved / "index.jsonl").read_bytes()  # held open for appending: not any more
    write(store, workspace, "a.txt", "two")
    assert sorted(p.name for p in (moved / "objects").iterdir()) == before
    assert (moved / "index.jsonl").read_bytes() == index
    assert len(store.entries()) == 1  # a new index, in a new folder
    outside = tmp_path / "outside"
    outside.mkdir()
    folder.rename(workspace / "moved-again")
    folder.symlink_to(outside)
    write(store, workspace, "a.txt", "three")  # refused: nothing recorded, nothing written
    assert list(outside.iterdir()) == []
    store.close()


def test_a_symlinked_lock_file_is_refused_not_followed(tmp_path: Path) -> None:
    """The index's lock is opened in the held folder: a link there (to a file the link's
    author wants created or locked) is refused, as file_lock refuses it."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    folder = workspace / ".toold" / "checkpoints"
    store = CheckpointStore(workspace, folder, 1 << 20, 1 << 20)
    write(store, workspace, "a.txt", "one")
    (folder / "index.lock").unlink()
    target = tmp_path / "outside" / "planted"
    target.parent.mkdir()
    (folder / "index.lock").symlink_to(target)
    write(store, workspace, "a.txt", "two")
    assert not target.exists()
    (folder / "index.lock").unlink()
    assert [c.files[0].path for c in store.entries()] == ["a.txt"]  # the first call's only
    store.close()
