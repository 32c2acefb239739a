"""ObjectStore: the store's folder, its content-addressed objects and the signed index.

Objects are the contents of workspace files, ``objects/<sha256>``, held from removal while
a call that stored them is not recorded; the index (toold.checkpoints.index) names them,
each entry signed. The design and its guarantees are in the package's docstring
(toold.checkpoints); restore.py and store.py build on this.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import stat
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from toold.checkpoints.folders import HeldFolder
from toold.checkpoints.index import INDEX, READ_FLAGS, Checkpoint, CheckpointIndex
from toold.errors import CheckpointStoreError
from toold.sandbox.paths import open_in_workspace, refuse_link
from toold.storage import atomic_write_at, open_state, remove_state, state_names, write_all

_READ = READ_FLAGS
KEY_NAME = "checkpoints.key"
"""The user's key signing index entries, in the user's state folder (toold.user_state)."""
UNKNOWN_MODE = 0o600
"""An object's mode when its file's mode is not known."""
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL

ObjectIdentity = tuple[int, int, int, int, int]
"""An object file as fstat saw it: device, inode, size, mtime and ctime (ns). Any write
to it, a chmod or another file put in its place changes one of them (ctime cannot be
set back), so an object seen so again still holds what was checked."""


class IndexBusy(Exception):
    """The index's lock is held by another thread or process (``record(wait=False)``)."""


class ObjectStore:
    """The objects and the signed index of one workspace's store, under ``folder``."""

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
        self._key = key
        """The key signing index entries, or where to get it when first needed (the
        user's, kept outside the workspace: toold.user_state); None: a key of this
        store's own, so only this object restores what it recorded."""
        self._sizes: dict[str, int] = {}
        """Bytes of each object by digest, as stored or first measured (objects never
        change): the bound is kept as the index changes, never by measuring them all."""
        self._checked: dict[str, ObjectIdentity] = {}
        """Objects this process wrote or read back whole, by digest, as fstat saw them
        then: one seen the same way again is not read again (``_store``)."""
        self._root_folder = HeldFolder(folder)
        self._subfolders = {"objects": HeldFolder(folder / "objects")}
        """Made here, not on first use: calls on threads would race to make them."""
        self._objects_path = str(folder / "objects")
        self._index = CheckpointIndex(folder, self._size_of)
        self._held: Counter[str] = Counter()
        """Objects stored for calls not recorded yet: never removed under them."""
        self._held_lock = threading.Lock()
        self._parent_private = False

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
        return hmac.digest(key, message, "sha256").hex()  # hmac.new's, in one call

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

    @contextlib.contextmanager
    def _storing(self) -> Iterator[Callable[[list[str], bytes | None, int | None], str | None]]:
        """``_put`` for the objects of one snapshot or record: the objects folder opened
        and checked (toold.checkpoints.folders) once, at the first object, not per object."""
        opened: list[int] = []

        def put(held: list[str], data: bytes | None, mode: int | None) -> str | None:
            if data is not None and not opened:
                opened.append(self._dir("objects"))
            return self._put(held, data, mode, opened[0] if opened else None)

        try:
            yield put
        finally:
            for fd in opened:
                os.close(fd)

    def _put(
        self,
        held: list[str],
        data: bytes | None,
        mode: int | None = None,
        objects: int | None = None,
    ) -> str | None:
        """Store ``data`` as an object no wider than ``mode`` (the file's; 0600 if unknown),
        held from removal (its digest added to ``held``) until ``_release``; ``objects``:
        the objects folder when the caller opened it (``_storing``)."""
        if data is None:
            return None
        digest = hashlib.sha256(data).hexdigest()
        with self._held_lock:
            self._held[digest] += 1
        held.append(digest)
        self._sizes[digest] = len(data)
        wanted = UNKNOWN_MODE if mode is None else mode & 0o777
        if objects is not None:
            self._store(objects, digest, data, wanted)
            return digest
        folder = self._dir("objects")
        try:
            self._store(folder, digest, data, wanted)
        finally:
            os.close(folder)
        return digest

    def _store(self, objects: int, digest: str, data: bytes, wanted: int) -> None:
        """Make ``objects/<digest>`` hold ``data``, of mode ``wanted`` at the widest.

        A new object is created under its own name (O_EXCL, no temp file and rename): no
        index entry names it until this returns, and a torn one (a crash mid-write) is
        found by the next store of that content, which reads an existing object back and
        replaces it unless it holds ``data`` (as it replaces one planted there), and by a
        restore, which checks every object against its digest. An object this process
        wrote or read back is not read again while fstat sees it unchanged.
        """
        where = f"{self._objects_path}/{digest}"
        if self._still_checked(objects, digest, wanted):
            return
        try:
            fd = refuse_link(objects, digest, where, _CREATE, wanted)
        except FileExistsError:  # stored before, planted or being written: read back
            fd = refuse_link(objects, digest, where, _READ)
            try:
                info = os.fstat(fd)
                size = len(data) + 1
                same = stat.S_ISREG(info.st_mode) and _read_up_to(fd, size, size) == data
                narrowest = stat.S_IMODE(info.st_mode) & wanted
                if same and narrowest != stat.S_IMODE(info.st_mode):
                    os.fchmod(fd, narrowest)
                    info = os.fstat(fd)
                if same:
                    self._checked[digest] = _object_identity(info)
                    return
            finally:
                os.close(fd)
            atomic_write_at(objects, digest, data, durable=False, mode=wanted)  # replaced
            return  # not remembered: what is there now was not read back
        try:
            write_all(fd, data)
            info = os.fstat(fd)
            if stat.S_IMODE(info.st_mode) != wanted:  # narrowed by the umask: as the file's
                os.fchmod(fd, wanted)
                info = os.fstat(fd)
            self._checked[digest] = _object_identity(info)
        finally:
            os.close(fd)

    def _still_checked(self, objects: int, digest: str, wanted: int) -> bool:
        """Whether ``digest`` is an object this process wrote or read back, unchanged
        since (one stat), and no wider than ``wanted``."""
        checked = self._checked.get(digest)
        if checked is None:
            return False
        try:
            info = os.stat(digest, dir_fd=objects, follow_symlinks=False)
        except FileNotFoundError:
            return False
        mode = stat.S_IMODE(info.st_mode)
        return _object_identity(info) == checked and mode & wanted == mode

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
                    self._forget_object(digest)

    def _size_of(self, digest: str) -> int:
        size = self._sizes.get(digest)
        if size is None:
            size = self._sizes[digest] = _size(self.folder / "objects" / digest)
        return size

    def _found(self, path: str) -> tuple[bytes | None, int | None]:
        found = self._read_file(path)
        return (None, None) if found is None else found

    # -- the index ----------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self, wait: bool = True) -> Iterator[CheckpointIndex]:
        """The index, up to date, under the store's lock (shared with other processes);
        objects nothing names are swept after the index file was rewritten. With ``wait``
        False, IndexBusy when another thread or process holds the lock."""
        folder = self._root_folder.open()  # checked once for the lock and the index
        with contextlib.ExitStack() as stack:
            stack.callback(os.close, folder)
            try:  # in the store's folder, made 0700 if need be
                stack.enter_context(self._root_folder.lock("index.lock", wait=wait, folder=folder))
            except BlockingIOError:
                raise IndexBusy(f"{self.folder / 'index.lock'} is held") from None
            index = self._index
            rewrites = index.rewrites
            index.folder_fd = folder
            try:
                index.refresh(migrate=True)
                yield index
            except BaseException:
                index.invalidate()  # the cache may be ahead of the file
                raise
            finally:
                index.folder_fd = None
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
                    self._forget_object(name)

    def _forget_object(self, digest: str) -> None:
        """Remove the object ``digest`` and what this process knew of it."""
        self._sizes.pop(digest, None)
        self._checked.pop(digest, None)
        remove_state(self.folder / "objects" / digest)


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


def _object_identity(info: os.stat_result) -> ObjectIdentity:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _size(path: Path) -> int:
    with contextlib.suppress(OSError):
        return path.lstat().st_size
    return 0
