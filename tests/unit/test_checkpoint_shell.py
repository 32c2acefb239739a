"""Undo after a shell call: real bash, python_repl and background jobs, without git.

The tree is fingerprinted whole (every file's bytes and mode, every folder) before a
call and compared after ``restore``: what the call created, changed or deleted is back
byte for byte, modes included. What the walk leaves out is named, never dropped silently.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.trees import SCENARIO, fingerprint, seed
from toold.checkpoints import CheckpointStore
from toold.checkpoints.baseline import Baseline
from toold.errors import CheckpointConflict
from toold.inotify import Inotify
from toold.search.ignore import IGNORE_FILES, IgnoreRules
from toold.search.walk import SKIP_DIRS
from toold.tools.context import CallContext
from toold.workspace import WorkspaceState, bind
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


def test_a_quiet_tree_is_walked_once_a_call_when_watched(
    store: CheckpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(store.workspace)
    baseline = store.baseline
    assert baseline is not None
    shell(store, "true")
    walks: list[int] = []
    real = baseline._walk

    def counted(known: dict[str, Any]) -> Any:
        walks.append(1)
        return real(known)

    monkeypatch.setattr(baseline, "_walk", counted)
    for _ in range(3):
        shell(store, "echo x >> b.txt")
    assert len(walks) == (3 if baseline.watch is not None else 6)
    (store.workspace / "a.txt").write_text("outside")  # an event: the next call walks first
    shell(store, "true")
    assert len(walks) == (5 if baseline.watch is not None else 8)


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
