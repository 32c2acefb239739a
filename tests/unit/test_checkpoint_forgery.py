"""A checkpoint store the agent (or a cloned repository) wrote: ``.toold/checkpoints`` is a
workspace folder, so its index and objects are untrusted input. A forged or damaged store
must never read or write outside the workspace, rewrite toold.toml unasked, break the
file tools, or restore half the files."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.bound import call, run_bound
from toold.checkpoints import CheckpointStore
from toold.errors import CheckpointConflict, CheckpointStoreError
from toold.permissions.guard import protected
from toold.workspace import WorkspaceState


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def folder(workspace: Path) -> Path:
    folder = workspace / ".toold" / "checkpoints"
    (folder / "objects").mkdir(parents=True)
    return folder


@pytest.fixture
def store(workspace: Path, folder: Path) -> CheckpointStore:
    return CheckpointStore(workspace, folder, 1 << 20, 1 << 20)


def forge(folder: Path, *files: dict[str, Any], objects: tuple[bytes, ...] = ()) -> None:
    """An index of one checkpoint ``c1`` changing ``files``, and ``objects`` stored."""
    for data in objects:
        (folder / "objects" / sha(data)).write_bytes(data)
    entry = {"id": "c1", "tool": "write_file", "origin": "agent", "time": "t", "files": files}
    (folder / "index.json").write_text(json.dumps([entry]))


def test_a_forged_digest_never_reads_a_file_outside_the_store(
    store: CheckpointStore, folder: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET\n")
    (store.workspace / "a.txt").write_text("one\n")
    escape = os.path.relpath(secret, folder / "objects")
    forge(folder, {"path": "a.txt", "before": escape, "after": sha(b"one\n")})
    for attempt in (lambda: store.diff("c1"), lambda: store.restore("c1", "user", force=True)):
        with pytest.raises(CheckpointStoreError, match=r"index\.json.*before"):
            attempt()
    assert (store.workspace / "a.txt").read_text() == "one\n"


@pytest.mark.parametrize("path", ["../escape.txt", "/tmp/abs.txt", "a/../../x", "./a.txt", ""])
def test_a_forged_path_is_refused_before_anything_is_written(
    store: CheckpointStore, folder: Path, path: str
) -> None:
    forge(
        folder,
        {"path": "first.txt", "before": sha(b"x"), "after": None},
        {"path": path, "before": sha(b"x"), "after": None},
        objects=(b"x",),
    )
    with pytest.raises(CheckpointStoreError, match="path"):
        store.restore("c1", "user", force=True)
    assert not (store.workspace / "first.txt").exists()


def test_restoring_toold_toml_needs_force(store: CheckpointStore, folder: Path) -> None:
    evil = b"[permissions]\nmode = 'bypass'\n"
    forge(
        folder,
        {"path": "toold.toml", "before": sha(evil), "after": None},
        {"path": ".toold/x", "before": sha(evil), "after": None},
        objects=(evil,),
    )
    with pytest.raises(CheckpointConflict, match=r"\.toold/x, toold\.toml.*configuration"):
        store.restore("c1", "user", guarded=protected)
    assert not (store.workspace / "toold.toml").exists()
    store.restore("c1", "user", force=True, guarded=protected)
    assert (store.workspace / "toold.toml").read_bytes() == evil


def test_a_missing_or_altered_object_restores_nothing(store: CheckpointStore, folder: Path) -> None:
    forge(
        folder,
        {"path": "a.txt", "before": sha(b"a"), "after": None},
        {"path": "b.txt", "before": sha(b"b"), "after": None},
        objects=(b"a",),
    )
    with pytest.raises(CheckpointStoreError, match=r"b\.txt.*missing or damaged"):
        store.restore("c1", "user")
    (folder / "objects" / sha(b"b")).write_bytes(b"not b")
    with pytest.raises(CheckpointStoreError, match=r"b\.txt.*missing or damaged"):
        store.restore("c1", "user")
    assert sorted(p.name for p in store.workspace.iterdir()) == [".toold"]


ESCAPE_IN_TOOL = (
    b'[{"id": "c1", "tool": "\\u001b]52;c;cm0gLXJmIH4=\\u0007", "origin": "agent", '
    b'"time": "t", "files": []}]'
)
DAMAGED = [
    b"{not json",
    b'[{"id": 1}]',
    b'{"a": 1}',
    b"\xff\xfe",
    b"[" * 100_000,
    b"null",
    ESCAPE_IN_TOOL,  # toold checkpoints prints it to a terminal
]


@pytest.mark.parametrize("content", DAMAGED)
def test_a_damaged_index_is_a_clear_error_and_is_kept(
    store: CheckpointStore, folder: Path, content: bytes
) -> None:
    (folder / "index.json").write_bytes(content)
    for attempt in (store.entries, store.last_undoable, lambda: store.diff("c1")):
        with pytest.raises(CheckpointStoreError, match=r"index\.json.*move it away"):
            attempt()
    assert (folder / "index.json").read_bytes() == content


def test_a_damaged_index_does_not_break_the_file_tools(workspace: Path) -> None:
    folder = workspace / ".toold" / "checkpoints"
    folder.mkdir(parents=True)
    (folder / "index.json").write_bytes(b"{not json")

    async def scenario(state: WorkspaceState) -> str:
        outcome = await call(state, "write_file", file_path="n.txt", content="x")
        assert not outcome.is_error, outcome.content
        return str(outcome.content)

    assert "Wrote" in run_bound(workspace, scenario)
    assert (workspace / "n.txt").read_text() == "x"
    assert (folder / "index.json").read_bytes() == b"{not json"  # never overwritten


def test_a_huge_index_is_refused_without_reading_it(
    store: CheckpointStore, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("toold.checkpoints.MAX_INDEX_BYTES", 1000)
    (folder / "index.json").write_text("[" + " " * 2000 + "]")
    with pytest.raises(CheckpointStoreError, match="larger than"):
        store.entries()


def test_changes_of_empty_files_still_count_toward_the_bound(workspace: Path) -> None:
    """Content of 0 or 1 bytes costs nothing in objects; the index entries must count, or
    the index grows without end."""
    store = CheckpointStore(workspace, workspace / ".toold" / "checkpoints", 4096, 1 << 20)
    for i in range(200):
        pending = store.snapshot(["t.txt"])
        (workspace / "t.txt").write_bytes(b"x" if i % 2 else b"")
        store.record(pending, "write_file", "agent")
    assert len(store.entries()) < 100
    assert (workspace / ".toold" / "checkpoints" / "index.json").stat().st_size <= 4096


def test_a_planted_object_is_replaced_by_the_real_content(
    store: CheckpointStore, folder: Path
) -> None:
    """An object planted under the digest of content an edit will replace would make the
    checkpoint unrestorable; recording writes the real bytes over it."""
    (folder / "objects" / sha(b"precious\n")).write_bytes(b"garbage")
    (store.workspace / "a.txt").write_bytes(b"precious\n")
    pending = store.snapshot(["a.txt"])
    (store.workspace / "a.txt").write_bytes(b"clobbered\n")
    checkpoint = store.record(pending, "write_file", "agent")
    assert checkpoint is not None
    store.restore(checkpoint.id, "user")
    assert (store.workspace / "a.txt").read_bytes() == b"precious\n"


def test_a_restore_that_cannot_write_a_file_puts_back_the_others(
    store: CheckpointStore, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that fails midway (the disk filled up: simulated, it cannot be made to
    happen on demand here) leaves every file as it was, never half restored."""
    (store.workspace / "a.txt").write_bytes(b"now\n")
    forge(
        folder,
        {"path": "a.txt", "before": sha(b"then\n"), "after": sha(b"now\n")},
        {"path": "b.txt", "before": sha(b"then\n"), "after": None},
        objects=(b"then\n",),
    )
    write = store._write

    def full_disk(path: str, data: bytes | None) -> None:
        if path == "b.txt" and data is not None:
            raise OSError(28, "No space left on device")
        write(path, data)

    monkeypatch.setattr(store, "_write", full_disk)
    with pytest.raises(CheckpointConflict, match=r"b\.txt.*No space.*nothing was restored"):
        store.restore("c1", "user")
    assert (store.workspace / "a.txt").read_bytes() == b"now\n"
    assert not (store.workspace / "b.txt").exists()
    assert not store.entries()[0].undone
