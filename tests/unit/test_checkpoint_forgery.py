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
from toold.assembly import make_checkpoints
from toold.checkpoints import CheckpointStore
from toold.checkpoints.index import LEGACY
from toold.config import TooldConfig
from toold.errors import CheckpointConflict, CheckpointStoreError
from toold.permissions.guard import protected
from toold.workspace import WorkspaceState


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's state folder (the signing key): this test's own, outside the workspace."""
    folder = tmp_path / "user-state"
    monkeypatch.setenv("TOOLD_STATE_DIR", str(folder))
    return folder


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


def forge(
    folder: Path,
    *files: dict[str, Any],
    objects: tuple[bytes, ...] = (),
    signer: CheckpointStore | None = None,
) -> None:
    """An index of one checkpoint ``c1`` changing ``files``, and ``objects`` stored;
    signed as ``signer`` (toold itself, for tests of what a genuine entry may do). It is
    an ``index.json`` as an earlier toold wrote it: read once and carried over."""
    for data in objects:
        (folder / "objects" / sha(data)).write_bytes(data)
    entry: dict[str, Any] = {
        "id": "c1",
        "tool": "write_file",
        "origin": "agent",
        "time": "t",
        "files": list(files),
    }
    if signer is not None:
        entry["mac"] = signer._mac(LEGACY.validate_python([entry])[0])
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


NOT_PLAIN = ["../escape.txt", "/tmp/abs.txt", "a/../../x", "./a.txt", "", "./.git/config"]
NOT_PLAIN += ["a/../.git/config", ".git/", ".git//config", "a\x00b"]


@pytest.mark.parametrize("path", NOT_PLAIN)
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
    """A genuine checkpoint of toold.toml restores only when forced: the file watcher's
    reload then holds any loosening in it and asks (WorkspaceState.reload_config)."""
    evil = b"[permissions]\nmode = 'bypass'\n"
    forge(
        folder,
        {"path": "toold.toml", "before": sha(evil), "after": None},
        objects=(evil,),
        signer=store,
    )
    with pytest.raises(CheckpointConflict, match=r"toold\.toml.*configuration"):
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
        signer=store,
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
    monkeypatch.setattr("toold.checkpoints.index.MAX_INDEX_BYTES", 1000)
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
    assert (workspace / ".toold" / "checkpoints" / "index.jsonl").stat().st_size <= 4096


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
        signer=store,
    )
    write = store._write

    def full_disk(
        path: str, data: bytes | None, mode: int = 0o600, exact: int | None = None
    ) -> None:
        if path == "b.txt" and data is not None:
            raise OSError(28, "No space left on device")
        write(path, data, mode, exact)

    monkeypatch.setattr(store, "_write", full_disk)
    with pytest.raises(CheckpointConflict, match=r"b\.txt.*No space.*nothing was restored"):
        store.restore("c1", "user")
    assert (store.workspace / "a.txt").read_bytes() == b"now\n"
    assert not (store.workspace / "b.txt").exists()
    assert not store.entries()[0].undone


EVIL_GIT_CONFIG = b"[core]\n\tfsmonitor = touch /tmp/pwned\n"


@pytest.fixture
def git_config(workspace: Path) -> Path:
    config = workspace / ".git" / "config"
    config.parent.mkdir()
    config.write_bytes(b"[core]\n\tbare = false\n")
    return config


@pytest.mark.parametrize("how", ["unsigned", "other key", "altered", "other workspace"])
def test_a_forged_entry_is_refused_and_named(
    store: CheckpointStore, folder: Path, git_config: Path, tmp_path: Path, how: str
) -> None:
    """Whoever lacks the user's key (an agent's command, a cloned repository) cannot make
    an entry toold restores: not unsigned, signed with another key, a genuine entry with a
    field changed, or a genuine entry of another workspace copied here."""
    change = {"path": ".git/config", "before": sha(EVIL_GIT_CONFIG), "after": None}
    if how == "unsigned":
        forge(folder, change, objects=(EVIL_GIT_CONFIG,))
    elif how == "other key":
        other = CheckpointStore(store.workspace, folder, 1 << 20, 1 << 20, key=b"k" * 32)
        forge(folder, change, objects=(EVIL_GIT_CONFIG,), signer=other)
    elif how == "altered":
        forge(folder, {**change, "path": "notes.txt"}, objects=(EVIL_GIT_CONFIG,), signer=store)
        index = json.loads((folder / "index.json").read_text())
        index[0]["files"][0]["path"] = ".git/config"
        (folder / "index.json").write_text(json.dumps(index))
    else:
        elsewhere = CheckpointStore(tmp_path / "other-ws", folder, 1 << 20, 1 << 20)
        forge(folder, change, objects=(EVIL_GIT_CONFIG,), signer=elsewhere)
    assert store.last_undoable() == "c1"
    for force in (False, True):
        with pytest.raises(CheckpointStoreError, match=r"checkpoint c1 was not written by toold"):
            store.restore("c1", "user", force=force, guarded=protected)
    with pytest.raises(CheckpointStoreError, match=r"checkpoint c1 was not written by toold"):
        store.diff("c1")
    assert git_config.read_bytes() == b"[core]\n\tbare = false\n"
    assert not store.entries()[0].undone


def test_a_forged_entry_after_a_genuine_one_blocks_restoring_past_it(
    store: CheckpointStore, folder: Path, git_config: Path
) -> None:
    """Restoring a genuine checkpoint also restores every later one: a forged entry
    appended after it must not ride along."""
    (store.workspace / "a.txt").write_text("one\n")
    pending = store.snapshot(["a.txt"])
    (store.workspace / "a.txt").write_text("two\n")
    genuine = store.record(pending, "write_file", "agent")
    assert genuine is not None
    (folder / "objects" / sha(EVIL_GIT_CONFIG)).write_bytes(EVIL_GIT_CONFIG)
    [line] = (folder / "index.jsonl").read_text().splitlines()
    forged = {
        "id": "evil",
        "tool": "write_file",
        "origin": "agent",
        "time": "t",
        "files": [{"path": ".git/config", "before": sha(EVIL_GIT_CONFIG), "after": None}],
        "mac": json.loads(line)["mac"],  # a genuine entry's MAC, copied
    }
    with (folder / "index.jsonl").open("a") as index:
        index.write(json.dumps(forged) + "\n")
    with pytest.raises(CheckpointStoreError, match="checkpoint evil was not written by toold"):
        store.restore(genuine.id, "user", force=True)
    assert git_config.read_bytes() == b"[core]\n\tbare = false\n"
    assert (store.workspace / "a.txt").read_text() == "two\n"


NEVER = [".git/config", ".GIT/hooks/x", ".git./config", ".Git /config", "sub/.git/config"]
NEVER += [".git::$DATA/config", "git~1/config", ".toold/x", ".TOOLD/audit.jsonl", ".git"]


@pytest.mark.parametrize("path", NEVER)
def test_a_genuine_checkpoint_never_restores_into_git_or_toold(
    store: CheckpointStore, folder: Path, path: str
) -> None:
    """Even a checkpoint toold signed (a write the user once approved) is never restored
    into .git/ (git runs its core.fsmonitor, hooks) or .toold/, in any spelling."""
    canary = store.workspace / path
    canary.parent.mkdir(parents=True, exist_ok=True)
    canary.write_bytes(b"canary\n")
    forge(
        folder,
        {"path": "first.txt", "before": sha(EVIL_GIT_CONFIG), "after": None},
        {"path": path, "before": sha(EVIL_GIT_CONFIG), "after": sha(b"canary\n")},
        objects=(EVIL_GIT_CONFIG,),
        signer=store,
    )
    with pytest.raises(CheckpointStoreError, match=r"never writes into \.git/ or \.toold/"):
        store.restore("c1", "user", force=True, guarded=protected)
    assert canary.read_bytes() == b"canary\n"
    assert not (store.workspace / "first.txt").exists()


@pytest.mark.parametrize("link_at", ["dir", "file"])
def test_a_restore_never_writes_through_a_symlink(
    store: CheckpointStore, folder: Path, tmp_path: Path, link_at: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.txt").write_bytes(b"canary\n")
    if link_at == "dir":
        (store.workspace / "link").symlink_to(outside)
        path = "link/x.txt"
    else:
        (store.workspace / "link.txt").symlink_to(outside / "x.txt")
        path = "link.txt"
    forge(
        folder,
        {"path": path, "before": sha(EVIL_GIT_CONFIG), "after": sha(b"canary\n")},
        objects=(EVIL_GIT_CONFIG,),
        signer=store,
    )
    with pytest.raises(CheckpointConflict, match=r"Symlink detected|not a regular file"):
        store.restore("c1", "user", force=True)
    assert (outside / "x.txt").read_bytes() == b"canary\n"
    assert sorted(p.name for p in outside.iterdir()) == ["x.txt"]


def test_objects_keep_their_files_mode_and_the_store_is_private(
    store: CheckpointStore, folder: Path
) -> None:
    ws = store.workspace
    (ws / ".env").write_bytes(b"API_KEY=secret\n")
    (ws / ".env").chmod(0o600)
    (ws / "public.txt").write_bytes(b"API_KEY=secret\n")  # the same content, 0644
    (ws / "public.txt").chmod(0o644)
    (ws / "read-only.txt").write_bytes(b"ro\n")
    (ws / "read-only.txt").chmod(0o400)
    pending = store.snapshot(["public.txt", ".env", "read-only.txt"])
    (ws / ".env").write_bytes(b"API_KEY=changed\n")
    (ws / "read-only.txt").chmod(0o600)
    (ws / "read-only.txt").write_bytes(b"rw\n")
    checkpoint = store.record(pending, "write_file", "agent")
    assert checkpoint is not None
    objects = folder / "objects"
    assert (objects / sha(b"API_KEY=secret\n")).stat().st_mode & 0o777 == 0o600
    assert (objects / sha(b"API_KEY=changed\n")).stat().st_mode & 0o777 == 0o600
    assert (objects / sha(b"ro\n")).stat().st_mode & 0o777 == 0o400
    assert folder.stat().st_mode & 0o777 == 0o700
    assert objects.stat().st_mode & 0o777 == 0o700
    # A file the restore creates again gets the mode its content was stored with.
    (ws / ".env").unlink()
    store.restore(checkpoint.id, "user", force=True)
    assert (ws / ".env").read_bytes() == b"API_KEY=secret\n"
    assert (ws / ".env").stat().st_mode & 0o777 == 0o600
    (ws / "run.sh").write_bytes(b"#!/bin/sh\n")
    (ws / "run.sh").chmod(0o750)
    pending = store.snapshot(["run.sh"])
    (ws / "run.sh").unlink()
    deleted = store.record(pending, "delete_file", "agent")
    assert deleted is not None
    store.restore(deleted.id, "user")
    assert (ws / "run.sh").stat().st_mode & 0o777 == 0o750  # still runs after the undo


def test_the_key_lives_outside_the_workspace_once_and_private(
    workspace: Path, state_dir: Path
) -> None:
    """The workspace's store (as bind makes it) signs with the user's key, made once:
    another store of the workspace (another toold process) restores what it recorded."""
    store = make_checkpoints(TooldConfig(), workspace.resolve())
    (store.workspace / "a.txt").write_text("one\n")
    pending = store.snapshot(["a.txt"])
    (store.workspace / "a.txt").write_text("two\n")
    assert store.record(pending, "write_file", "agent") is not None
    key = state_dir / "checkpoints.key"
    assert key.stat().st_mode & 0o777 == 0o600 and len(key.read_bytes()) == 32
    assert state_dir.stat().st_mode & 0o777 == 0o700
    first = key.read_bytes()
    again = make_checkpoints(TooldConfig(), workspace.resolve())
    assert again.restore(again.last_undoable() or "", "user").tool == "restore"
    assert key.read_bytes() == first
