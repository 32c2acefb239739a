"""What a long-running toold process does at start: keep secrets and itself out of reach.

Every process that lives on (the engine, ``toold serve``, ``mcp``, ``acp``) becomes
non-dumpable (``PR_SET_DUMPABLE`` 0): a process of the same user, such as an agent's
command, can then neither read its ``/proc/PID/environ`` or ``mem`` nor open its
``/proc/PID/fd/N`` (an editor's stdin pipe written through there passed for the
editor's own requests). Root (CAP_SYS_PTRACE) is not stopped by it. Commands it starts
are dumpable again: the flag resets on exec.

A process that runs tools also becomes a child subreaper, so whatever a tool call
starts stays below it after ``setsid``, a double fork or a dead parent (orphans go to
the nearest subreaper, not init): "runs below the engine" cannot be shed. It reaps
those orphans itself (``Reaper``). A ``toold`` that one of its commands starts (a
private ``serve --no-daemon``, an engine in a runtime folder the command sees instead)
knows it serves the agent from that ancestry (``tool_runner_above``), or, where the
runner is out of sight (a sandbox's pid namespace), from ``TOOLD_TOOL_CALL`` in its
environment, a marker the command can remove.

Secrets (``ANTHROPIC_API_KEY``, ``*_TOKEN``, ``*_PASSWORD``: the names redaction knows)
stay in ``os.environ``, where toold reads them, but leave the process's C environment,
which commands started without an explicit environment inherit. ``/proc/PID/environ``
shows the environment a process was started with, whatever it changes later: the
engine is therefore started with none of them (``attach`` hands its environment over a
pipe); a process the user started with secrets (``toold serve --no-daemon``, ``mcp``,
``acp``, the relay) keeps them there, behind the dumpable flag only.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import sys
import threading
import time

log = logging.getLogger(__name__)

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
TOOL_CALL_ENV = "TOOLD_TOOL_CALL"
"""Set in the environment of every process toold runs tools in (the pid of that process)."""
REAP_EVERY = 1.0
"""Seconds between two looks for orphans to reap."""
ZOMBIE_GRACE = 3.0
"""Seconds a child stays a zombie before the reaper takes it. A child toold started is
waited for by its own waiter within milliseconds (asyncio's watcher thread is blocked in
waitpid for it, Popen.communicate waits once the output ends), and a waitpid(-1) here
would steal that exit status; a long-lived Popen polled later (python_repl's
interpreter) that died more than this long ago reads status 0."""


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def make_undumpable() -> bool:
    """Make this process non-dumpable (Linux; False elsewhere or when refused)."""
    return _prctl(PR_SET_DUMPABLE, 0)


def become_subreaper() -> bool:
    """Make orphans of this process's descendants its children (Linux only)."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def hide_secrets() -> list[str]:
    """Remove secrets from the C environment (children inherit it), not from os.environ
    (toold reads them there: the model's key, execution.env_passthrough); their names."""
    from toold.permissions.redaction import is_secret_variable

    hidden = [name for name, value in os.environ.items() if is_secret_variable(name, value)]
    for name in hidden:
        os.unsetenv(name)
    return hidden


def runs_tools(argv: list[str]) -> bool:
    """Whether a command line is one of toold's processes that run tools: the engine,
    ``toold serve --no-daemon``, ``toold mcp --no-daemon`` (``--http`` or not) or
    ``toold acp --no-daemon`` (not the relays: ``toold serve``, ``toold mcp``, ``toold
    mcp --http`` and ``toold acp``, whose tools run in the engine)."""
    program = os.path.basename(argv[0]) if argv else ""
    rest = argv[1:]
    if program.startswith("python"):
        while rest and rest[0].startswith("-") and rest[0] not in ("-m", "-c"):
            rest = rest[1:]  # the interpreter's own options (-P, -u, -X dev...)
        if rest[:2] == ["-m", "toold.engine"]:
            return True
        if rest[:2] == ["-m", "toold"]:
            rest = rest[2:]
        elif rest and os.path.basename(rest[0]) == "toold":
            rest = rest[1:]  # the console script, run by its interpreter
        else:
            return False
    elif program != "toold":
        return False
    command = rest[0] if rest else ""
    return command in ("serve", "acp", "mcp") and "--no-daemon" in rest


def tool_runner_above(pid: int | None = None, limit: int = 256) -> int | None:
    """The nearest process from ``pid`` up (default: this process's parent) that runs
    toold's tools; None when there is none.

    An agent's command cannot leave that ancestry (the tool runner is a subreaper) nor
    change the runner's command line, as it can remove a marker from its environment."""
    pid = os.getppid() if pid is None else pid
    for _ in range(limit):
        if pid <= 1:
            return None
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                argv = [os.fsdecode(word) for word in cmdline.read().split(b"\0")]
            with open(f"/proc/{pid}/stat", "rb") as stat_file:
                parent = int(stat_file.read().rpartition(b")")[2].split()[1])
        except (OSError, IndexError, ValueError):
            return None
        if runs_tools(argv):
            return pid
        pid = parent
    return None


def started_by_tool_call() -> int | None:
    """The pid of the toold process whose tool call started this one; -1 when only the
    ``TOOLD_TOOL_CALL`` marker says so (the runner is out of sight: another pid
    namespace); None when this process is the user's."""
    above = tool_runner_above()
    if above is not None:
        return above
    return -1 if os.environ.get(TOOL_CALL_ENV) else None


def harden(*, runs_tools: bool) -> int | None:
    """Harden this long-running process; what ``started_by_tool_call`` says of it.

    With ``runs_tools`` it also becomes a subreaper (reaping its orphans) and marks the
    environment its commands inherit."""
    inside = started_by_tool_call()
    make_undumpable()
    if runs_tools:
        if become_subreaper():
            Reaper().start()
        os.environ[TOOL_CALL_ENV] = str(os.getpid())
    hide_secrets()
    return inside


class Reaper(threading.Thread):
    """Waits for the orphans a subreaper inherits, and only for them.

    Children this process started are waited for by their own waiters; an orphan has
    none. So a child is reaped only once it has been a zombie for ZOMBIE_GRACE seconds
    (its start time checked, so a reused pid is not taken for it)."""

    def __init__(self) -> None:
        super().__init__(name="toold-reaper", daemon=True)
        self.zombies: dict[int, tuple[bytes, float]] = {}
        """Children seen as zombies: their start time and when they were first seen."""

    def run(self) -> None:
        """Look for zombies every REAP_EVERY seconds for the process's life."""
        while True:
            time.sleep(REAP_EVERY)
            try:
                self.sweep(time.monotonic())
            except Exception:  # never let the reaper die of one odd /proc entry
                log.exception("reaper sweep failed")

    def sweep(self, now: float) -> list[int]:
        """Reap the zombies older than the grace; the pids reaped."""
        seen: dict[int, tuple[bytes, float]] = {}
        reaped = []
        for pid in children():
            state = _zombie_start(pid)
            if state is None:
                continue
            first = self.zombies.get(pid)
            since = first[1] if first is not None and first[0] == state else now
            if now - since < ZOMBIE_GRACE:
                seen[pid] = (state, since)
                continue
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0]:
                    reaped.append(pid)
        self.zombies = seen
        return reaped


def children() -> list[int]:
    """This process's children (any thread's), from /proc/self/task/*/children."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError), open(f"/proc/self/task/{task}/children") as f:
                found += [int(pid) for pid in f.read().split()]
    return found


def _zombie_start(pid: int) -> bytes | None:
    """The start time of child ``pid`` when it is a zombie; None when it is not."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            fields = stat_file.read().rpartition(b")")[2].split()
    except OSError:
        return None
    return fields[19] if len(fields) > 19 and fields[0] == b"Z" else None
