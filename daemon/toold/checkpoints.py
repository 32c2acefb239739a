"""Checkpoints: what each file-changing tool call replaced, so an edit can be undone.

Before a call that writes files (write_file, edit_file, str_replace, ...), the gateway
snapshots those files; after it, the store records one checkpoint — the tool, origin,
time and, per file, the content before and after — if anything changed. Contents live
content-addressed in ``.toold/checkpoints/objects/<sha256>``; ``index.json`` lists the
checkpoints, oldest first. The store is bounded by ``checkpoints.max_bytes``: the oldest
checkpoints go first. It works without git. bash's effects are not recorded.

Restoring checkpoint N puts every file touched by N and the (not undone) checkpoints
after it back as it was before N. It refuses, naming the files, when one changed since
toold last wrote it (outside toold), unless forced. A restore is itself a checkpoint, so
it can be restored in turn (redo).

The store is a workspace folder, so the agent or a cloned repository may have written it:
the index is parsed (every path a plain workspace path, every digest a SHA-256, at most
MAX_INDEX_BYTES), each object is checked against its digest, and every object a restore
needs is read before any file is written. Each index entry carries an HMAC-SHA256 under a
key kept outside the workspace (the user's: toold.user_state), bound to the workspace's
path; a restore or diff refuses an entry that does not verify, even forced, and objects
are authenticated by the signed digests naming them. An entry is signed once when
recorded and again when undone, so signing costs nothing per checkpoint kept. A restore
never writes into ``.git/`` or ``.toold/`` (any case, trailing dots or blanks, any depth)
nor through a symlink; toold.toml only when forced (the file watcher's reload then holds
any loosening in it and asks). Objects keep their file's mode, never wider (0600 when
unknown), in 0700 folders. A damaged store is a CheckpointStoreError naming the fix; it
is never overwritten, and the file tools go on without recording.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import hmac
import json
import logging
import os
import posixpath
import secrets
import stat
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, StringConstraints, TypeAdapter, ValidationError

from toold.config import CheckpointsConfig
from toold.errors import CheckpointConflict, CheckpointStoreError, UnknownCheckpoint, describe
from toold.sandbox.paths import DIR_FLAGS, open_in_workspace, refuse_link, workspace_relative
from toold.storage import (
    atomic_write_at,
    atomic_write_bytes,
    file_lock,
    now,
    open_state,
    remove_state,
    state_names,
)

log = logging.getLogger(__name__)

INDEX = "index.json"
MAX_INDEX_BYTES = 8 * 1024 * 1024
"""A larger index is refused unread; the bound keeps toold's own below it."""
_READ = os.O_RDONLY | os.O_NONBLOCK
KEY_NAME = "checkpoints.key"
"""The user's key signing index entries, in the user's state folder (toold.user_state)."""
NEVER_RESTORED = frozenset({".git", ".toold"})
"""Folders a restore never writes into, at any depth: git runs code configured in
``.git/`` (core.fsmonitor, hooks), and ``.toold/`` is toold's own state."""
UNKNOWN_MODE = 0o600
"""An object's mode when its file's mode is not known."""


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


@dataclass
class FileChange:
    """One file of a checkpoint: its content hash before and after (None: no file)."""

    path: RecordedPath
    before: Digest | None
    after: Digest | None


@dataclass
class Checkpoint:
    """One tool call's changes."""

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
        return data


_INDEX: TypeAdapter[list[Checkpoint]] = TypeAdapter(list[Checkpoint])


@dataclass
class Pending:
    """Files snapshotted before a call; ``record`` compares them with what follows."""

    before: dict[str, str | None] = field(default_factory=dict)


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
        """Bytes of each stored object and of each checkpoint's index entry, by digest or
        id, as ``_bound`` last measured them (both are written once and never change, but
        for an entry's ``undone`` flag): measuring all of them again on every call made
        each write cost time in proportion to the checkpoints kept."""

    def configure(self, settings: CheckpointsConfig, max_file_size: int) -> None:
        """Apply ``[checkpoints]`` and ``limits.max_file_size`` (at start and on reload)."""
        self.enabled = settings.enabled
        self.max_bytes = settings.max_bytes
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
        fields = {k: v for k, v in asdict(checkpoint).items() if k != "mac"}
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
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise OSError(f"{path} is not a regular file")
            if info.st_size > self.max_file_size:
                raise OSError(f"{path} is larger than limits.max_file_size")
            return fh.read(self.max_file_size + 1), stat.S_IMODE(info.st_mode)

    def _dir(self, sub: str | None = None) -> int:
        """A descriptor of the store's folder (or its ``sub`` folder), made and kept 0700:
        objects hold copies of files that may be private (``.env``)."""
        path = self.folder if sub is None else self.folder / sub
        fd = open_state(path, DIR_FLAGS, create_dirs=True)
        try:
            if stat.S_IMODE(os.fstat(fd).st_mode) != 0o700:
                os.fchmod(fd, 0o700)
            if sub is not None:
                os.close(self._dir())
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _put(self, data: bytes | None, mode: int | None = None) -> str | None:
        """Store ``data`` as an object no wider than ``mode`` (the file's; 0600 if unknown)."""
        if data is None:
            return None
        digest = hashlib.sha256(data).hexdigest()
        wanted = UNKNOWN_MODE if mode is None else mode & 0o777
        objects = self._dir("objects")
        try:
            try:
                fd = refuse_link(objects, digest, str(self.folder / "objects" / digest), _READ)
            except FileNotFoundError:
                fd = None
            if fd is not None:
                with os.fdopen(fd, "rb") as fh:
                    info = os.fstat(fh.fileno())
                    same = stat.S_ISREG(info.st_mode) and fh.read(len(data) + 1) == data
                    narrowest = stat.S_IMODE(info.st_mode) & wanted
                    if same and narrowest != stat.S_IMODE(info.st_mode):
                        os.fchmod(fh.fileno(), narrowest)
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

    def _write(self, path: str, data: bytes | None, mode: int = UNKNOWN_MODE) -> None:
        """Put ``path`` back: its bytes, or no file; never through a symlink. A file there
        keeps its mode; a new one gets ``mode`` (its object's)."""
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
            if there is not None and stat.S_ISREG(there.st_mode):
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
                pending.before[rel] = self._put(*self._found(rel))
            except (OSError, ValueError, CheckpointStoreError):
                continue  # not recorded: the call itself reports what is wrong
        return pending

    def record(self, pending: Pending, tool: str, origin: str) -> Checkpoint | None:
        """One checkpoint for the files that changed since ``snapshot``; None if none did."""
        changes: list[FileChange] = []
        for path, before in pending.before.items():
            try:
                after = self._put(*self._found(path))
            except (OSError, CheckpointStoreError):
                continue
            if after != before:
                changes.append(FileChange(path, before, after))
        if not changes:
            return None
        checkpoint = Checkpoint(secrets.token_hex(4), tool, origin, now(), changes)
        try:
            with self._locked() as index:
                index.append(self._sign(checkpoint))
                self._bound(index)
        except CheckpointStoreError as exc:  # the call's own result stands
            log.warning("%s changed by %s, no checkpoint recorded: %s", tool, origin, exc)
            return None
        return checkpoint

    def _found(self, path: str) -> tuple[bytes | None, int | None]:
        found = self._read_file(path)
        return (None, None) if found is None else found

    # -- reading and restoring ----------------------------------------------------------
    def entries(self) -> list[Checkpoint]:
        """Every checkpoint, oldest first."""
        return self._load()

    def diff(self, checkpoint_id: str) -> str:
        """Unified diff from before ``checkpoint_id`` (and every later call) to now; an
        entry toold did not sign is refused, as by ``restore`` (its diff would pass for
        what an undo would do)."""
        index = self._load()
        start = self._position(index, checkpoint_id)
        for checkpoint in index[start:]:
            if not checkpoint.undone:
                self._require_signed(checkpoint)
        targets = self._targets(index, start)
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
        with self._locked() as index:
            start = self._position(index, checkpoint_id)
            for checkpoint in index[start:]:
                if not checkpoint.undone:  # what the restore reads and marks undone
                    self._require_signed(checkpoint)
            targets = self._targets(index, start)
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
            files = [
                FileChange(p, self._put(*(current[p] or (None, None))), before)
                for p, (before, _) in targets.items()
            ]
            self._write_all(targets, wanted, current)
            for checkpoint in index[start:]:
                if not checkpoint.undone:
                    checkpoint.undone = True
                    self._sign(checkpoint)
            done = Checkpoint(
                secrets.token_hex(4), "restore", origin, now(), files, restores=checkpoint_id
            )
            index.append(self._sign(done))
            self._bound(index)
        return done

    def _write_all(
        self,
        targets: dict[str, Any],
        wanted: dict[str, tuple[bytes, int] | None],
        current: dict[str, tuple[bytes, int] | None],
    ) -> None:
        """Write every target, or (a write failed) put back those already written."""
        written: list[str] = []
        try:
            for path in targets:
                self._write(path, *_content(wanted[path]))
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
        for checkpoint in reversed(self._load()):
            if not checkpoint.undone and checkpoint.restores is None:
                return checkpoint.id
        return None

    @staticmethod
    def _digest(data: bytes | None) -> str | None:
        return None if data is None else hashlib.sha256(data).hexdigest()

    @staticmethod
    def _position(index: list[Checkpoint], checkpoint_id: str) -> int:
        for i, checkpoint in enumerate(index):
            if checkpoint.id == checkpoint_id:
                if checkpoint.undone:
                    raise UnknownCheckpoint(
                        f"checkpoint {checkpoint_id} was already undone; restore the restore's "
                        "own checkpoint to redo it"
                    )
                return i
        raise UnknownCheckpoint(f"no checkpoint {checkpoint_id}: see checkpoints/list")

    @staticmethod
    def _targets(index: list[Checkpoint], start: int) -> dict[str, tuple[str | None, str | None]]:
        """path → (content before the first live call from ``start``, after the last)."""
        targets: dict[str, tuple[str | None, str | None]] = {}
        for checkpoint in index[start:]:
            if checkpoint.undone:
                continue
            for change in checkpoint.files:
                first = targets.get(change.path, (change.before, None))[0]
                targets[change.path] = (first, change.after)
        return targets

    # -- the index ----------------------------------------------------------------------
    def _load(self) -> list[Checkpoint]:
        """The index, parsed; CheckpointStoreError when it is too large or not toold's."""
        path = self.folder / INDEX
        fix = "move it away (toold starts a new one; the checkpoints in it are lost)"
        try:
            fd = open_state(path, _READ)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise CheckpointStoreError(f"cannot read {path}: {exc}; {fix}") from None
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_INDEX_BYTES:
                raise CheckpointStoreError(
                    f"{path} is not a regular file or is larger than {MAX_INDEX_BYTES} bytes; {fix}"
                )
            data = fh.read(MAX_INDEX_BYTES + 1)
        try:
            return _INDEX.validate_json(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "the top level"
            raise CheckpointStoreError(
                f"{path} is damaged ({where}: {describe(first)}); {fix}"
            ) from None

    @contextlib.contextmanager
    def _locked(self) -> Any:
        """The index, read under the store's lock and written back atomically."""
        os.close(self._dir())
        with file_lock(self.folder / "index.lock"):
            index = self._load()
            yield index
            data = json.dumps([asdict(c) for c in index], indent=1).encode("utf-8")
            atomic_write_bytes(self.folder / INDEX, data)

    def _bound(self, index: list[Checkpoint]) -> None:
        """Drop the oldest checkpoints past ``max_bytes`` (their index entries count too, so
        changes of empty files do not grow it without end), then contents nothing names."""
        objects = self.folder / "objects"
        known = self._sizes
        sizes = {name: known.get(name) or _size(objects / name) for name in state_names(objects)}
        entries = [known.get(c.id) or len(json.dumps(asdict(c), indent=1)) + 2 for c in index]
        self._sizes = {**sizes, **{c.id: size for c, size in zip(index, entries, strict=True)}}
        names = [[d for f in c.files for d in (f.before, f.after) if d] for c in index]
        uses = Counter(d for found in names for d in found)
        listed = sum(entries)
        used = listed + sum(sizes.get(d, 0) for d in uses)
        dropped = 0
        while len(index) - dropped > 1 and (used > self.max_bytes or listed > MAX_INDEX_BYTES):
            listed -= entries[dropped]
            used -= entries[dropped]
            for digest in names[dropped]:
                uses[digest] -= 1
                if not uses[digest]:
                    del uses[digest]
                    used -= sizes.get(digest, 0)
            dropped += 1
        del index[:dropped]
        for name in sizes:
            if name not in uses:
                remove_state(objects / name)


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


def _data(found: tuple[bytes, int] | None) -> bytes | None:
    return None if found is None else found[0]


def _content(found: tuple[bytes, int] | None) -> tuple[bytes | None, int]:
    return (None, UNKNOWN_MODE) if found is None else found


def _size(path: Path) -> int:
    with contextlib.suppress(OSError):
        return path.lstat().st_size
    return 0


DIFF_MAX_LINES = 2_000
"""Past this many differing lines on a side, a diff replaces the differing middle whole:
difflib's matching grows about cubically, and a crafted file of 10,000 lines took it
minutes (a permission prompt waits on it)."""


def unified_diff(path: str, before: bytes | None, after: bytes | None) -> str:
    """A git-style unified diff of one file (``/dev/null`` for a side with no file);
    only ``\\n`` ends a line, as in git (a lone ``\\r`` stays in its line)."""
    if before == after:
        return ""
    try:
        old = _lines(before.decode("utf-8") if before is not None else "")
        new = _lines(after.decode("utf-8") if after is not None else "")
    except UnicodeDecodeError:
        return f"Binary file {path} differs\n"
    out = [
        f"--- {f'a/{path}' if before is not None else '/dev/null'}\n",
        f"+++ {f'b/{path}' if after is not None else '/dev/null'}\n",
    ]
    for group in _Matcher(old, new).get_grouped_opcodes(3):
        first, last = group[0], group[-1]
        old_range = _range(first[1], last[2])
        out.append(f"@@ -{old_range} +{_range(first[3], last[4])} @@\n")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [" " + line for line in old[i1:i2]]
                continue
            out += ["-" + line for line in old[i1:i2]]
            out += ["+" + line for line in new[j1:j2]]
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in out
    )


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _range(start: int, stop: int) -> str:
    """A hunk header's ``start,length`` (1-based; one line: no length; none: the line before)."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start if not length else start + 1},{length}"


Opcode = tuple[Literal["replace", "delete", "insert", "equal"], int, int, int, int]


class _Matcher(difflib.SequenceMatcher[str]):
    """difflib's matching on the lines between the common head and tail, or, when that
    middle is longer than DIFF_MAX_LINES, the middle replaced whole."""

    def __init__(self, old: list[str], new: list[str]) -> None:
        super().__init__(None, old, new)
        head = 0
        while head < min(len(old), len(new)) and old[head] == new[head]:
            head += 1
        tail = 0
        while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
            tail += 1
        a, b = old[head : len(old) - tail], new[head : len(new) - tail]
        middle: list[Opcode]
        if max(len(a), len(b)) <= DIFF_MAX_LINES:
            middle = [
                (tag, i1 + head, i2 + head, j1 + head, j2 + head)
                for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b).get_opcodes()
            ]
        else:
            middle = [("replace", head, head + len(a), head, head + len(b))]
        ends: list[Opcode] = [("equal", 0, head, 0, head)] if head else []
        if tail:
            middle.append(("equal", len(old) - tail, len(old), len(new) - tail, len(new)))
        self._codes = ends + middle

    def get_opcodes(self) -> list[Opcode]:
        """The opcodes worked out above (a copy: grouping edits the first and last)."""
        return list(self._codes)
