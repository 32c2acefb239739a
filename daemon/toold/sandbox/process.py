"""Running a command in its own process group with capped, streamed output.

The group is killed on timeout, on cancellation, and after the command exits,
so a tool call never leaves orphans behind.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

READ_CHUNK = 65536


class CappedText:
    """Accumulates text, keeping the head and the tail when it grows past ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._head: list[str] = []
        self._head_len = 0
        self._tail = ""
        self.total = 0

    def append(self, text: str) -> None:
        """Add text; memory stays O(limit) however much arrives."""
        self.total += len(text)
        room = self.limit // 2 - self._head_len
        if room > 0:
            self._head.append(text[:room])
            self._head_len += len(text[:room])
            text = text[room:]
        if text:
            self._tail += text
            if len(self._tail) > self.limit:
                self._tail = self._tail[-(self.limit - self.limit // 2) :]

    def text(self) -> str:
        """The kept text, with a marker where the middle was dropped."""
        return cap_text("".join(self._head) + self._tail, self.limit, total=self.total)


def cap_text(text: str, limit: int, *, total: int | None = None) -> str:
    """Keep the first and last ``limit/2`` characters around a truncation marker."""
    total = len(text) if total is None else total
    if total <= limit and len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    dropped = total - head - tail
    return f"{text[:head]}\n\n... [{dropped} characters truncated] ...\n\n{text[-tail:]}"


@dataclass
class CommandResult:
    """What a finished (or killed) command left behind."""

    stdout: str
    stderr: str
    returncode: int | None
    timed_out: bool = False


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by ``pid``; a vanished group is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def _pump(
    stream: asyncio.StreamReader,
    sink: CappedText,
    on_output: Callable[[str], None] | None,
) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    while chunk := await stream.read(READ_CHUNK):
        text = decoder.decode(chunk)
        sink.append(text)
        if on_output is not None:
            pending += text
            complete, sep, pending = pending.rpartition("\n")
            if sep:
                on_output(complete)
            if len(pending) > READ_CHUNK:
                on_output(pending)
                pending = ""
    tail = decoder.decode(b"", final=True)
    sink.append(tail)
    if on_output is not None and (pending + tail):
        on_output(pending + tail)


async def run_command(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout: float,
    output_limit: int,
    on_output: Callable[[str], None] | None = None,
    env: dict[str, str] | None = None,
) -> CommandResult:
    """Run ``argv`` with stdin closed; kill its whole process group on timeout or cancel."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
        env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    out, err = CappedText(output_limit), CappedText(output_limit)
    pumps = asyncio.gather(_pump(proc.stdout, out, on_output), _pump(proc.stderr, err, on_output))
    timed_out = False
    try:
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            timed_out = True
    finally:
        # Also reaps background children that would otherwise hold the pipes open.
        kill_group(proc.pid)
        if proc.returncode is None:
            await asyncio.shield(proc.wait())
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(pumps)
    return CommandResult(out.text(), err.text(), proc.returncode, timed_out)
