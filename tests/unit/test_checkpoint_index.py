"""The append-only checkpoint index: a call appends a line, an earlier toold's index.json
is carried over, other writers are noticed, damage is named and kept."""

from __future__ import annotations

import itertools
import json
import os
import threading
from pathlib import Path

import pytest

from toold.checkpoints import CheckpointStore
from toold.checkpoints.index import LEGACY, encode
from toold.errors import CheckpointStoreError


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "user-state"
    monkeypatch.setenv("TOOLD_STATE_DIR", str(folder))
    return folder


def make(workspace: Path, max_bytes: int = 1 << 30) -> CheckpointStore:
    key = b"k" * 32  # one key for every store of the test, as the user's would be
    return CheckpointStore(workspace, workspace / ".toold" / "checkpoints", max_bytes, 1 << 20, key)


def write(store: CheckpointStore, path: str, data: bytes) -> str:
    pending = store.snapshot([path])
    (store.workspace / path).write_bytes(data)
    checkpoint = store.record(pending, "write_file", "agent")
    assert checkpoint is not None
    return checkpoint.id


def index(store: CheckpointStore) -> Path:
    return store.folder / "index.jsonl"


def test_a_call_appends_one_line_and_never_rewrites_the_file(workspace: Path) -> None:
    store = make(workspace)
    write(store, "a.txt", b"0")
    inode = index(store).stat().st_ino
    sizes = []
    for i in range(1, 300):
        write(store, f"f{i % 7}.txt", str(i).encode())
        sizes.append(index(store).stat().st_size)
    assert index(store).stat().st_ino == inode  # appended to, never replaced
    steps = {b - a for a, b in itertools.pairwise(sizes)}
    assert max(steps) < 400  # one entry's line each
    assert len(store.entries()) == 300


def test_another_store_on_the_same_folder_is_seen(workspace: Path) -> None:
    """Two processes (an engine and ``toold undo``) share the folder: each notices the
    other's lines by the file's identity, and undo marks stay in their places."""
    first, second = make(workspace), make(workspace)
    (workspace / "a.txt").write_bytes(b"0")
    one = write(first, "a.txt", b"1")
    two = write(second, "a.txt", b"2")
    assert [c.id for c in first.entries()] == [one, two]
    second.restore(two, "user")
    assert (workspace / "a.txt").read_bytes() == b"1"
    assert [(c.id, c.undone) for c in first.entries()][:2] == [(one, False), (two, True)]
    first.restore(one, "user")
    assert (workspace / "a.txt").read_bytes() == b"0"


def test_an_earlier_index_json_is_carried_over_once(workspace: Path) -> None:
    """A user's checkpoints from before the append-only index survive: its signed
    entries still verify, and index.json is replaced by index.jsonl."""
    store = make(workspace)
    (workspace / "a.txt").write_bytes(b"old")
    first = write(store, "a.txt", b"new")
    second = write(store, "a.txt", b"newer")
    lines = index(store).read_text().splitlines()
    legacy = [json.loads(line) for line in lines]
    (store.folder / "index.json").write_text(json.dumps(legacy, indent=1))
    index(store).unlink()
    later = make(workspace)
    assert [c.id for c in later.entries()] == [first, second]
    assert not (store.folder / "index.json").exists()
    assert index(store).read_bytes() == b"".join(encode(c) for c in LEGACY.validate_python(legacy))
    later.restore(first, "user")
    assert (workspace / "a.txt").read_bytes() == b"old"


def test_a_damaged_line_is_named_and_the_file_kept(workspace: Path) -> None:
    store = make(workspace)
    write(store, "a.txt", b"1")
    with index(store).open("ab") as fh:
        fh.write(b'{"id": "x", "tool": "\\u001b[2J", "origin": "a", "time": "t", "files": []}\n')
    damaged = index(store).read_bytes()
    later = make(workspace)
    with pytest.raises(CheckpointStoreError, match=r"index\.jsonl is damaged \(line 2, tool"):
        later.entries()
    pending = later.snapshot(["b.txt"])
    (workspace / "b.txt").write_bytes(b"x")
    assert later.record(pending, "write_file", "agent") is None  # the write itself stands
    assert index(store).read_bytes() == damaged  # never overwritten


def test_a_torn_last_line_is_left_out_and_squeezed_out(workspace: Path) -> None:
    """A crash in the middle of an append leaves a line without its newline."""
    store = make(workspace)
    kept = write(store, "a.txt", b"1")
    with index(store).open("ab") as fh:
        fh.write(b'{"id": "torn", "tool": "wr')
    later = make(workspace)
    assert [c.id for c in later.entries()] == [kept]
    added = write(later, "a.txt", b"2")
    assert [c.id for c in make(workspace).entries()] == [kept, added]
    assert b"torn" not in index(store).read_bytes()


def test_dead_lines_are_squeezed_out_and_the_bound_kept(workspace: Path) -> None:
    """At the bound each call drops the oldest: the file stays near twice the live
    entries, and the objects on disk are those the live entries name."""
    store = make(workspace, max_bytes=20_000)
    for i in range(400):
        write(store, f"f{i % 5}.txt", bytes([65 + i % 26]) * (100 + i))
    kept = store.entries()
    listed = sum(len(encode(c)) for c in kept)
    assert 1 < len(kept) < 400
    assert index(store).stat().st_size <= 2 * listed + 400
    objects = store.folder / "objects"
    named = {d for c in kept for d in c.digests()}
    assert {p.name for p in objects.iterdir()} == named
    assert listed + sum((objects / d).stat().st_size for d in named) <= 20_000
    assert [c.id for c in make(workspace, 20_000).entries()] == [c.id for c in kept]


def test_a_call_that_changes_nothing_leaves_no_object(workspace: Path) -> None:
    store = make(workspace)
    (workspace / "same.txt").write_bytes(b"unchanged")
    assert store.record(store.snapshot(["same.txt"]), "write_file", "agent") is None
    assert os.listdir(store.folder / "objects") == []


def test_calls_recorded_from_many_threads_all_land(workspace: Path) -> None:
    """The gateway records from worker threads, several calls at once."""
    store = make(workspace, max_bytes=40_000)

    def calls(n: int) -> None:
        for i in range(60):
            write(store, f"t{n}.txt", f"{n}-{i}".encode() * 50)

    threads = [threading.Thread(target=calls, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    kept = store.entries()
    assert [c.id for c in make(workspace, 40_000).entries()] == [c.id for c in kept]
    named = {d for c in kept for d in c.digests()}
    assert named <= {p.name for p in (store.folder / "objects").iterdir()}
    for checkpoint in kept[-6:]:
        assert store.diff(checkpoint.id) is not None  # every object it names is there
