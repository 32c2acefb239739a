"""CheckpointStore: snapshots before a call, the checkpoint after, diff and restore.

The design and its guarantees are in the package's docstring (toold.checkpoints).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import posixpath
import secrets
import stat
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toold.checkpoints.diff import unified_diff
from toold.checkpoints.folders import HeldFolder
from toold.checkpoints.index import (
    INDEX,
    READ_FLAGS,
    Checkpoint,
    CheckpointIndex,
    FileChange,
)
from toold.config import CheckpointsConfig
from toold.errors import CheckpointConflict, CheckpointStoreError, UnknownCheckpoint
from toold.sandbox.paths import DIR_FLAGS, open_in_workspace, refuse_link, workspace_relative
from toold.storage import atomic_write_at, now, open_state, remove_state, state_names

if TYPE_CHECKING:
    from toold.checkpoints.baseline import Baseline

log = logging.getLogger(__name__)

_READ = READ_FLAGS
KEY_NAME = "checkpoints.key"
"""The user's key signing index entries, in the user's state folder (toold.user_state)."""
NEVER_RESTORED = frozenset({".git", ".toold"})
"""Folders a restore never writes into, at any depth: git runs code configured in
``.git/`` (core.fsmonitor, hooks), and ``.toold/`` is toold's own state."""
UNKNOWN_MODE = 0o600
"""An object's mode when its file's mode is not known."""


@dataclass
class Pending:
    """Files snapshotted before a call; ``record`` compares them with what follows."""

    before: dict[str, str | None] = field(default_factory=dict)
    held: list[str] = field(default_factory=list)
    """Objects stored for this call and kept from removal until it is recorded."""


class IndexBusy(Exception):
    """The index's lock is held by another thread or process (``record(wait=False)``)."""


class CheckpointStore:
    """The checkpoints of one workspace, under ``folder`` (``.toold/checkpoints``)."""

    def __init__(
        self,
        workspace: Path,
        folder: Path,
        max_bytes: int,
        max_file_size: int,
        key: bytes | Callable[[], bytes] | None = None,
    ) -> None:
        self.workspace = workspace
        self.folder = folder
        self.max_bytes = max_bytes
        self.max_file_size = max_file_size
        self.enabled = True
        """Whether calls are recorded (``checkpoints.enabled``); restoring works either way."""
        self._key = key
        """The key signing index entries, or where to get it when first needed (the
        user's, kept outside the workspace: toold.user_state); None: a key of this
        store's own, so only this object restores what it recorded."""
        self._sizes: dict[str, int] = {}
        """Bytes of each object by digest, as stored or first measured (objects never
        change): the bound is kept as the index changes, never by measuring them all."""
        self._root_folder = HeldFolder(folder)
        self._subfolders = {"objects": HeldFolder(folder / "objects")}
        """Made here, not on first use: calls on threads would race to make them."""
        self._index = CheckpointIndex(folder, self._size_of, self._root_folder.open)
        self._held: Counter[str] = Counter()
        """Objects stored for calls not recorded yet: never removed under them."""
        self._held_lock = threading.Lock()
        self._parent_private = False
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

    # -- signatures ---------------------------------------------------------------------
    def _mac(self, checkpoint: Checkpoint) -> str:
        """The entry's HMAC: its fields but the MAC itself, bound to this workspace's path
        (an entry copied from another workspace does not verify here)."""
        key = self._key
        if key is None:
            key = secrets.token_bytes(32)
        elif callable(key):
            try:
                key = key()
            except OSError as exc:
                raise CheckpointStoreError(
                    f"cannot read toold's checkpoint key: {exc}; nothing was recorded or restored"
                ) from None
        self._key = key
        fields = {k: v for k, v in checkpoint.fields().items() if k != "mac"}
        body = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        message = b"toold checkpoint 1\0" + os.fsencode(self.workspace) + b"\0" + body.encode()
        return hmac.new(key, message, hashlib.sha256).hexdigest()

    def _sign(self, checkpoint: Checkpoint) -> Checkpoint:
        checkpoint.mac = self._mac(checkpoint)
        return checkpoint

    def _require_signed(self, checkpoint: Checkpoint) -> None:
        """CheckpointStoreError unless toold wrote ``checkpoint`` (its MAC verifies)."""
        if checkpoint.mac is None or not hmac.compare_digest(checkpoint.mac, self._mac(checkpoint)):
            raise CheckpointStoreError(
                f"checkpoint {checkpoint.id} was not written by toold (bad signature); refusing "
                "to restore it (an entry toold did not sign: written into "
                f"{self.folder / INDEX} by a command or a cloned repository, made before "
                "toold signed checkpoints, or for this workspace at another path); nothing was "
                "restored"
            )

    # -- files of the workspace ---------------------------------------------------------
    def _read(self, path: str) -> bytes | None:
        """The file's bytes; None when there is none. Too large or not a file: OSError."""
        found = self._read_file(path)
        return None if found is None else found[0]

    def _read_file(self, path: str) -> tuple[bytes, int] | None:
        """The file's bytes and permission bits; None when there is none."""
        try:
            fd = open_in_workspace(self.workspace, path, _READ)
        except FileNotFoundError:
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise OSError(f"{path} is not a regular file")
            if info.st_size > self.max_file_size:
                raise OSError(f"{path} is larger than limits.max_file_size")
            return _read_up_to(fd, self.max_file_size + 1, info.st_size), stat.S_IMODE(info.st_mode)
        finally:
            os.close(fd)

    def _dir(self, sub: str | None = None) -> int:
        """A descriptor of the store's folder (or its ``sub`` folder), made and kept 0700:
        objects hold copies of files that may be private (``.env``). Both stay open
        between calls (toold.checkpoints.folders); the caller closes the one it gets."""
        if sub is None:
            return self._root_folder.open()
        fd = self._subfolders[sub].open()
        if not self._parent_private:
            try:
                os.close(self._dir())
            except BaseException:
                os.close(fd)
                raise
            self._parent_private = True  # checked once a process: made 0700 by toold
        return fd

    def _put(self, held: list[str], data: bytes | None, mode: int | None = None) -> str | None:
        """Store ``data`` as an object no wider than ``mode`` (the file's; 0600 if unknown),
        held from removal (its digest added to ``held``) until ``_release``."""
        if data is None:
            return None
        digest = hashlib.sha256(data).hexdigest()
        with self._held_lock:
            self._held[digest] += 1
        held.append(digest)
        self._sizes[digest] = len(data)
        wanted = UNKNOWN_MODE if mode is None else mode & 0o777
        objects = self._dir("objects")
        try:
            try:
                fd = refuse_link(objects, digest, f"{self.folder}/objects/{digest}", _READ)
            except FileNotFoundError:
                fd = None
            if fd is not None:
                try:
                    info = os.fstat(fd)
                    size = len(data) + 1
                    same = stat.S_ISREG(info.st_mode) and _read_up_to(fd, size, size) == data
                    narrowest = stat.S_IMODE(info.st_mode) & wanted
                    if same and narrowest != stat.S_IMODE(info.st_mode):
                        os.fchmod(fd, narrowest)
                finally:
                    os.close(fd)
                if same:
                    return digest
            atomic_write_at(
                objects, digest, data, durable=False, mode=wanted
            )  # or planted: replaced
        finally:
            os.close(objects)
        return digest

    def _blob(self, path: str, digest: str | None) -> tuple[bytes, int] | None:
        """The stored content ``digest`` of ``path`` and its object's mode, checked
        against its digest."""
        if digest is None:
            return None
        where = self.folder / "objects" / digest
        found: tuple[bytes, int] | None = None
        try:
            fd = open_state(where, _READ)
            with os.fdopen(fd, "rb") as fh:
                info = os.fstat(fh.fileno())
                if stat.S_ISREG(info.st_mode):
                    found = fh.read(), stat.S_IMODE(info.st_mode)
        except OSError:
            found = None
        if found is None or hashlib.sha256(found[0]).hexdigest() != digest:
            raise CheckpointStoreError(
                f"the stored content of {path} ({where}) is missing or damaged; nothing was "
                "restored"
            )
        return found

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

    # -- recording ----------------------------------------------------------------------
    def snapshot(self, paths: Iterable[str]) -> Pending:
        """Store the current content of ``paths`` (files too large or unreadable are skipped)."""
        pending = Pending()
        for path in paths:
            try:
                rel = workspace_relative(self.workspace, path)
                pending.before[rel] = self._put(pending.held, *self._found(rel))
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
            for path, before in pending.before.items():
                try:
                    after = self._put(held, *self._found(path))
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

    def _stored(self, digest: str | None) -> bool:
        return digest is None or os.path.lexists(self.folder / "objects" / digest)

    def _release(
        self, held: list[str], freed: Iterable[str] = (), index: CheckpointIndex | None = None
    ) -> None:
        """Let go of the objects ``held``; with the (locked) ``index``, remove those it no
        longer names (``freed`` by the bound, or stored for a call that changed nothing)
        unless another call holds them."""
        with self._held_lock:
            for digest in held:
                self._held[digest] -= 1
                if self._held[digest] <= 0:
                    del self._held[digest]
            if index is None:
                return
            for digest in {*held, *freed}:
                if not self._held[digest] and not index.uses[digest]:
                    self._sizes.pop(digest, None)
                    remove_state(self.folder / "objects" / digest)

    def _size_of(self, digest: str) -> int:
        size = self._sizes.get(digest)
        if size is None:
            size = self._sizes[digest] = _size(self.folder / "objects" / digest)
        return size

    def _found(self, path: str) -> tuple[bytes | None, int | None]:
        found = self._read_file(path)
        return (None, None) if found is None else found

    # -- reading and restoring ----------------------------------------------------------
    def entries(self) -> list[Checkpoint]:
        """Every checkpoint, oldest first."""
        with self._reading() as index:
            return index.entries()

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

    def last_undoable(self) -> str | None:
        """The newest checkpoint an undo goes back to (not undone, not itself a restore)."""
        with self._reading() as index:
            for checkpoint in index.newest():
                if not checkpoint.undone and checkpoint.restores is None:
                    return checkpoint.id
        return None

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

    # -- the index ----------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self, wait: bool = True) -> Iterator[CheckpointIndex]:
        """The index, up to date, under the store's lock (shared with other processes);
        objects nothing names are swept after the index file was rewritten. With ``wait``
        False, IndexBusy when another thread or process holds the lock."""
        with contextlib.ExitStack() as stack:
            try:  # in the store's folder, made 0700 if need be
                stack.enter_context(self._root_folder.lock("index.lock", wait=wait))
            except BlockingIOError:
                raise IndexBusy(f"{self.folder / 'index.lock'} is held") from None
            index = self._index
            rewrites = index.rewrites
            try:
                index.refresh(migrate=True)
                yield index
            except BaseException:
                index.invalidate()  # the cache may be ahead of the file
                raise
            if index.rewrites != rewrites:
                self._sweep(index)

    @contextlib.contextmanager
    def _reading(self) -> Iterator[CheckpointIndex]:
        """The index for reading: under the lock when there is one (nothing is created)."""
        if not self._index.exists():  # an empty one of its own: the cache is the lock's
            yield CheckpointIndex(self.folder, self._size_of)
            return
        with self._locked() as index:
            yield index

    def _sweep(self, index: CheckpointIndex) -> None:
        """Remove the objects no entry names and no call holds (left by a crash, or by
        a call whose record failed): once per rewrite of the index, so rarely."""
        with self._held_lock:
            for name in state_names(self.folder / "objects"):
                if not index.uses[name] and not self._held[name]:
                    self._sizes.pop(name, None)
                    remove_state(self.folder / "objects" / name)


@contextlib.contextmanager
def _as_locked(index: CheckpointIndex) -> Iterator[CheckpointIndex]:
    """``index``, whose lock the caller already holds, as ``_locked`` gives it."""
    try:
        yield index
    except BaseException:
        index.invalidate()  # the cache may be ahead of the file
        raise


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
    return ", ".join(
        p if p.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in p)
        for p in paths
    )


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


def _read_up_to(fd: int, limit: int, expected: int) -> bytes:
    """At most ``limit`` bytes of the file ``fd``, to its end (``expected``: its size as
    fstat gave it; a file that grew meanwhile is read on, up to ``limit``)."""
    chunks = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, max(expected + 1, 65536)))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _size(path: Path) -> int:
    with contextlib.suppress(OSError):
        return path.lstat().st_size
    return 0
