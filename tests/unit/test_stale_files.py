"""The stale-file guard and the guard's view of edits, through the real gateway.

An agent edits only what it has seen as it is now; dry runs are judged as reads; every
file a patch names is judged for self-escalation and deny rules.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.bound import call, run_bound
from toold.errors import FileChangedError
from toold.permissions.guard import SELF_ESCALATION, PermissionGuard
from toold.tools.filestate import RACY_NS, FileState, FileTracker
from toold.tools.toolset import ToolOutcome
from toold.workspace import WorkspaceState

CHANGED = (
    "Error: FileChangedError: a.txt changed since it was last read; read it again before editing"
)


def test_an_agent_edits_only_what_it_read(workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\n")

    async def scenario(state: WorkspaceState) -> list[ToolOutcome]:
        edit = {"file_path": "a.txt", "old_text": "one", "new_text": "two"}
        return [
            await call(state, "edit_file", **edit),
            await call(state, "write_file", file_path="a.txt", content="x"),
            await call(state, "str_replace", path="a.txt", old="one", new="1", dry_run=True),
            await call(state, "read_file", file_path="a.txt"),
            await call(state, "edit_file", **edit),
            # Its own write counts as seen: the next edit needs no new read.
            await call(state, "multi_edit", file_path="a.txt", edits=[edit_of("two", "3")]),
            await call(state, "write_file", file_path="new.txt", content="fresh"),  # no file yet
        ]

    outcomes = run_bound(workspace, scenario)
    assert outcomes[0].content == (
        "Error: FileChangedError: a.txt has not been read in this session; read it "
        "(read_file) before editing or overwriting it"
    )
    assert outcomes[1].is_error and "has not been read" in outcomes[1].content
    assert not outcomes[2].is_error  # a dry run writes nothing: nothing to guard
    assert [o.is_error for o in outcomes[3:]] == [False, False, False, False]
    assert (workspace / "a.txt").read_text() == "3\n"


def edit_of(old: str, new: str) -> dict[str, str]:
    return {"old_text": old, "new_text": new}


def test_an_outside_change_between_read_and_edit_is_caught(workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\n")

    async def scenario(state: WorkspaceState) -> list[ToolOutcome]:
        await call(state, "read_file", file_path="a.txt")
        (workspace / "a.txt").write_text("ONE\n")  # same size: only the content tells
        first = await call(state, "edit_file", file_path="a.txt", old_text="ONE", new_text="2")
        user = await call(state, "write_file", "user", file_path="a.txt", content="mine\n")
        await call(state, "read_file", file_path="a.txt")
        again = await call(state, "edit_file", file_path="a.txt", old_text="mine", new_text="3")
        return [first, user, again]

    first, user, again = run_bound(workspace, scenario)
    assert first.content == CHANGED
    assert not user.is_error  # the user's own calls are not checked
    assert again.content == "Edited a.txt"


def test_a_file_swapped_for_a_symlink_after_reading_is_refused(
    workspace: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("one\n")
    (workspace / "a.txt").write_text("one\n")

    async def scenario(state: WorkspaceState) -> ToolOutcome:
        await call(state, "read_file", file_path="a.txt")
        (workspace / "a.txt").unlink()
        os.symlink(secret, workspace / "a.txt")
        return await call(state, "write_file", file_path="a.txt", content="pwned\n")

    outcome = run_bound(workspace, scenario)
    assert outcome.content == CHANGED
    assert secret.read_text() == "one\n"


def test_a_patch_modifying_or_deleting_an_unread_file_is_refused(workspace: Path) -> None:
    (workspace / "a.txt").write_text("a\n")
    (workspace / "b.txt").write_text("b\n")
    patch = (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+A\n"
        "--- a/b.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-b\n"
    )

    async def scenario(state: WorkspaceState) -> list[ToolOutcome]:
        await call(state, "read_file", file_path="a.txt")
        refused = await call(state, "apply_patch", patch=patch)
        await call(state, "read_file", file_path="b.txt")
        return [refused, await call(state, "apply_patch", patch=patch)]

    refused, applied = run_bound(workspace, scenario)
    assert refused.content.startswith("Error: FileChangedError: b.txt has not been read")
    assert applied.content == "Applied patch: modified a.txt, deleted b.txt"
    assert (workspace / "a.txt").read_text() == "A\n" and not (workspace / "b.txt").exists()


def test_the_check_can_be_turned_off(workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\n")

    async def scenario(state: WorkspaceState) -> ToolOutcome:
        return await call(state, "edit_file", file_path="a.txt", old_text="one", new_text="2")

    outcome = run_bound(workspace, scenario, files={"require_read_before_edit": False})
    assert outcome.content == "Edited a.txt"


def test_edits_of_one_file_sent_at_once_lose_nothing(workspace: Path) -> None:
    (workspace / "a.txt").write_text("".join(f"line {i}\n" for i in range(20)))

    async def scenario(state: WorkspaceState) -> list[ToolOutcome]:
        await call(state, "read_file", file_path="a.txt")
        edits = [
            call(state, "edit_file", file_path="a.txt", old_text=f"line {i}\n", new_text=f"L{i}\n")
            for i in range(20)
        ]
        return list(await asyncio.gather(*edits))

    outcomes = run_bound(workspace, scenario)
    assert [o.content for o in outcomes] == ["Edited a.txt"] * 20
    assert (workspace / "a.txt").read_text() == "".join(f"L{i}\n" for i in range(20))


# -- the guard --------------------------------------------------------------------------------


def asked(
    mode: str = "default", deny: tuple[str, ...] = (), answer: str = "allow"
) -> tuple[PermissionGuard, list[str]]:
    reasons: list[str] = []

    async def ask(tool: str, args: Any, reason: str) -> str:
        reasons.append(reason)
        return answer

    guard = PermissionGuard.from_config(mode, [], list(deny), ask=ask)  # type: ignore[arg-type]
    return guard, reasons


@pytest.mark.parametrize(
    "target", ["toold.toml", ".toold/hooks.json", "TOOLD.TOML", "x/../toold.toml"]
)
def test_a_patch_that_writes_toold_files_is_a_self_escalation(workspace: Path, target: str) -> None:
    patch = (
        "--- /dev/null\n+++ b/ok.txt\n@@ -0,0 +1 @@\n+x\n"
        f"--- /dev/null\n+++ b/{target}\n@@ -0,0 +1 @@\n+x\n"
    )
    guard, reasons = asked(mode="bypass", answer="deny")

    async def scenario(state: WorkspaceState) -> ToolOutcome:
        state.gateway.guard.mode, state.gateway.guard.ask = "auto", guard.ask
        state.gateway.guard.allow = PermissionGuard.from_config("auto", ["apply_patch"], []).allow
        return await call(state, "apply_patch", patch=patch)

    outcome = run_bound(workspace, scenario)
    assert outcome.is_error
    if ".." in target:  # such a path is refused before the guard
        assert "'..'" in outcome.content and reasons == []
    else:
        assert reasons == [SELF_ESCALATION]  # asked, with "Always allow" unable to answer
    assert not (workspace / "ok.txt").exists()


def test_a_writing_tool_whose_paths_cannot_be_named_fails_closed() -> None:
    from toold.tools.annotations import WRITES_FILE

    decision = PermissionGuard(mode="auto").decide("mine", {"patch": "x"}, WRITES_FILE, paths=[])
    assert (decision.reason, decision.approvable) == (SELF_ESCALATION, False)


def test_a_dry_run_is_judged_as_a_read(workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\n")
    (workspace / ".env").write_text("KEY=1\n")

    async def scenario(state: WorkspaceState) -> list[Any]:
        guard, reasons = asked("plan", deny=("read_file(.env)",))
        state.gateway.guard.mode, state.gateway.guard.ask = "plan", guard.ask
        state.gateway.guard.deny = guard.deny
        dry = await call(state, "write_file", file_path="a.txt", content="two\n", dry_run=True)
        # Lax booleans become True or False when validated; only True is a dry run.
        await call(state, "read_file", file_path="a.txt")
        wet = await call(state, "write_file", file_path="a.txt", content="two\n", dry_run="no")
        leak = await call(state, "write_file", file_path=".env", content="", dry_run=True)
        return [dry, wet, leak, reasons]

    dry, wet, leak, reasons = run_bound(workspace, scenario)
    assert "+two" in dry.content
    assert wet.content == "Plan mode: write_file blocked (read-only)"
    assert leak.is_error and "KEY" not in leak.content  # read_file's deny rule holds
    assert reasons == []
    assert (workspace / "a.txt").read_text() == "one\n"


def test_a_folder_swapped_for_a_symlink_after_reading_is_refused(
    workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.txt").write_text("one\n")  # the same content as the file that was read
    (workspace / "d").mkdir()
    (workspace / "d" / "a.txt").write_text("one\n")

    async def scenario(state: WorkspaceState) -> ToolOutcome:
        await call(state, "read_file", file_path="d/a.txt")
        (workspace / "d" / "a.txt").unlink()
        (workspace / "d").rmdir()
        os.symlink(outside, workspace / "d")
        return await call(state, "edit_file", file_path="d/a.txt", old_text="one", new_text="x")

    outcome = run_bound(workspace, scenario)
    assert outcome.content.startswith("Error: FileChangedError: d/a.txt changed since")
    assert (outside / "a.txt").read_text() == "one\n"


def test_a_file_is_never_hashed_only_to_be_refused(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard checks on the event loop for inline tools: hashing a planted 3 GiB file
    an agent never read (or one whose size changed) froze the daemon for seconds. An
    unread file or one of another size is refused without reading its content."""
    with open(workspace / "big.bin", "wb") as sparse:
        sparse.write(b"line\n")
        sparse.truncate(3 << 30)
    (workspace / "a.txt").write_text("one\n")
    hashed: list[int] = []
    real = hashlib.sha256

    def counting(*args: Any) -> Any:
        hashed.append(1)
        return real(*args)

    async def scenario(state: WorkspaceState) -> list[str]:
        await call(state, "read_file", file_path="a.txt")
        (workspace / "a.txt").write_text("grown since\n")
        monkeypatch.setattr("toold.tools.filestate.hashlib.sha256", counting)
        edit = [{"old_text": "line", "new_text": "x"}]
        return [
            str((await call(state, "multi_edit", file_path="big.bin", edits=edit)).content),
            str((await call(state, "write_file", file_path="a.txt", content="x")).content),
        ]

    unread, grown = run_bound(workspace, scenario)
    assert "big.bin has not been read" in unread
    assert "a.txt changed since it was last read" in grown
    assert hashed == []


LATER_NS = 10 * RACY_NS
"""How far the tracker's clock is moved on to make a file's last change clearly past."""


def test_a_same_size_rewrite_with_the_same_mtime_is_caught(workspace: Path) -> None:
    """mtime and size can both come out as they were (one clock tick, or utime): ctime
    still moves, and a file changed in the tick of its hash is hashed again anyway."""
    (workspace / "a.txt").write_text("one\n")

    async def scenario(state: WorkspaceState, settled: bool) -> ToolOutcome:
        files = state.runtime.files
        if settled:  # the read's hash is clearly after the last change: stat is trusted
            files.clock = lambda: time.time_ns() + LATER_NS
        await call(state, "read_file", file_path="a.txt")
        seen = os.stat(workspace / "a.txt")
        (workspace / "a.txt").write_text("ONE\n")
        os.utime(workspace / "a.txt", ns=(seen.st_atime_ns, seen.st_mtime_ns))
        after = os.stat(workspace / "a.txt")
        assert (after.st_size, after.st_mtime_ns) == (seen.st_size, seen.st_mtime_ns)
        return await call(state, "edit_file", file_path="a.txt", old_text="ONE", new_text="2")

    for settled in (False, True):
        (workspace / "a.txt").write_text("one\n")
        outcome = run_bound(workspace, functools.partial(scenario, settled=settled))
        assert outcome.content == CHANGED, settled
        assert (workspace / "a.txt").read_text() == "ONE\n"


def test_an_unchanged_file_is_hashed_once(workspace: Path) -> None:
    """Reads and edit checks of a file whose stat is as it was when hashed (long after
    its last change) reuse that hash; any change of the file means a new one."""
    (workspace / "a.txt").write_text("one\n")

    async def scenario(state: WorkspaceState) -> list[int]:
        files = state.runtime.files
        files.clock = lambda: time.time_ns() + LATER_NS
        counts = []
        for _ in range(3):
            await call(state, "read_file", file_path="a.txt")
            counts.append(files.hashed)
        edited = await call(state, "edit_file", file_path="a.txt", old_text="one", new_text="2")
        assert edited.content == "Edited a.txt"
        counts.append(files.hashed)  # the check reused the read's hash; the write hashed
        await call(state, "read_file", file_path="a.txt")
        counts.append(files.hashed)
        assert f"{workspace}/a.txt" not in _open_names(workspace)  # held only over a read
        return counts

    assert run_bound(workspace, scenario) == [1, 1, 1, 2, 2]


def test_a_file_changed_in_the_tick_of_its_hash_is_hashed_again(workspace: Path) -> None:
    """git's racy-entry rule: a file whose last change is not clearly before its hash may
    be rewritten in the same timestamp tick with every stat field as it was. The tracker
    then trusts no stat: its check hashes again and finds the content it never saw."""
    (workspace / "a.txt").write_text("one\n")
    files = FileTracker(workspace)
    files.remember(["a.txt"])
    seen = files.current("a.txt")
    assert seen is not None and not seen.settled  # written just now: racy
    files.remember(["a.txt"])
    assert files.hashed == 3  # no stat-only shortcut for a racy file
    # What a same-tick rewrite looks like from here: same stat, another content.
    other = FileState(seen.stat, hashlib.sha256(b"ONE\n").hexdigest(), settled=False)
    files._seen["a.txt"] = other
    with pytest.raises(FileChangedError, match="changed since it was last read"):
        files.require_seen(["a.txt"])
    # The same belief, settled, is what the stat rule trusts (so the check above can fail).
    files._seen["a.txt"] = replace(other, settled=True)
    files.require_seen(["a.txt"])


def test_a_file_changed_or_replaced_while_it_was_read_is_forgotten(tmp_path: Path) -> None:
    """A read's files are held open over it (one walk each): one rewritten meanwhile, or
    whose name now leads to another file (even of the same content), is forgotten."""
    (tmp_path / "d").mkdir()
    for name, text in (("a.txt", "1\n"), ("b.txt", "2\n"), ("c.txt", "3\n"), ("d/e", "4\n")):
        (tmp_path / name).write_text(text)
    files = FileTracker(tmp_path)
    with files.held(["a.txt", "b.txt", "c.txt", "d/e", "none.txt", "a.txt"]) as held:
        assert len(_open_names(tmp_path)) == 4  # one descriptor per file, none for none.txt
        (tmp_path / "b.txt").write_text("TWO\n")
        (tmp_path / "new").write_text("3\n")
        os.replace(tmp_path / "new", tmp_path / "c.txt")
        # d/e itself untouched (its stat is as it was), but its name leads elsewhere now.
        os.rename(tmp_path / "d", tmp_path / "aside")
        (tmp_path / "d").mkdir()
        (tmp_path / "d" / "e").write_text("4\n")
        files.remember_held(held)
    assert _open_names(tmp_path) == []
    files.require_seen(["a.txt", "none.txt"])
    for name in ("b.txt", "c.txt", "d/e"):
        with pytest.raises(FileChangedError, match="has not been read"):
            files.require_seen([name])


def _open_names(folder: Path) -> list[str]:
    """The files in ``folder`` this process holds open."""
    names = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(FileNotFoundError):  # closed since (the listing's own fd)
            names.append(os.readlink(f"/proc/self/fd/{fd}"))
    return [n for n in names if n.startswith(f"{folder}{os.sep}")]


def test_without_proc_a_held_read_is_checked_by_a_new_walk(tmp_path: Path) -> None:
    """With no /proc to name a held file, a fresh walk tells what the name leads to."""
    (tmp_path / "a.txt").write_text("1\n")
    (tmp_path / "b.txt").write_text("2\n")
    files = FileTracker(tmp_path)
    with files.held(["a.txt", "b.txt"]) as held:
        nameless = {rel: one._replace(name="") for rel, one in held.items() if one}
        (tmp_path / "new").write_text("2\n")
        os.replace(tmp_path / "new", tmp_path / "b.txt")
        files.remember_held(nameless)
    files.require_seen(["a.txt"])
    with pytest.raises(FileChangedError, match="has not been read"):
        files.require_seen(["b.txt"])
