"""Running a command in its own process group with capped, streamed output.

The group is killed on timeout, on cancellation, and after the command exits,
so a tool call never leaves orphans behind. Two limits can end a command: ``timeout``,
the hard ceiling however much it prints, and ``idle_timeout``, seconds without a byte
of output (each chunk on stdout or stderr starts the window again), so a steady
``pytest`` run lives while a hung command dies early.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

READ_CHUNK = 65536
PIPE_GRACE = 2.0  # seconds to drain the pipes once the group is dead


@dataclass(frozen=True)
class Clipped:
    """A possibly truncated text: ``head``, then ``dropped`` unseen characters, then ``tail``."""

    head: str
    tail: str = ""
    dropped: int = 0

    @property
    def total(self) -> int:
        """Length of the whole text, including the dropped middle."""
        return len(self.head) + self.dropped + len(self.tail)

    def rstrip(self) -> Clipped:
        """Trailing whitespace removed (from the kept tail when the middle was dropped)."""
        if self.dropped:
            return Clipped(self.head, self.tail.rstrip(), self.dropped)
        return Clipped((self.head + self.tail).rstrip())

    def __str__(self) -> str:
        if not self.dropped:
            return self.head + self.tail
        return f"{self.head}{_marker(self.dropped)}{self.tail}"


def _marker(dropped: int) -> str:
    return f"\n\n... [{dropped} characters truncated] ...\n\n"


def _take_head(segments: Sequence[str | int], count: int) -> str:
    out: list[str] = []
    for seg in segments:
        if isinstance(seg, int) or count <= 0:
            break
        out.append(seg[:count])
        count -= len(out[-1])
    return "".join(out)


def _take_tail(segments: Sequence[str | int], count: int) -> str:
    out: list[str] = []
    for seg in reversed(segments):
        if isinstance(seg, int) or count <= 0:
            break
        out.append(seg[-count:])
        count -= len(out[-1])
    return "".join(reversed(out))


def join_clipped(parts: Sequence[Clipped], sep: str, limit: int) -> str:
    """Join ``parts`` with ``sep`` and keep the first and last ``limit/2`` characters of the
    whole around one marker that counts every character left out."""
    segments: list[str | int] = []
    for i, part in enumerate(parts):
        if i:
            segments.append(sep)
        segments.append(part.head)
        if part.dropped:
            segments += [part.dropped, part.tail]
    total = sum(s if isinstance(s, int) else len(s) for s in segments)
    if total <= limit and not any(isinstance(s, int) for s in segments):
        return "".join(s for s in segments if isinstance(s, str))
    head = _take_head(segments, limit // 2)
    tail = _take_tail(segments, limit - limit // 2)
    dropped = total - len(head) - len(tail)
    return f"{head}{_marker(dropped)}{tail}"


class CappedText:
    """Accumulates text, keeping the head and the tail when it grows past ``limit``.

    Each end keeps up to ``limit`` characters (not ``limit/2``), so the text can still
    be stripped or joined with others and capped to ``limit`` without losing either end.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._head: list[str] = []
        self._head_len = 0
        self._tail = ""
        self.total = 0

    def append(self, text: str) -> None:
        """Add text; memory stays O(limit) however much arrives."""
        self.total += len(text)
        room = self.limit - self._head_len
        if room > 0:
            self._head.append(text[:room])
            self._head_len += len(text[:room])
            text = text[room:]
        if text:
            self._tail += text
            if len(self._tail) > 2 * self.limit:
                self._tail = self._tail[-self.limit :]

    def clipped(self) -> Clipped:
        """The kept text; ``dropped`` counts the characters lost from the middle."""
        tail = self._tail[-self.limit :] if self._tail else ""
        dropped = self.total - self._head_len - len(tail)
        return Clipped("".join(self._head), tail, dropped)

    def text(self) -> str:
        """The kept text, with a marker where the middle was dropped."""
        return join_clipped([self.clipped()], "", self.limit)


def cap_text(text: str, limit: int, *, total: int | None = None) -> str:
    """Keep the first and last ``limit/2`` characters around a truncation marker.

    ``total``, when given, is the length of the original text ``text`` was cut from.
    """
    if total is None or total <= len(text):
        return join_clipped([Clipped(text)], "", limit)
    half = len(text) // 2
    return join_clipped([Clipped(text[:half], text[half:], total - len(text))], "", limit)


@dataclass
class CommandResult:
    """What a finished (or killed) command left behind."""

    out: Clipped
    err: Clipped
    returncode: int | None
    timed_out: bool = False
    limit: int = 30_000
    idle: bool = False
    """The idle timeout ended it (no output for that long); ``timed_out`` is set too."""

    @property
    def stdout(self) -> str:
        """Standard output, capped to ``limit`` around a marker."""
        return join_clipped([self.out], "", self.limit)

    @property
    def stderr(self) -> str:
        """Standard error, capped to ``limit`` around a marker."""
        return join_clipped([self.err], "", self.limit)


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by ``pid``; a vanished group is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


class _Quiet:
    """When the command last printed (monotonic seconds): the idle timeout's clock."""

    def __init__(self) -> None:
        self.since = time.monotonic()

    def heard(self) -> None:
        """Output arrived: the idle window starts again."""
        self.since = time.monotonic()


async def _pump(
    stream: asyncio.StreamReader,
    sink: CappedText,
    on_output: Callable[[str], None] | None,
    tee: Callable[[str], None] | None = None,
    quiet: _Quiet | None = None,
) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    while chunk := await stream.read(READ_CHUNK):
        if quiet is not None:
            quiet.heard()
        text = decoder.decode(chunk)
        sink.append(text)
        if tee is not None:
            tee(text)
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
    if tee is not None and tail:
        tee(tail)
    if on_output is not None and (pending + tail):
        on_output(pending + tail)


async def _feed(pipe: asyncio.StreamWriter | None, data: bytes | None) -> None:
    """Write ``data`` to the command's stdin and close it; a command that exits (or
    closes its stdin) without reading it all is not an error."""
    if pipe is None or data is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        pipe.write(data)
        await pipe.drain()
    pipe.close()


class _ExitAwareProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """Stream protocol that also says when the process itself has exited.

    On Python 3.11 ``Process.wait()`` returns only once every pipe is closed too, so a
    background child still holding stdout would make a finished command look hung.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=READ_CHUNK, loop=loop)
        self.exited: asyncio.Future[None] = loop.create_future()

    def process_exited(self) -> None:
        super().process_exited()
        if not self.exited.done():
            self.exited.set_result(None)


async def run_command(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout: float,
    output_limit: int,
    on_output: Callable[[str], None] | None = None,
    env: dict[str, str] | None = None,
    stdin: bytes | None = None,
    tee: Callable[[str], None] | None = None,
    idle_timeout: float | None = None,
) -> CommandResult:
    """Run ``argv`` with ``stdin`` (else stdin closed); kill its whole process group on
    timeout, after ``idle_timeout`` seconds without output (None: never), or on cancel.
    ``on_output`` gets output a line at a time (for progress), ``tee`` every decoded
    chunk as it is (to keep all of it)."""
    loop = asyncio.get_running_loop()
    spawn = asyncio.ensure_future(
        loop.subprocess_exec(
            lambda: _ExitAwareProtocol(loop),
            *argv,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL if stdin is None else asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            env=env,
        )
    )
    try:
        transport, protocol = await asyncio.shield(spawn)
    except asyncio.CancelledError:
        # Cancelled while the child starts: it may run already and have started others
        # (asyncio's own cleanup would kill the child alone, orphaning its background jobs).
        with contextlib.suppress(Exception):
            started, _ = await spawn
            kill_group(started.get_pid())
            started.close()
        raise
    proc = asyncio.subprocess.Process(transport, protocol, loop)
    assert proc.stdout is not None and proc.stderr is not None
    out, err = CappedText(output_limit), CappedText(output_limit)
    quiet = _Quiet()
    pumps = asyncio.gather(
        _pump(proc.stdout, out, on_output, tee, quiet),
        _pump(proc.stderr, err, on_output, tee, quiet),
        _feed(proc.stdin, stdin),
    )
    timed_out = idle = False
    try:
        ended = await _wait_exit(protocol.exited, timeout, idle_timeout, quiet)
        timed_out, idle = ended != "exited", ended == "idle"
    finally:
        # Also kills background children, which would otherwise hold the pipes open.
        kill_group(proc.pid)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(protocol.exited)
            try:
                await asyncio.wait_for(asyncio.shield(pumps), PIPE_GRACE)
            except TimeoutError:
                # Something outside the group (setsid) still holds a pipe: stop reading.
                transport.close()
                await asyncio.shield(pumps)
    return CommandResult(
        out.clipped(), err.clipped(), proc.returncode, timed_out, output_limit, idle
    )


async def _wait_exit(
    exited: asyncio.Future[None], timeout: float, idle_timeout: float | None, quiet: _Quiet
) -> str:
    """Wait for the command to exit: ``exited``, or which limit ran out first
    (``timeout``: the hard ceiling; ``idle``: ``idle_timeout`` seconds without output)."""
    deadline = time.monotonic() + timeout
    while True:
        now = time.monotonic()
        wait, limit = deadline - now, "timeout"
        if idle_timeout is not None:
            idle_left = quiet.since + idle_timeout - now
            if idle_left < wait:
                wait, limit = idle_left, "idle"
        if wait <= 0:
            return limit
        try:
            await asyncio.wait_for(asyncio.shield(exited), wait)
        except TimeoutError:
            continue  # output may have moved the idle window: look again
        return "exited"
