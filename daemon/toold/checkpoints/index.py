"""The checkpoint index: ``index.jsonl``, one signed entry per line, appended and cached.

A call's checkpoint is one line appended (O_APPEND, one write). Marking an entry undone
appends its new version (the last line of an id wins; it keeps the place of the first);
dropping the oldest past the store's bound appends ``{"drop": "<id>"}``. Lines that no
longer count ("dead") are squeezed out by rewriting the file (atomically) once they
outweigh the live ones, or the file nears MAX_INDEX_BYTES: each line is rewritten a
bounded number of times, so a call costs the same after 10,000 checkpoints as after 10.

The parsed index stays in memory with the file's identity (device, inode, size, mtime in
ns). Every operation runs under the store's file lock (shared with other processes) and
first compares that identity, looked up in the store's checked folder: the file is read
again only when someone else changed it, and the file kept open for appending is used
again only while it is still the one there.
Read, the file is untrusted input (the agent or a cloned repository may have written it):
at most MAX_INDEX_BYTES, every line an entry of plain workspace paths, SHA-256 digests
and short labels without control characters (a damaged line is a CheckpointStoreError
naming the line); a last line without its newline (a crash mid-append) is left out and
squeezed out at the next write. Signatures are checked by the store, where they matter.

An ``index.json`` of an earlier toold (a JSON list, rewritten whole on every call) is
read once, validated the same way, and replaced by ``index.jsonl``: its signed entries
still verify (the signature covers the entry's fields, not the file's layout).
"""

from __future__ import annotations

import json
import os
import posixpath
import stat
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
)

from toold.errors import CheckpointStoreError, describe
from toold.sandbox.paths import refuse_link
from toold.storage import atomic_write_bytes, open_state, remove_state, write_all

INDEX = "index.jsonl"
LEGACY_INDEX = "index.json"
"""The index of toold before the append-only one: read once, then replaced."""
MAX_INDEX_BYTES = 8 * 1024 * 1024
"""A larger index is refused unread; live entries are kept below half of it, and dead
lines squeezed out before the file reaches three quarters."""
READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK
_FIX = "move it away (toold starts a new one; the checkpoints in it are lost)"


def _plain_path(path: str) -> str:
    """A workspace-relative path as toold records it: not absolute, no ``..``, normal."""
    normal = posixpath.normpath(path) if path else ""
    if not path or path != normal or normal.startswith(("/", "../")) or normal in (".", ".."):
        raise ValueError("not a plain workspace-relative path")
    if "\x00" in path:
        raise ValueError("a path holds no NUL")
    return path


Digest = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
"""An object's name: the SHA-256 of its bytes, in lowercase hex."""
RecordedPath = Annotated[str, AfterValidator(_plain_path)]
Label = Annotated[str, StringConstraints(pattern=r"^[^\x00-\x1f\x7f-\x9f]{1,200}$")]
"""An id, tool, origin or time: short, and no control character (``toold checkpoints``
prints them to a terminal, where an escape sequence would act)."""
Note = Annotated[str, StringConstraints(pattern=r"^[^\x00-\x1f\x7f-\x9f]{1,2000}$")]
"""A shell call's note of what undo did not cover: a line without control characters."""
Mode = Annotated[int, Field(ge=0, le=0o777)]
"""A file's permission bits (no set-id or sticky bit: a restore never sets those)."""


@dataclass
class FileChange:
    """One file of a checkpoint: its content hash before and after (None: no file)."""

    path: RecordedPath
    before: Digest | None
    after: Digest | None
    mode_before: Mode | None = None
    """The file's permission bits before (a shell call's; None: the object's mode)."""
    mode_after: Mode | None = None
    """Its permission bits after, compared by an undo as the content is."""


_BUILT_AT_FIRST_USE = ConfigDict(defer_build=True)
"""The validators of the index's lines are built when an index is first read, not at
import: the engine imports this module before it serves, and a new workspace has none."""


@dataclass
class Checkpoint:
    """One tool call's changes."""

    __pydantic_config__ = _BUILT_AT_FIRST_USE

    id: Label
    tool: Label
    origin: Label
    time: Label
    files: list[FileChange]
    undone: bool = False
    """Restored away by a later restore (which recorded its own checkpoint)."""
    restores: Label | None = None
    """For a restore's own checkpoint: the checkpoint it went back to before."""
    mac: Digest | None = None
    """HMAC-SHA256 of the entry under the user's key (CheckpointStore._mac): only toold
    can write one that verifies, so a restore refuses an entry written by anyone else."""
    created: list[RecordedPath] = field(default_factory=list)
    """Folders the call created (a shell call's): an undo removes them when empty."""
    removed: list[RecordedPath] = field(default_factory=list)
    """Folders the call removed (a shell call's): an undo makes them again."""
    uncovered: Note | None = None
    """What a shell call's checkpoint could not cover (too large, past the caps)."""

    def public(self) -> dict[str, Any]:
        """The wire shape (checkpoints/list)."""
        data = {
            "id": self.id,
            "tool": self.tool,
            "origin": self.origin,
            "time": self.time,
            "paths": [f.path for f in self.files],
            "undone": self.undone,
        }
        if self.restores is not None:
            data["restores"] = self.restores
        if self.uncovered is not None:
            data["uncovered"] = self.uncovered
        return data

    def fields(self) -> dict[str, Any]:
        """The entry as stored and signed: the fields added for shell calls only when set,
        so an entry written before them keeps its line and its signature."""
        # As dataclasses.asdict gives it (field order, lists copied), without its deep
        # copy of every value: the fields are strings, numbers and lists of them.
        data: dict[str, Any] = {}
        for key in _ENTRY_FIELD_NAMES:
            value = getattr(self, key)
            if key == "files":
                value = [_change_fields(change) for change in value]
            elif isinstance(value, list):
                value = list(value)
            if key not in _LATER_ENTRY_FIELDS or value:
                data[key] = value
        return data

    def digests(self) -> list[str]:
        """The objects this entry names (a digest once per mention)."""
        return [d for f in self.files for d in (f.before, f.after) if d]


_LATER_ENTRY_FIELDS = ("created", "removed", "uncovered")
_LATER_FILE_FIELDS = ("mode_before", "mode_after")
_ENTRY_FIELD_NAMES = tuple(f.name for f in dataclass_fields(Checkpoint))
_FILE_FIELD_NAMES = tuple(f.name for f in dataclass_fields(FileChange))


def _change_fields(change: FileChange) -> dict[str, Any]:
    """A file's change as stored: the modes only when set (see Checkpoint.fields)."""
    return {
        key: value
        for key in _FILE_FIELD_NAMES
        if (value := getattr(change, key)) is not None or key not in _LATER_FILE_FIELDS
    }


@dataclass
class _Drop:
    __pydantic_config__ = _BUILT_AT_FIRST_USE

    drop: Label


_ENTRY: TypeAdapter[Checkpoint] = TypeAdapter(Checkpoint)
_DROP: TypeAdapter[_Drop] = TypeAdapter(_Drop)
LEGACY: TypeAdapter[list[Checkpoint]] = TypeAdapter(list[Checkpoint], config=_BUILT_AT_FIRST_USE)


def encode(entry: Checkpoint | _Drop) -> bytes:
    """One line of the index."""
    data = entry.fields() if isinstance(entry, Checkpoint) else asdict(entry)
    return (json.dumps(data, separators=(",", ":")) + "\n").encode("ascii")


Identity = tuple[int, int, int, int]


class CheckpointIndex:
    """The entries of one store, oldest first, as ``index.jsonl`` in ``folder`` holds them.

    Use it under the store's file lock only. ``uses`` counts the live entries naming each
    object and ``listed`` the bytes of their lines; ``objects`` is the size of the objects
    named (``size_of`` measures one), so the store's bound is kept without a scan.
    """

    def __init__(self, folder: Path, size_of: Callable[[str], int]) -> None:
        self.folder = folder
        self.path = folder / INDEX
        self._size_of = size_of
        self.folder_fd: int | None = None
        """A descriptor of ``folder`` (the store's, held open and checked) while the store
        holds the lock (ObjectStore._locked): the file is looked at and opened in it
        instead of by walking its path; None: walk it."""
        self._appending: int | None = None
        """The file, open for appending since an append, used again while it is the file
        in ``folder`` as ``refresh`` last saw it (same identity)."""
        self._appending_lock = threading.Lock()
        self._entries: OrderedDict[str, Checkpoint] = OrderedDict()
        self._lines: dict[str, int] = {}
        self._identity: Identity | None = None
        self._dead = 0
        self._torn = False
        self.uses: Counter[str] = Counter()
        self.listed = 0
        self.objects = 0
        self.rewrites = 0
        """How many times this object rewrote the file (the store sweeps objects then)."""

    # -- reading ------------------------------------------------------------------------
    def exists(self) -> bool:
        """Whether there is an index at all (this one or an earlier toold's)."""
        return any(os.path.lexists(self.folder / name) for name in (INDEX, LEGACY_INDEX))

    def entries(self) -> list[Checkpoint]:
        """Every entry, oldest first."""
        return list(self._entries.values())

    def since(self, checkpoint_id: str) -> list[Checkpoint] | None:
        """The entry ``checkpoint_id`` and every later one; None when there is no such id."""
        if checkpoint_id not in self._entries:
            return None
        tail: list[Checkpoint] = []
        for entry in reversed(self._entries.values()):
            tail.append(entry)
            if entry.id == checkpoint_id:
                break
        return tail[::-1]

    def newest(self) -> Iterator[Checkpoint]:
        """The entries, newest first."""
        return reversed(self._entries.values())

    def refresh(self, *, migrate: bool) -> None:
        """Read the file again if anyone but this object changed it since; ``migrate``
        replaces an earlier toold's ``index.json`` by ``index.jsonl`` (a write)."""
        try:
            if self.folder_fd is None:
                info = os.lstat(self.path)
            else:
                info = os.stat(INDEX, dir_fd=self.folder_fd, follow_symlinks=False)
        except FileNotFoundError:
            info = None
        if info is not None and self._identity == _identity(info):
            return
        self._forget()
        if info is not None:
            self._load()
        elif os.path.lexists(self.folder / LEGACY_INDEX):
            self._load_legacy(migrate)

    def invalidate(self) -> None:
        """Forget what is cached: the next refresh reads the file (after a failed change)."""
        self._identity = None

    def _forget(self) -> None:
        self._entries.clear()
        self._lines.clear()
        self.uses.clear()
        self._identity = None
        self._dead = self.listed = self.objects = 0
        self._torn = False

    def _read(self, path: Path) -> tuple[bytes, Identity]:
        try:
            fd = open_state(path, READ_FLAGS)
        except OSError as exc:
            raise CheckpointStoreError(f"cannot read {path}: {exc}; {_FIX}") from None
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_INDEX_BYTES:
                raise CheckpointStoreError(
                    f"{path} is not a regular file or is larger than {MAX_INDEX_BYTES} "
                    f"bytes; {_FIX}"
                )
            return fh.read(MAX_INDEX_BYTES + 1), _identity(info)

    def _load(self) -> None:
        data, identity = self._read(self.path)
        lines = data.split(b"\n")
        self._torn = bool(lines[-1])  # the last line never got its newline: a crash
        for number, line in enumerate(lines[:-1], 1):
            if not line.strip():
                self._dead += len(line) + 1
                continue
            try:
                if line.startswith(b'{"drop"'):
                    self._drop(_DROP.validate_json(line).drop, len(line) + 1)
                else:
                    self._put(_ENTRY.validate_json(line), len(line) + 1)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(part) for part in first["loc"]) or "the line"
                raise CheckpointStoreError(
                    f"{self.path} is damaged (line {number}, {where}: {describe(first)}); {_FIX}"
                ) from None
        self._dead += len(lines[-1])
        self._identity = identity

    def _load_legacy(self, migrate: bool) -> None:
        legacy = self.folder / LEGACY_INDEX
        data, _ = self._read(legacy)
        try:
            entries = LEGACY.validate_json(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "the top level"
            raise CheckpointStoreError(
                f"{legacy} is damaged ({where}: {describe(first)}); {_FIX}"
            ) from None
        for entry in entries:
            self._put(entry, len(encode(entry)))
        if migrate:
            self.compact()
            remove_state(legacy)

    # -- changing -----------------------------------------------------------------------
    def change(self, entries: list[Checkpoint], max_bytes: int) -> list[str]:
        """Add each entry (or replace its id's, in its place), then drop the oldest while
        the store passes ``max_bytes``, in one write; the objects no entry names any more
        are returned (the store removes them)."""
        if self._torn:  # squeezed out first: appended to, the torn line would join ours
            self.compact()
        lines = [encode(entry) for entry in entries]
        freed: list[str] = []
        try:
            for line, entry in zip(lines, entries, strict=True):
                self._put(entry, len(line))
            while len(self._entries) > 1 and (
                self.listed + self.objects > max_bytes or self.listed > MAX_INDEX_BYTES // 2
            ):
                line = encode(_Drop(next(iter(self._entries))))
                lines.append(line)
                freed += self._drop(json.loads(line)["drop"], len(line))
            self._append(b"".join(lines))
        except BaseException:
            self.invalidate()  # memory is ahead of the file: read it again next time
            raise
        if self._dead > self.listed or self._identity_size() > MAX_INDEX_BYTES * 3 // 4:
            self.compact()
        return freed

    def _append(self, data: bytes) -> None:
        with self._appending_lock:
            fd = self._appending
            self._appending = None
            if fd is not None:
                info = os.fstat(fd)
                if self.folder_fd is None or _identity(info) != self._identity:
                    os.close(fd)  # not the file refresh saw in the folder: open it again
                    fd = None
            if fd is None:
                fd = self._open_appending()
                info = os.fstat(fd)
            try:
                if not stat.S_ISREG(info.st_mode):
                    raise CheckpointStoreError(f"{self.path} is not a regular file; {_FIX}")
                if info.st_nlink > 1:  # as open_state's single_link: another name may lie anywhere
                    raise PermissionError(
                        f"Refusing toold state file {self.path}: it has {info.st_nlink} hard "
                        "links (another name of it may lie outside the workspace)"
                    )
                if self._identity is not None and _identity(info) != self._identity:
                    raise CheckpointStoreError(
                        f"{self.path} was changed by another program while toold held its "
                        "lock; nothing was recorded"
                    )
                write_all(fd, data)
                self._identity = _identity(os.fstat(fd))
            except BaseException:
                os.close(fd)
                raise
            self._appending = fd  # kept for the next append (an open and a close less)

    def close(self) -> None:
        """Let go of the file held open for appending."""
        with self._appending_lock:
            if self._appending is not None:
                fd, self._appending = self._appending, None
                os.close(fd)

    def __del__(self) -> None:
        if getattr(self, "_appending", None) is not None:
            os.close(self._appending)  # type: ignore[arg-type]

    def _open_appending(self) -> int:
        """The index opened for appending, never through a symlink."""
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        if self.folder_fd is not None:
            try:
                return refuse_link(self.folder_fd, INDEX, str(self.path), flags, 0o600)
            except PermissionError:
                pass  # a link: open_state refuses it in its own words
        return open_state(self.path, flags, 0o600, create_dirs=True, single_link=True)

    def _identity_size(self) -> int:
        return 0 if self._identity is None else self._identity[2]

    def compact(self) -> None:
        """Rewrite the file with the live entries only (atomically)."""
        data = b"".join(encode(entry) for entry in self._entries.values())
        self.close()  # the file held open is replaced
        atomic_write_bytes(self.path, data, create_dirs=True)
        fd = open_state(self.path, READ_FLAGS)
        try:
            self._identity = _identity(os.fstat(fd))
        finally:
            os.close(fd)
        self._lines = {key: len(encode(entry)) for key, entry in self._entries.items()}
        self.listed = sum(self._lines.values())
        self._dead = 0
        self._torn = False
        self.rewrites += 1

    def _put(self, entry: Checkpoint, size: int) -> None:
        """Account for ``entry`` (a line of ``size`` bytes), new or replacing its id's."""
        for digest in entry.digests():
            if not self.uses[digest]:
                self.objects += self._size_of(digest)
            self.uses[digest] += 1
        old = self._entries.get(entry.id)
        if old is not None:  # an entry undone: its new version keeps its place
            self._dead += self._lines[entry.id]
            self.listed -= self._lines[entry.id]
            self._release(old)
        self._entries[entry.id] = entry
        self._lines[entry.id] = size
        self.listed += size

    def _drop(self, checkpoint_id: str, size: int) -> list[str]:
        self._dead += size
        entry = self._entries.pop(checkpoint_id, None)
        if entry is None:
            return []
        line = self._lines.pop(checkpoint_id)
        self._dead += line
        self.listed -= line
        return self._release(entry)

    def _release(self, entry: Checkpoint) -> list[str]:
        """Count ``entry``'s objects off; those no entry names any more are returned."""
        freed = []
        for digest in entry.digests():
            self.uses[digest] -= 1
            if not self.uses[digest]:
                del self.uses[digest]
                self.objects -= self._size_of(digest)
                freed.append(digest)
        return freed

    def __len__(self) -> int:
        return len(self._entries)


def _identity(info: os.stat_result) -> Identity:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
