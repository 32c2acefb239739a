"""Restoring: diff and restore, putting files back as a checkpoint found them.

A restore reads every object it needs and makes every refusal before any file is
written (toold.checkpoints' docstring says why); never into .git/ or .toold/.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import secrets
import stat
from collections.abc import Callable
from typing import Any

from toold.checkpoints.diff import unified_diff
from toold.checkpoints.index import Checkpoint, CheckpointIndex, FileChange
from toold.checkpoints.objects import UNKNOWN_MODE, ObjectStore
from toold.errors import CheckpointConflict, CheckpointStoreError, UnknownCheckpoint
from toold.sandbox.paths import DIR_FLAGS, open_in_workspace, workspace_relative
from toold.storage import atomic_write_at, now
from toold.terminal import one_line

NEVER_RESTORED = frozenset({".git", ".toold"})
"""Folders a restore never writes into, at any depth: git runs code configured in
``.git/`` (core.fsmonitor, hooks), and ``.toold/`` is toold's own state."""


class Restoring(ObjectStore):
    """A store's diff and restore (CheckpointStore records what they read)."""

    def diff(self, checkpoint_id: str) -> str:
        """Unified diff from before ``checkpoint_id`` (and every later call) to now; an
        entry toold did not sign is refused, as by ``restore`` (its diff would pass for
        what an undo would do)."""
        with self._reading() as index:
            live = self._live_since(index, checkpoint_id)
        targets = self._targets(live)
        parts = []
        for path, (before, _) in targets.items():
            try:
                current = self._read(path)
            except OSError as exc:
                parts.append(f"{path}: {exc}\n")
                continue
            parts.append(unified_diff(path, _data(self._blob(path, before)), current))
        return "".join(parts)

    def restore(
        self,
        checkpoint_id: str,
        origin: str,
        *,
        force: bool = False,
        guarded: Callable[[str], bool] | None = None,
    ) -> Checkpoint:
        """Put the files back as they were before ``checkpoint_id``; the restore's own
        checkpoint is returned. CheckpointConflict names files changed outside toold, and
        files ``guarded`` says configure toold (toold.toml): either only with ``force``.
        CheckpointStoreError refuses, even with ``force``, an entry toold did not sign and
        a file inside ``.git/`` or ``.toold/`` (NEVER_RESTORED)."""
        held: list[str] = []
        try:
            with self._locked() as index:
                live = self._live_since(index, checkpoint_id)
                targets = self._targets(live)
                modes = _modes(live)
                wanted, current = self._prepare(checkpoint_id, targets, force, guarded)
                files = [
                    self._redo(held, p, before, current[p], modes)
                    for p, (before, _) in targets.items()
                ]
                self._write_all(targets, wanted, current, modes)
                made, gone = self._restore_folders(live)
                for checkpoint in live:
                    checkpoint.undone = True
                    self._sign(checkpoint)
                done = Checkpoint(
                    secrets.token_hex(4), "restore", origin, now(), files, restores=checkpoint_id
                )
                done.created, done.removed = made, gone
                freed = index.change([*live, self._sign(done)], self.max_bytes)
                self._release(held, freed, index)
                held = []
        finally:
            self._release(held)
        return done

    def _redo(
        self,
        held: list[str],
        path: str,
        before: str | None,
        current: tuple[bytes, int] | None,
        modes: dict[str, int | None],
    ) -> FileChange:
        """The restore's own change of ``path`` (restoring it redoes): what is there now
        to ``before``, with the modes when the undone change recorded them."""
        now_digest = self._put(held, *(current or (None, None)))
        if path not in modes:
            return FileChange(path, now_digest, before)
        mode_now = None if current is None else current[1] & 0o777
        return FileChange(path, now_digest, before, mode_now, modes[path])

    def _restore_folders(self, live: list[Checkpoint]) -> tuple[list[str], list[str]]:
        """Folders the ``live`` shell calls removed made again, those they created removed
        when empty (deepest first); the made and the removed are returned. Never in .git/
        or .toold/, never through a symlink."""
        first: dict[str, bool] = {}  # folder → it existed before the first of the calls
        for checkpoint in live:
            for path in checkpoint.created:
                first.setdefault(path, False)
            for path in checkpoint.removed:
                first.setdefault(path, True)
        made = [
            p
            for p in sorted(first, key=lambda p: (p.count("/"), p))
            if first[p] and self._folder(p, make=True)
        ]
        gone = [
            p
            for p in sorted(first, key=lambda p: (-p.count("/"), p))
            if not first[p] and self._folder(p, make=False)
        ]
        return made, gone

    def _folder(self, path: str, *, make: bool) -> bool:
        """Make the folder ``path``, or remove it if empty; whether that was done."""
        if never_restored(path):
            return False
        parent, _, name = path.rpartition("/")
        try:
            dir_fd = open_in_workspace(
                self.workspace, parent or ".", DIR_FLAGS, create_parents=make
            )
        except OSError:
            return False
        try:
            if make:
                os.mkdir(name, dir_fd=dir_fd)
            else:
                os.rmdir(name, dir_fd=dir_fd)  # only an empty one
        except OSError:
            return False
        finally:
            os.close(dir_fd)
        return True

    def _prepare(
        self,
        checkpoint_id: str,
        targets: dict[str, tuple[str | None, str | None]],
        force: bool,
        guarded: Callable[[str], bool] | None,
    ) -> tuple[dict[str, tuple[bytes, int] | None], dict[str, tuple[bytes, int] | None]]:
        """What a restore writes and what is there now, every object read and every
        refusal made before any file is written."""
        never = sorted(p for p in targets if never_restored(p))
        if never:
            raise CheckpointStoreError(
                f"restoring checkpoint {checkpoint_id} would write {_named(never)}: a "
                "restore never writes into .git/ or .toold/ (git runs commands configured "
                "there); nothing was restored"
            )
        wanted = {path: self._blob(path, before) for path, (before, _) in targets.items()}
        sensitive = sorted(p for p in targets if guarded is not None and guarded(p))
        if sensitive and not force:
            raise CheckpointConflict(
                f"restoring checkpoint {checkpoint_id} would rewrite {_named(sensitive)}, "
                "toold's own configuration; check it with `toold checkpoints diff "
                f"{checkpoint_id}`, then pass force to restore anyway",
                sensitive,
            )
        current: dict[str, tuple[bytes, int] | None] = {}
        changed = []
        for path, (_, expected) in targets.items():
            try:
                current[path] = self._read_file(path)
            except OSError as exc:
                raise CheckpointConflict(f"cannot restore {path}: {exc}", [path]) from None
            if self._digest(_data(current[path])) != expected:
                changed.append(path)
        if changed and not force:
            raise CheckpointConflict(
                f"{_named(sorted(changed))} changed outside toold since checkpoint "
                f"{checkpoint_id}; restoring would lose that: pass force to restore anyway",
                sorted(changed),
            )
        return wanted, current

    def _write_all(
        self,
        targets: dict[str, Any],
        wanted: dict[str, tuple[bytes, int] | None],
        current: dict[str, tuple[bytes, int] | None],
        modes: dict[str, int | None],
    ) -> None:
        """Write every target (with its recorded mode, if any), or (a write failed) put
        back those already written."""
        written: list[str] = []
        try:
            for path in targets:
                self._write(path, *_content(wanted[path]), modes.get(path))
                written.append(path)
        except OSError as exc:
            for done_path in reversed(written):
                with contextlib.suppress(OSError):
                    self._write(done_path, *_content(current[done_path]))
            raise CheckpointConflict(
                f"cannot restore {path}: {exc}; nothing was restored", [path]
            ) from None

    def _write(
        self, path: str, data: bytes | None, mode: int = UNKNOWN_MODE, exact: int | None = None
    ) -> None:
        """Put ``path`` back: its bytes, or no file; never through a symlink. A file there
        keeps its mode, a new one gets ``mode`` (its object's), unless ``exact`` (the mode
        a shell call's checkpoint recorded) is given."""
        parent, _, name = workspace_relative(self.workspace, path).rpartition("/")
        dir_fd = open_in_workspace(self.workspace, parent or ".", DIR_FLAGS, create_parents=True)
        try:
            if data is None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=dir_fd)
                return
            try:
                there = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                there = None
            if exact is not None:
                atomic_write_at(dir_fd, name, data, mode=exact & 0o777)
            elif there is not None and stat.S_ISREG(there.st_mode):
                atomic_write_at(dir_fd, name, data)
            else:
                atomic_write_at(dir_fd, name, data, mode=mode & 0o777, umask=True)
        finally:
            os.close(dir_fd)

    @staticmethod
    def _digest(data: bytes | None) -> str | None:
        return None if data is None else hashlib.sha256(data).hexdigest()

    def _live_since(self, index: CheckpointIndex, checkpoint_id: str) -> list[Checkpoint]:
        """``checkpoint_id`` and the later entries not undone (what a restore reads and
        marks undone), each signed by toold; UnknownCheckpoint for an unknown or undone id."""
        tail = index.since(checkpoint_id)
        if tail is None:
            raise UnknownCheckpoint(f"no checkpoint {checkpoint_id}: see checkpoints/list")
        if tail[0].undone:
            raise UnknownCheckpoint(
                f"checkpoint {checkpoint_id} was already undone; restore the restore's "
                "own checkpoint to redo it"
            )
        live = [checkpoint for checkpoint in tail if not checkpoint.undone]
        for checkpoint in live:
            self._require_signed(checkpoint)
        return live

    @staticmethod
    def _targets(live: list[Checkpoint]) -> dict[str, tuple[str | None, str | None]]:
        """path → (content before the first of the ``live`` calls, after the last)."""
        targets: dict[str, tuple[str | None, str | None]] = {}
        for checkpoint in live:
            for change in checkpoint.files:
                first = targets.get(change.path, (change.before, None))[0]
                targets[change.path] = (first, change.after)
        return targets


def never_restored(path: str) -> bool:
    """Whether ``path`` lies in .git/ or .toold/ in any spelling a filesystem may take for
    it: any case (``.GIT``), trailing dots or spaces (``.git.``), at any depth."""
    for part in posixpath.normpath(path).lower().split("/"):
        # NTFS: ".git::$DATA" is .git's stream and "git~1" its short name.
        folded = part.partition(":")[0].rstrip(". ")
        if folded in NEVER_RESTORED or part == "git~1":
            return True
    return False


def _named(paths: list[str]) -> str:
    """Paths for a message, each unprintable character escaped (it reaches a terminal)."""
    return ", ".join(one_line(p) for p in paths)


def _modes(live: list[Checkpoint]) -> dict[str, int | None]:
    """path → its mode before the first of the ``live`` calls (None: no file), for the
    paths whose first change recorded modes (a shell call's)."""
    modes: dict[str, int | None] = {}
    seen: set[str] = set()
    for checkpoint in live:
        for change in checkpoint.files:
            recorded = change.mode_before is not None or change.mode_after is not None
            if change.path not in seen and recorded:
                modes[change.path] = change.mode_before
            seen.add(change.path)
    return modes


def _data(found: tuple[bytes, int] | None) -> bytes | None:
    return None if found is None else found[0]


def _content(found: tuple[bytes, int] | None) -> tuple[bytes | None, int]:
    return (None, UNKNOWN_MODE) if found is None else found
