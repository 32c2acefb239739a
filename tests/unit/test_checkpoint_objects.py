"""Checkpoint objects are created under their own name, without a temp file: a torn
one (a crash mid-write) or one changed since this process stored it is read back and
replaced by the next store of its content, and the index stays the file its folder
holds, however it was replaced between calls."""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from pathlib import Path

import pytest

from toold.checkpoints import CheckpointStore


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "user-state"
    monkeypatch.setenv("TOOLD_STATE_DIR", str(folder))
    return folder


def make(workspace: Path) -> CheckpointStore:
    key = b"k" * 32  # one key for every store of the test, as the user's would be
    return CheckpointStore(workspace, workspace / ".toold" / "checkpoints", 1 << 30, 1 << 20, key)


def write(store: CheckpointStore, path: str, data: bytes) -> str:
    """A checkpointed write of ``path``, as the gateway records one."""
    pending = store.snapshot([path])
    (store.workspace / path).write_bytes(data)
    checkpoint = store.record(pending, "write_file", "agent")
    assert checkpoint is not None
    return checkpoint.id


def obj(store: CheckpointStore, data: bytes) -> Path:
    return store.folder / "objects" / hashlib.sha256(data).hexdigest()


def test_a_new_object_is_written_under_its_name_with_its_files_mode(workspace: Path) -> None:
    store = make(workspace)
    (workspace / "a.txt").write_bytes(b"one\n")
    (workspace / "a.txt").chmod(0o640)
    write(store, "a.txt", b"two\n")
    objects = store.folder / "objects"
    assert sorted(p.name for p in objects.iterdir()) == sorted(
        obj(store, data).name for data in (b"one\n", b"two\n")
    ), "no temp file is left"
    assert obj(store, b"two\n").read_bytes() == b"two\n"
    assert obj(store, b"two\n").stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize("damage", ["torn", "rewritten", "replaced"])
def test_a_damaged_object_is_replaced_by_the_next_store_of_its_content(
    workspace: Path, damage: str
) -> None:
    """Torn: a crash between creating an object and writing it whole (no index entry
    names it). Rewritten or replaced: an object this process stored, damaged since in
    place or by another file put in its place: it is read back, not trusted."""
    store = make(workspace)
    (workspace / "a.txt").write_bytes(b"precious content\n")
    first = write(store, "a.txt", b"next\n")
    target = obj(store, b"precious content\n")
    if damage == "torn":
        store.restore(first, "user")  # a.txt is "precious content" again
        fresh = make(workspace)  # another process: it never saw the object
        target.write_bytes(b"precious")
        store = fresh
    elif damage == "rewritten":
        target.write_bytes(b"garbage")
    else:
        planted = store.folder / "planted"
        planted.write_bytes(b"precious content\n"[::-1])
        os.replace(planted, target)
    if damage != "torn":
        (workspace / "a.txt").write_bytes(b"precious content\n")
    checkpoint = write(store, "a.txt", b"clobbered\n")
    assert target.read_bytes() == b"precious content\n"
    store.restore(checkpoint, "user")
    assert (workspace / "a.txt").read_bytes() == b"precious content\n"


def test_stores_of_one_content_racing_from_two_processes_all_land_whole(
    workspace: Path,
) -> None:
    """Two stores (two daemons) creating the same new objects at once: whichever
    creates one, the other reads it back, and every object named is whole."""
    stores = [make(workspace), make(workspace)]
    for name in ("a", "b"):
        (workspace / name).mkdir()
    contents = [f"content {i}\n".encode() * 50 for i in range(40)]

    def run(store: CheckpointStore, name: str) -> None:
        for i, data in enumerate(contents):
            write(store, f"{name}/{i}.txt", data)

    threads = [threading.Thread(target=run, args=(s, n)) for s, n in zip(stores, "ab", strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(stores[0].entries()) == 2 * len(contents)
    for data in contents:
        assert obj(stores[0], data).read_bytes() == data


def test_an_index_replaced_between_calls_is_appended_to_as_it_is_now(workspace: Path) -> None:
    """The index stays open for appending between calls; another file put in its place
    (a copy, as another toold's compaction leaves one) is the one the next call appends to."""
    store = make(workspace)
    write(store, "a.txt", b"1")
    index = store.folder / "index.jsonl"
    copy = store.folder / "copy"
    shutil.copyfile(index, copy)
    os.replace(copy, index)
    write(store, "a.txt", b"2")
    assert len(index.read_text().splitlines()) == 2
    assert [c.files[0].after for c in make(workspace).entries()] == [
        hashlib.sha256(data).hexdigest() for data in (b"1", b"2")
    ]
    store.close()
