"""Undo after a shell call: real bash, python_repl and background jobs, without git.

The tree is fingerprinted whole (every file's bytes and mode, every folder) before a
call and compared after ``restore``: what the call created, changed or deleted is back
byte for byte, modes included. What the walk leaves out is named, never dropped silently.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.bound import call, run_bound
from tests.trees import SCENARIO, fingerprint, seed
from toold.assembly import bind
from toold.checkpoints import CheckpointStore
from toold.checkpoints.baseline import IN_Q_OVERFLOW, Baseline, Snapshot
from toold.checkpoints.walk import Seen, Walk
from toold.errors import CheckpointConflict
from toold.inotify import Inotify
from toold.search.ignore import IGNORE_FILES, IgnoreRules
from toold.search.walk import SKIP_DIRS
from toold.tools.context import CallContext
from toold.workspace import WorkspaceState
from toold_protocol.models import CheckpointsListResult


@pytest.fixture(params=["watched", "walked"])
def store(workspace: Path, request: pytest.FixtureRequest) -> CheckpointStore:
    """A store whose baseline skips the walk before a call when inotify saw no change
    ("watched", the default where inotify works) or walks before every call ("walked")."""
    made = CheckpointStore(workspace, workspace / ".toold" / "checkpoints", 1 << 24, 1 << 20)
    watcher = Inotify if request.param == "watched" else None
    made.baseline = Baseline(made, SKIP_DIRS, IgnoreRules, IGNORE_FILES, watcher)
    return made


def shell(store: CheckpointStore, command: str) -> tuple[str | None, str | None]:
    """What the gateway does around a shell call: walk, run, walk and record."""
    assert store.baseline is not None
    before = store.baseline.begin()
    subprocess.run(["bash", "-c", command], cwd=store.workspace, check=True)
    checkpoint, note = store.baseline.finish(before, "bash", "agent")
    return (checkpoint.id if checkpoint is not None else None), note


def test_undo_puts_back_what_a_shell_command_changed(store: CheckpointStore) -> None:
    ws = store.workspace
    seed(ws)
    before = fingerprint(ws)
    checkpoint, note = shell(store, SCENARIO)
    assert checkpoint is not None and note is None
    [entry] = store.entries()
    assert sorted(f.path for f in entry.files) == ["a.txt", "b.txt", "d/c.txt", "e.sh"]
    assert entry.created == ["d"] and entry.uncovered is None
    after = fingerprint(ws)
    objects = store.folder / "objects"
    assert {oct(o.stat().st_mode & 0o777) for o in objects.iterdir()} == {"0o600"}  # private
    done = store.restore(checkpoint, "user")
    assert fingerprint(ws) == before
    store.restore(done.id, "user")  # redo
    assert fingerprint(ws) == after


def test_a_command_that_changes_nothing_records_nothing(store: CheckpointStore) -> None:
    seed(store.workspace)
    assert shell(store, "cat a.txt > /dev/null; ls") == (None, None)
    assert store.entries() == []


def test_a_removed_folder_comes_back(store: CheckpointStore) -> None:
    ws = store.workspace
    seed(ws)
    (ws / "empty").mkdir()
    before = fingerprint(ws)
    checkpoint, _ = shell(store, "rm -r keep empty")
    assert checkpoint is not None
    store.restore(checkpoint, "user")
    assert fingerprint(ws) == before


def test_a_change_made_after_the_call_is_a_conflict(store: CheckpointStore) -> None:
    ws = store.workspace
    seed(ws)
    checkpoint, _ = shell(store, "echo mine > b.txt")
    assert checkpoint is not None
    (ws / "b.txt").write_text("the user's\n")
    with pytest.raises(CheckpointConflict, match=r"b\.txt"):
        store.restore(checkpoint, "user")
    assert (ws / "b.txt").read_text() == "the user's\n"


def test_a_change_between_calls_is_the_next_calls_before(store: CheckpointStore) -> None:
    ws = store.workspace
    seed(ws)
    shell(store, "mkdir -p new/deep; echo 1 > new/deep/n.txt")
    # The user edits, outside toold, a file at the root and one in the folder just made.
    (ws / "b.txt").write_text("the user's\n")
    (ws / "new" / "deep" / "n.txt").write_text("the user's n\n")
    checkpoint, _ = shell(store, "echo shell > b.txt; echo shell > new/deep/n.txt")
    assert checkpoint is not None
    store.restore(checkpoint, "user")
    assert (ws / "b.txt").read_text() == "the user's\n"
    assert (ws / "new" / "deep" / "n.txt").read_text() == "the user's n\n"


class Counted:
    """The baseline's full walks and the folders listed since ``start``."""

    def __init__(self, baseline: Baseline, monkeypatch: pytest.MonkeyPatch) -> None:
        self.walks = 0
        self.listed: list[str] = []
        walk, folder = baseline._walk, Walk.folder

        def walked(known: dict[str, Seen]) -> Snapshot:
            self.walks += 1
            return walk(known)

        def listed(walker: Walk, fd: int, parts: tuple[str, ...], *rest: Any) -> None:
            self.listed.append("/".join(parts))
            folder(walker, fd, parts, *rest)

        monkeypatch.setattr(baseline, "_walk", walked)
        monkeypatch.setattr(Walk, "folder", listed)

    def start(self) -> None:
        """Count from now."""
        self.walks, self.listed = 0, []


def _counted(store: CheckpointStore, monkeypatch: pytest.MonkeyPatch) -> tuple[Baseline, Counted]:
    """The store's baseline, after a first call walked the tree, and its counter."""
    baseline = store.baseline
    assert baseline is not None
    shell(store, "true")
    return baseline, Counted(baseline, monkeypatch)


def _wide(root: Path) -> None:
    """The seed, ten more folders and a deep one."""
    seed(root)
    for i in range(10):
        (root / f"w{i}").mkdir()
        (root / f"w{i}" / "f.txt").write_text(str(i))
    (root / "deep" / "a" / "b").mkdir(parents=True)
    (root / "deep" / "a" / "b" / "f.txt").write_text("deep\n")


def test_a_quiet_tree_is_not_walked_when_watched(
    store: CheckpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    _wide(store.workspace)
    baseline, counted = _counted(store, monkeypatch)
    for _ in range(3):
        assert shell(store, "true") == (None, None)
    if baseline.watch is None:
        assert counted.walks == 6  # before and after each call
        return
    assert (counted.walks, counted.listed) == (0, [])
    checkpoint, _ = shell(store, "echo x >> b.txt")
    assert checkpoint is not None
    assert (counted.walks, counted.listed) == (0, [""])  # the root only: b.txt's folder


def test_an_edit_in_a_deep_folder_is_seen_by_an_incremental_walk(
    store: CheckpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = store.workspace
    _wide(ws)
    baseline, counted = _counted(store, monkeypatch)
    deep = ws / "deep" / "a" / "b" / "f.txt"
    deep.write_text("the user's\n")  # between calls, outside toold
    before = fingerprint(ws)
    checkpoint, _ = shell(store, "echo shell > deep/a/b/f.txt; echo more >> w3/f.txt")
    assert checkpoint is not None
    [entry] = store.entries()
    assert sorted(f.path for f in entry.files) == ["deep/a/b/f.txt", "w3/f.txt"]
    if baseline.watch is not None:
        assert counted.walks == 0
        assert sorted(counted.listed) == ["deep/a/b", "deep/a/b", "w3"]  # before, after
    store.restore(checkpoint, "user")
    assert fingerprint(ws) == before


def test_a_folder_the_call_creates_is_walked_whole(
    store: CheckpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = store.workspace
    _wide(ws)
    baseline, counted = _counted(store, monkeypatch)
    before = fingerprint(ws)
    made = "mkdir -p n/m/o; echo 1 > n/one; echo 2 > n/m/o/two; mkdir w1/x; echo 3 > w1/x/t"
    checkpoint, _ = shell(store, made)
    assert checkpoint is not None
    [entry] = store.entries()
    assert sorted(f.path for f in entry.files) == ["n/m/o/two", "n/one", "w1/x/t"]
    assert entry.created == ["n", "n/m", "n/m/o", "w1/x"]
    if baseline.watch is not None:
        assert counted.walks == 0
        assert sorted(counted.listed) == ["", "n", "n/m", "n/m/o", "w1", "w1/x"]
        # Watched as they were walked: a later change in the new deep folder is seen.
        checkpoint2, _ = shell(store, "echo changed > n/m/o/two")
        assert checkpoint2 is not None and counted.walks == 0
        store.restore(checkpoint2, "user")
    store.restore(checkpoint, "user")
    assert fingerprint(ws) == before


def test_a_folder_moved_by_the_call_is_seen_on_both_sides(
    store: CheckpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = store.workspace
    _wide(ws)
    baseline, counted = _counted(store, monkeypatch)
    before = fingerprint(ws)
    checkpoint, _ = shell(store, "mv deep/a w2/moved; rmdir deep")
    assert checkpoint is not None
    [entry] = store.entries()
    assert sorted(f.path for f in entry.files) == ["deep/a/b/f.txt", "w2/moved/b/f.txt"]
    assert entry.created == ["w2/moved", "w2/moved/b"]
    assert entry.removed == ["deep", "deep/a", "deep/a/b"]
    # The moved folder keeps its watch: a change in it, and one where it was, are seen.
    checkpoint2, _ = shell(
        store, "echo again > w2/moved/b/f.txt; mkdir -p deep/a/b; echo x > deep/a/b/g"
    )
    assert checkpoint2 is not None
    assert sorted(f.path for f in store.entries()[-1].files) == ["deep/a/b/g", "w2/moved/b/f.txt"]
    if baseline.watch is not None:
        assert counted.walks == 0
    store.restore(checkpoint, "user")  # undoes every checkpoint from it on
    assert fingerprint(ws) == before


def test_a_folder_removed_and_made_again_is_walked_anew(
    store: CheckpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = store.workspace
    _wide(ws)
    baseline, counted = _counted(store, monkeypatch)
    before = fingerprint(ws)
    checkpoint, _ = shell(store, "rm -r deep/a; mkdir -p deep/a/c; echo n > deep/a/c/n")
    assert checkpoint is not None
    [entry] = store.entries()
    assert sorted(f.path for f in entry.files) == ["deep/a/b/f.txt", "deep/a/c/n"]
    assert entry.created == ["deep/a/c"] and entry.removed == ["deep/a/b"]
    if baseline.watch is not None:
        assert counted.walks == 0
    store.restore(checkpoint, "user")
    assert fingerprint(ws) == before


def test_a_write_through_another_link_is_seen(
    store: CheckpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = store.workspace
    _wide(ws)
    outside = ws.parent / "outside.txt"
    outside.write_text("linked\n")
    os.link(outside, ws / "w4" / "linked.txt")
    baseline, counted = _counted(store, monkeypatch)
    before = fingerprint(ws)
    # No event in w4: the write goes through the name outside the workspace.
    checkpoint, _ = shell(store, f"echo changed >> {outside}")
    assert checkpoint is not None
    assert [f.path for f in store.entries()[0].files] == ["w4/linked.txt"]
    if baseline.watch is not None:
        assert counted.walks == 0 and "w4" in counted.listed
    store.restore(checkpoint, "user")
    assert fingerprint(ws) == before


def test_an_incremental_walk_reads_the_ignore_files_above(
    store: CheckpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = store.workspace
    _wide(ws)
    (ws / ".gitignore").write_text("*.log\n")
    baseline, counted = _counted(store, monkeypatch)
    checkpoint, note = shell(store, "echo l > deep/a/b/x.log; echo y > deep/a/b/f.txt")
    assert checkpoint is not None and note is not None
    assert "1 ignored path (deep/a/b/x.log)" in note
    assert [f.path for f in store.entries()[0].files] == ["deep/a/b/f.txt"]
    if baseline.watch is not None:
        assert (counted.walks, counted.listed) == (0, ["deep/a/b"])
    # A changed ignore file changes what folders with no event cover: a full walk.
    checkpoint, _ = shell(store, "echo '*.txt' >> .gitignore")
    assert checkpoint is not None
    assert counted.walks == (1 if baseline.watch is not None else 4)


MMAP_WRITE = """python3 -c '
import mmap, os
fd = os.open("w7/f.txt", os.O_RDWR)
mapped = mmap.mmap(fd, 1)
os.close(fd)
mapped[0:1] = b"M"
'"""
"""A write through a shared mapping (no event of its own; the last close is one)."""


def test_a_write_through_a_shared_mapping_is_seen(
    store: CheckpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = store.workspace
    _wide(ws)
    baseline, counted = _counted(store, monkeypatch)
    before = fingerprint(ws)
    checkpoint, _ = shell(store, MMAP_WRITE)
    assert (ws / "w7" / "f.txt").read_text() == "M"
    assert checkpoint is not None
    assert [f.path for f in store.entries()[0].files] == ["w7/f.txt"]
    if baseline.watch is not None:
        assert counted.walks == 0
    store.restore(checkpoint, "user")
    assert fingerprint(ws) == before


def test_a_changed_exclude_file_falls_back_to_a_full_walk(
    store: CheckpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = store.workspace
    _wide(ws)
    (ws / ".git" / "info").mkdir(parents=True)
    (ws / ".git" / "info" / "exclude").write_text("")
    baseline, counted = _counted(store, monkeypatch)
    (ws / ".git" / "info" / "exclude").write_text("w8/\n")  # inside .git: not watched
    _, note = shell(store, "true")
    assert note is not None and "w8/" in note
    assert counted.walks == (1 if baseline.watch is not None else 2)


class Overflowing:
    """An inotify instance whose queue overflows when told (the kernel's event for it:
    wd -1, IN_Q_OVERFLOW), as it does past fs.inotify.max_queued_events."""

    def __init__(self) -> None:
        self.real = Inotify()
        self.overflow = False

    def add(self, folder: Path) -> int:
        return self.real.add(folder)

    def read_events(self) -> list[tuple[int, int, bytes]]:
        events = self.real.read_events()
        if self.overflow:  # what was queued is lost, as past the kernel's limit
            self.overflow = False
            while self.real.read_events():
                pass
            return [(-1, IN_Q_OVERFLOW, b"")]
        return events

    def close(self) -> None:
        self.real.close()


def test_a_queue_overflow_falls_back_to_a_full_walk(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = CheckpointStore(workspace, workspace / ".toold" / "checkpoints", 1 << 24, 1 << 20)
    store.baseline = Baseline(store, SKIP_DIRS, IgnoreRules, IGNORE_FILES, Overflowing)
    _wide(workspace)
    baseline, counted = _counted(store, monkeypatch)
    watch = baseline.watch
    assert isinstance(watch, Overflowing)
    before = baseline.begin()
    subprocess.run(["bash", "-c", "echo x > w5/f.txt"], cwd=workspace, check=True)
    watch.overflow = True  # the call's events are lost: only a full walk sees its change
    checkpoint, _ = baseline.finish(before, "bash", "agent")
    assert checkpoint is not None and counted.walks == 1
    assert [f.path for f in checkpoint.files] == ["w5/f.txt"]
    counted.start()
    shell(store, "echo y > w6/f.txt")
    assert (counted.walks, counted.listed) == (0, ["w6"])  # incremental again


def test_only_files_whose_stat_changed_are_read_again(
    store: CheckpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = store.workspace
    for i in range(50):
        (ws / f"f{i}.txt").write_text(str(i))
    shell(store, "true")  # the first call reads the tree
    kept: list[bytes] = []
    real = store.keep

    def counted(held: list[str], data: bytes, mode: int) -> str:
        kept.append(data)
        return real(held, data, mode)

    monkeypatch.setattr(store, "keep", counted)
    checkpoint, _ = shell(store, "echo changed > f7.txt")
    assert kept == [b"changed\n"]
    assert checkpoint is not None


def test_what_the_walk_leaves_out_is_named_once(store: CheckpointStore) -> None:
    ws = store.workspace
    seed(ws)
    store.max_file_size = 100
    (ws / "big.bin").write_bytes(b"x" * 101)
    (ws / ".gitignore").write_text("build/\n")
    (ws / "build").mkdir()
    (ws / "node_modules").mkdir()
    checkpoint, note = shell(store, "echo more >> big.bin; echo o > build/out; echo n > b.txt")
    assert note is not None
    assert "1 file (big.bin) over limits.max_file_size (100 bytes)" in note
    assert "2 ignored paths (build/, node_modules/)" in note
    [entry] = store.entries()
    assert [f.path for f in entry.files] == ["b.txt"] and entry.uncovered == note
    listed = CheckpointsListResult.model_validate({"checkpoints": [entry.public()]})
    wire = listed.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert wire["checkpoints"][0]["uncovered"] == note  # checkpoints/list shows it
    _, again = shell(store, "echo m > b.txt")
    assert again is None  # told once in a result; every checkpoint keeps it
    assert store.entries()[-1].uncovered == note
    assert checkpoint is not None
    store.restore(checkpoint, "user")
    assert (ws / "build" / "out").exists()  # not covered, so not undone


def test_past_the_entry_cap_the_rest_is_not_covered(store: CheckpointStore) -> None:
    ws = store.workspace
    for name in "abcdef":
        (ws / name).write_text(name)
    store.max_entries = 3
    checkpoint, note = shell(store, "echo A > a; rm f; echo g > g")
    assert note is not None and "past the first 3 entries" in note
    [entry] = store.entries()
    assert [f.path for f in entry.files] == ["a"]  # f and g lie past the cap: neither recorded
    assert checkpoint is not None


def test_git_and_toold_are_never_walked(store: CheckpointStore) -> None:
    ws = store.workspace
    (ws / ".git").mkdir()
    checkpoint, _ = shell(store, "echo x > .git/HEAD; mkdir .GIT.; echo y > .GIT./c; echo z > t")
    assert checkpoint is not None
    [entry] = store.entries()
    assert [f.path for f in entry.files] == ["t"] and entry.created == []
    store.restore(checkpoint, "user")
    assert (ws / ".git" / "HEAD").exists()


# -- through the gateway of a bound workspace ------------------------------------------------
LOCAL = {"execution": {"tool_runner": "local"}, "permissions": {"mode": "bypass"}}


def _bound(workspace: Path) -> WorkspaceState:
    return bind(workspace, LOCAL, lambda method, params: None, pytest.fail)


def undone(workspace: Path, scenario: Callable[[WorkspaceState], Awaitable[None]]) -> None:
    """Seed the tree, run ``scenario`` on the workspace bound as the daemon binds it (it
    calls tools and restores), close it, and check the tree is back as it was."""
    seed(workspace)
    before = fingerprint(workspace)

    async def main() -> None:
        state = _bound(workspace)
        try:
            await scenario(state)
        finally:
            await state.aclose()

    asyncio.run(main())
    assert fingerprint(workspace) == before


def test_bash_and_python_repl_calls_are_undone(workspace: Path) -> None:
    async def scenario(state: WorkspaceState) -> None:
        done = await state.gateway.call("bash", {"command": SCENARIO}, CallContext())
        assert not done.is_error, done.content
        code = "open('py.txt', 'w').write('from python')"
        ran = await state.gateway.call("python_repl", {"code": code}, CallContext())
        assert not ran.is_error, ran.content
        store = state.gateway.checkpoints
        assert store is not None and store.baseline is not None
        assert [c.tool for c in store.entries()] == ["bash", "python_repl"]
        await asyncio.to_thread(store.restore, store.entries()[0].id, "user")
        assert store.baseline.watch is not None
        await state.aclose()
        assert store.baseline.watch is None  # its inotify instance went with the workspace
        # The baseline's copies went too: what is left is what the checkpoints name.
        named = {d for c in store.entries() for d in c.digests()}
        assert {o.name for o in (store.folder / "objects").iterdir()} == named

    undone(workspace, scenario)


def test_a_background_jobs_checkpoint_is_recorded_when_it_ends(workspace: Path) -> None:
    async def scenario(state: WorkspaceState) -> None:
        arguments = {"command": "sleep 0.3; echo later > b.txt; rm a.txt"}
        started = await state.gateway.call("background_run", arguments, CallContext())
        assert started.job_id is not None
        store = state.gateway.checkpoints
        assert store is not None
        deadline = asyncio.get_running_loop().time() + 20
        while not store.entries():  # recorded once the job has ended
            assert asyncio.get_running_loop().time() < deadline, "no checkpoint recorded"
            await asyncio.sleep(0.02)
        [entry] = store.entries()
        assert entry.tool == "background_run"
        assert sorted(f.path for f in entry.files) == ["a.txt", "b.txt"]
        await asyncio.to_thread(store.restore, entry.id, "user")

    undone(workspace, scenario)


def test_a_store_that_cannot_be_written_never_fails_the_call(workspace: Path) -> None:
    seed(workspace)
    (workspace / ".toold").mkdir()
    (workspace / ".toold" / "checkpoints").write_text("not a folder")

    async def main() -> None:
        state = _bound(workspace)
        try:
            done = await state.gateway.call("bash", {"command": "echo ran"}, CallContext())
            assert not done.is_error
            assert done.content.startswith("ran\n\n(no checkpoint of this call was recorded: ")
        finally:
            await state.aclose()

    asyncio.run(main())


@pytest.mark.parametrize(("origin", "told"), [("agent", True), ("user", False)])
def test_only_the_model_is_told_what_undo_does_not_cover(
    workspace: Path, origin: str, told: bool
) -> None:
    """A person's own `toold call bash` keeps the command's output as it was."""
    (workspace / "node_modules").mkdir()

    async def scenario(state: WorkspaceState) -> str:
        outcome = await call(state, "bash", origin=origin, command="echo out")
        return str(outcome.content)

    text = run_bound(workspace, scenario, execution={"tool_runner": "local"})
    assert text.startswith("out")
    assert ("undo does not cover" in text) is told, text
