"""CheckpointStore: snapshots before a call, the checkpoint after, diff and restore.

The design and its guarantees are in the package's docstring (toold.checkpoints).
objects.py holds the objects and the signed index, restore.py diff and restore.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from toold.checkpoints.index import Checkpoint, CheckpointIndex, FileChange
from toold.checkpoints.restore import Restoring
from toold.config import CheckpointsConfig
from toold.errors import CheckpointStoreError
from toold.sandbox.paths import workspace_relative
from toold.storage import now

if TYPE_CHECKING:
    from toold.checkpoints.baseline import Baseline

log = logging.getLogger(__name__)


@dataclass
class Pending:
    """Files snapshotted before a call; ``record`` compares them with what follows."""

    before: dict[str, str | None] = field(default_factory=dict)
    held: list[str] = field(default_factory=list)
    """Objects stored for this call and kept from removal until it is recorded."""


class CheckpointStore(Restoring):
    """The checkpoints of one workspace, under ``folder`` (``.toold/checkpoints``)."""

    def __init__(
        self,
        workspace: Path,
        folder: Path,
        max_bytes: int,
        max_file_size: int,
        key: bytes | Callable[[], bytes] | None = None,
    ) -> None:
        super().__init__(workspace, folder, max_bytes, max_file_size, key)
        self.enabled = True
        """Whether calls are recorded (``checkpoints.enabled``); restoring works either way."""
        self.max_entries = CheckpointsConfig().max_entries
        """Entries a shell call's walk covers (``checkpoints.max_entries``)."""
        self.baseline: Baseline | None = None
        """The tree as shell calls last left it (toold.checkpoints.baseline), once one ran."""

    def configure(self, settings: CheckpointsConfig, max_file_size: int) -> None:
        """Apply ``[checkpoints]`` and ``limits.max_file_size`` (at start and on reload)."""
        self.enabled = settings.enabled
        self.max_bytes = settings.max_bytes
        self.max_entries = settings.max_entries
        self.max_file_size = max_file_size

    # -- recording ----------------------------------------------------------------------
    def snapshot(self, paths: Iterable[str]) -> Pending:
        """Store the current content of ``paths`` (files too large or unreadable are skipped)."""
        pending = Pending()
        with self._storing() as put:
            for path in paths:
                try:
                    rel = workspace_relative(self.workspace, path)
                    pending.before[rel] = put(pending.held, *self._found(rel))
                except (OSError, ValueError, CheckpointStoreError):
                    continue  # not recorded: the call itself reports what is wrong
        return pending

    def record(
        self, pending: Pending, tool: str, origin: str, *, wait: bool = True
    ) -> Checkpoint | None:
        """One checkpoint for the files that changed since ``snapshot``; None if none did.

        With ``wait`` False, IndexBusy (``pending`` untouched, nothing recorded) instead of
        waiting while another thread or process holds the index's lock: the event loop
        records a bounded call without ever waiting on another process.
        """
        if wait:
            return self._record(pending, tool, origin, self._locked)
        try:
            with self._locked(wait=False) as index:  # the lock first: nothing done when busy
                return self._record(pending, tool, origin, lambda: _as_locked(index))
        except (OSError, CheckpointStoreError) as exc:  # as ``_record`` answers them
            log.warning("%s changed by %s, no checkpoint recorded: %s", tool, origin, exc)
            self._release(pending.held)
            pending.held = []
            return None

    def _record(
        self,
        pending: Pending,
        tool: str,
        origin: str,
        locked: Callable[[], contextlib.AbstractContextManager[CheckpointIndex]],
    ) -> Checkpoint | None:
        """``record`` with ``locked`` giving the index under its lock."""
        changes: list[FileChange] = []
        held = pending.held
        pending.held = []
        try:
            with self._storing() as put:
                for path, before in pending.before.items():
                    try:
                        after = put(held, *self._found(path))
                    except (OSError, CheckpointStoreError):
                        continue
                    if after != before:
                        changes.append(FileChange(path, before, after))
            if not changes:  # what the snapshot stored may be named by nothing
                with contextlib.suppress(OSError, CheckpointStoreError), locked() as index:
                    self._release(held, (), index)
                    held = []
                return None
            checkpoint = Checkpoint(secrets.token_hex(4), tool, origin, now(), changes)
            with locked() as index:
                self._release(held, index.change([self._sign(checkpoint)], self.max_bytes), index)
                held = []
        except (OSError, CheckpointStoreError) as exc:  # the call's own result stands
            log.warning("%s changed by %s, no checkpoint recorded: %s", tool, origin, exc)
            return None
        finally:
            self._release(held)
        return checkpoint

    def close(self) -> None:
        """Let go of what the store holds open: its folders and the shell baseline's
        inotify instance."""
        for held in (self._root_folder, *self._subfolders.values()):
            held.close()
        self._index.close()
        if self.baseline is not None:
            self.baseline.close()

    # -- a shell call's checkpoint (toold.checkpoints.baseline) ----------------------------
    def keep(self, held: list[str], data: bytes, mode: int) -> str:
        """Store ``data`` (a file of mode ``mode``) as an object held until ``release``."""
        digest = self._put(held, data, mode)
        assert digest is not None
        return digest

    def hold(self, digests: list[str]) -> None:
        """Keep the objects ``digests`` from removal until ``release``."""
        with self._held_lock:
            self._held.update(digests)

    def release(self, digests: list[str], *, sweep: bool = True) -> None:
        """Let go of ``digests``; those no checkpoint names and nothing holds are removed
        (with ``sweep``; else they stay until the next sweep)."""
        if not sweep:
            self._release(digests)
            return
        try:
            with self._locked() as index:
                self._release(digests, (), index)
        except (OSError, CheckpointStoreError) as exc:
            log.warning("could not remove unused checkpoint objects: %s", exc)
            self._release(digests)

    def record_shell(
        self,
        changes: list[FileChange],
        tool: str,
        origin: str,
        *,
        created: list[str],
        removed: list[str],
        uncovered: str | None,
    ) -> Checkpoint | None:
        """One checkpoint of a shell call's changes, whose objects a snapshot holds; an
        object missing by now (swept by another process) leaves its file out."""
        kept = [c for c in changes if all(self._stored(d) for d in (c.before, c.after))]
        if len(kept) < len(changes):
            lost = len(changes) - len(kept)
            uncovered = f"{uncovered + '; ' if uncovered else ''}{lost} files whose stored "
            uncovered += "content another toold removed"
        checkpoint = Checkpoint(secrets.token_hex(4), tool, origin, now(), kept)
        checkpoint.created, checkpoint.removed = created, removed
        checkpoint.uncovered = uncovered[:2000] if uncovered else None
        try:
            with self._locked() as index:
                self._release([], index.change([self._sign(checkpoint)], self.max_bytes), index)
        except (OSError, CheckpointStoreError) as exc:  # the call's own result stands
            log.warning("%s changed by %s, no checkpoint recorded: %s", tool, origin, exc)
            return None
        return checkpoint

    # -- reading (diff and restore: toold.checkpoints.restore) -------------------------
    def entries(self) -> list[Checkpoint]:
        """Every checkpoint, oldest first."""
        with self._reading() as index:
            return index.entries()

    def last_undoable(self) -> str | None:
        """The newest checkpoint an undo goes back to (not undone, not itself a restore)."""
        with self._reading() as index:
            for checkpoint in index.newest():
                if not checkpoint.undone and checkpoint.restores is None:
                    return checkpoint.id
        return None


@contextlib.contextmanager
def _as_locked(index: CheckpointIndex) -> Iterator[CheckpointIndex]:
    """``index``, whose lock the caller already holds, as ``_locked`` gives it."""
    try:
        yield index
    except BaseException:
        index.invalidate()  # the cache may be ahead of the file
        raise
