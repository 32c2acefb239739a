"""The checkpoint store on a real workspace: record, diff, restore (undo) and redo."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toold.checkpoints import CheckpointStore, unified_diff
from toold.errors import CheckpointConflict, UnknownCheckpoint


@pytest.fixture
def store(workspace: Path) -> CheckpointStore:
    return CheckpointStore(workspace, workspace / ".toold" / "checkpoints", 1 << 20, 1 << 20)


def call(store: CheckpointStore, tool: str, writes: dict[str, bytes | None]) -> str:
    """What the gateway does around a call: snapshot, the tool writes, record."""
    pending = store.snapshot(writes)
    for path, data in writes.items():
        target = store.workspace / path
        if data is None:
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    checkpoint = store.record(pending, tool, "agent")
    assert checkpoint is not None
    return checkpoint.id


def test_a_call_that_changes_nothing_records_nothing(store: CheckpointStore) -> None:
    (store.workspace / "a.txt").write_text("same")
    pending = store.snapshot(["a.txt"])
    assert store.record(pending, "edit_file", "agent") is None
    assert store.entries() == []


def test_undo_puts_back_every_file_byte_for_byte(store: CheckpointStore) -> None:
    ws = store.workspace
    (ws / "a.txt").write_bytes(b"one\r\ntwo\x00\n")
    first = call(store, "write_file", {"a.txt": b"changed"})
    call(store, "write_file", {"sub/new.txt": b"created"})
    call(store, "edit_file", {"a.txt": b"changed again"})
    listed = store.entries()
    assert [(c.tool, [f.path for f in c.files]) for c in listed] == [
        ("write_file", ["a.txt"]),
        ("write_file", ["sub/new.txt"]),
        ("edit_file", ["a.txt"]),
    ]
    done = store.restore(first, "user")
    assert (ws / "a.txt").read_bytes() == b"one\r\ntwo\x00\n"
    assert not (ws / "sub" / "new.txt").exists()
    assert done.restores == first and done.tool == "restore"
    assert all(c.undone for c in store.entries()[:3])
    # The restore is a checkpoint of its own: restoring it redoes.
    store.restore(done.id, "user")
    assert (ws / "a.txt").read_bytes() == b"changed again"
    assert (ws / "sub" / "new.txt").read_bytes() == b"created"


def test_undo_goes_back_one_call_at_a_time(store: CheckpointStore) -> None:
    ws = store.workspace
    (ws / "a.txt").write_text("0")
    call(store, "write_file", {"a.txt": b"1"})
    call(store, "write_file", {"a.txt": b"2"})
    last = store.last_undoable()
    assert last is not None
    store.restore(last, "user")
    assert (ws / "a.txt").read_text() == "1"
    last = store.last_undoable()
    assert last is not None
    store.restore(last, "user")
    assert (ws / "a.txt").read_text() == "0"
    assert store.last_undoable() is None


def test_a_change_outside_toold_is_not_overwritten_unless_forced(store: CheckpointStore) -> None:
    ws = store.workspace
    (ws / "a.txt").write_text("mine")
    first = call(store, "write_file", {"a.txt": b"agent's"})
    (ws / "a.txt").write_text("edited by hand since")
    with pytest.raises(CheckpointConflict, match=r"a\.txt changed outside toold") as caught:
        store.restore(first, "user")
    assert caught.value.data == {"paths": ["a.txt"]}
    assert (ws / "a.txt").read_text() == "edited by hand since"
    assert not store.entries()[0].undone
    store.restore(first, "user", force=True)
    assert (ws / "a.txt").read_text() == "mine"


def test_diff_shows_from_before_the_call_to_now(store: CheckpointStore) -> None:
    ws = store.workspace
    (ws / "a.txt").write_text("one\ntwo\n")
    first = call(store, "edit_file", {"a.txt": b"one\nTWO\n"})
    call(store, "write_file", {"b.txt": b"new\n"})
    assert store.diff(first) == (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n"
        "--- /dev/null\n+++ b/b.txt\n@@ -0,0 +1 @@\n+new\n"
    )


def test_unknown_and_undone_ids_are_named(store: CheckpointStore) -> None:
    with pytest.raises(UnknownCheckpoint, match="no checkpoint nope"):
        store.restore("nope", "user")
    (store.workspace / "a.txt").write_text("0")
    first = call(store, "write_file", {"a.txt": b"1"})
    store.restore(first, "user")
    with pytest.raises(UnknownCheckpoint, match="already undone"):
        store.diff(first)


def test_the_store_stays_in_bounds(workspace: Path) -> None:
    store = CheckpointStore(workspace, workspace / ".toold" / "checkpoints", 4096, 1 << 20)
    for i in range(10):
        call(store, "write_file", {"big.txt": bytes([65 + i]) * 1000})
    kept = store.entries()
    assert 1 <= len(kept) < 10
    objects = workspace / ".toold" / "checkpoints" / "objects"
    assert sum(p.stat().st_size for p in objects.iterdir()) <= 4096 + 1000
    live = {d for c in kept for f in c.files for d in (f.before, f.after) if d}
    assert {p.name for p in objects.iterdir()} == live


def test_restore_never_writes_through_a_symlink(store: CheckpointStore, tmp_path: Path) -> None:
    ws = store.workspace
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "d").mkdir()
    (ws / "d" / "a.txt").write_text("0")
    first = call(store, "write_file", {"d/a.txt": b"1"})
    (ws / "d" / "a.txt").unlink()
    (ws / "d").rmdir()
    os.symlink(outside, ws / "d")
    with pytest.raises(CheckpointConflict):
        store.restore(first, "user", force=True)
    assert list(outside.iterdir()) == []


def test_unified_diff_of_binary_and_missing_newline() -> None:
    assert unified_diff("x.bin", b"\xff\x00", b"\xfe") == "Binary file x.bin differs\n"
    assert unified_diff("t", b"a", b"b") == (
        "--- a/t\n+++ b/t\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n"
        "+b\n\\ No newline at end of file\n"
    )


def test_a_large_differing_middle_is_replaced_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past DIFF_MAX_LINES differing lines difflib's matching could take minutes (a crafted
    file of 10,000 lines did): the common head and tail stay context, the middle goes."""
    monkeypatch.setattr("toold.checkpoints.diff.DIFF_MAX_LINES", 1)
    before = b"h\na\nb\nc\nt\n"
    after = b"h\nb\nX\nc\nt\n"
    assert unified_diff("f", before, after) == (
        "--- a/f\n+++ b/f\n@@ -1,5 +1,5 @@\n h\n-a\n-b\n+b\n+X\n c\n t\n"
    )
    monkeypatch.setattr("toold.checkpoints.diff.DIFF_MAX_LINES", 2)
    assert "-a\n b\n+X\n" in unified_diff("f", before, after)
