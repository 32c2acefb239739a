"""The whole output of a call whose result was cut: ``.toold/outputs/<id>.txt``.

A bash result keeps the head and tail of long output (``limits.bash_output_chars``); the
middle is what an agent most often needs next. An http_request result keeps the first
``http.max_response_length`` characters of the body; the file has the whole body. Output
is held in memory up to the cap, then written to a file as it arrives (a command's stdout
and stderr in the order they came), so memory stays bounded however long it talks. The
file is kept only when the result was cut; each file stops at ``MAX_SPILL_BYTES``, and
only the newest ``limits.max_finished_jobs`` files are kept (the job retention). Written
like every state file: never through a symlink, 0600, with secrets redacted a line at a
time as it is written (toold.permissions.redaction.StreamRedactor); the call's result
itself is not redacted.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from pathlib import Path

from toold.permissions.redaction import StreamRedactor
from toold.storage import open_state, remove_state, state_names, write_all

log = logging.getLogger(__name__)

OUTPUTS = Path(".toold") / "outputs"
MAX_SPILL_BYTES = 16 * 1024 * 1024
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC


class Spill:
    """Collects one call's output; ``finish`` says where the whole of it is, if cut."""

    def __init__(self, workspace: Path, limit: int, keep: int) -> None:
        self.rel = OUTPUTS / f"{secrets.token_hex(6)}.txt"
        self._path = workspace / self.rel
        self._limit = limit
        self._keep = keep
        self._held: list[str] = []
        self._held_chars = 0
        self._fd: int | None = None
        self._written = 0
        self._broken = False
        self._redactor = StreamRedactor()
        self.total = 0
        """Characters seen (all of them, also past the file's bound)."""

    def write(self, text: str) -> None:
        """Take one chunk of output (never raises: a spill that fails is dropped)."""
        self.total += len(text)
        if self._broken or self.full:
            return
        if self._fd is None:
            self._held.append(text)
            self._held_chars += len(text)
            if self._held_chars <= self._limit:
                return
            text, self._held = "".join(self._held), []
            try:
                self._fd = open_state(self._path, _FLAGS, 0o600, create_dirs=True)
            except OSError as exc:
                self._fail(exc)
                return
        self._store(self._redactor.feed(text))

    def _store(self, text: str) -> None:
        if self._fd is None or not text:
            return
        data = text.encode("utf-8", errors="replace")[: MAX_SPILL_BYTES - self._written]
        try:
            write_all(self._fd, data)
        except OSError as exc:
            self._fail(exc)
            return
        self._written += len(data)

    @property
    def full(self) -> bool:
        """Whether the file reached its bound (what comes next is only counted)."""
        return self._written >= MAX_SPILL_BYTES

    def finish(self) -> str | None:
        """Close; the file's workspace-relative path when the output passed the cap."""
        if self._fd is not None:
            self._store(self._redactor.flush())
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._broken or self._written == 0:
            return None
        self._prune()
        return self.rel.as_posix()

    def note(self) -> str:
        """The line a cut result ends with: where the whole output is and how to page it."""
        cut = " (its first 16 MiB)" if self.full else ""
        return (
            f"[Output cut: all {self.total} characters{cut} are in {self.rel.as_posix()}; "
            "page through it with read_file (offset, limit)]"
        )

    def _fail(self, exc: OSError) -> None:
        log.warning("output of a call not kept in %s: %s", self.rel, exc)
        self._broken = True
        self._held = []
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        with contextlib.suppress(OSError):
            remove_state(self._path)

    def _prune(self) -> None:
        """Keep the newest ``keep`` spill files."""
        folder = self._path.parent
        names = [n for n in state_names(folder) if n.endswith(".txt")]
        if len(names) <= self._keep:
            return

        def age(name: str) -> float:
            try:
                return (folder / name).lstat().st_mtime
            except OSError:
                return 0.0

        for name in sorted(names, key=age)[: len(names) - self._keep]:
            if name != self._path.name:
                with contextlib.suppress(OSError):
                    remove_state(folder / name)
