"""What engines hold: their processes, resident memory and inotify instances (the scale
test and ``tests/bench/engines.py`` report it)."""

from __future__ import annotations

import os
from typing import Any


def processes_below(roots: list[int]) -> list[int]:
    """``roots`` and every process running below one of them (parents read from /proc)."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    parent[int(entry)] = int(stat.read().rpartition(b")")[2].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = set(roots), list(roots)
    while frontier:
        pid = frontier.pop()
        children = [child for child, up in parent.items() if up == pid and child not in found]
        found.update(children)
        frontier.extend(children)
    return sorted(found)


def inotify_instances(pid: int) -> int | None:
    """``anon_inode:inotify`` descriptors of ``pid``; None when its fds are not ours to
    read (a non-dumpable engine, for a user without CAP_SYS_PTRACE)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except PermissionError:
        return None
    except FileNotFoundError:
        return 0
    count = 0
    for fd in fds:
        try:
            count += os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:inotify"
        except OSError:
            continue
    return count


def footprint(listed: list[dict[str, Any]]) -> tuple[int, int]:
    """(resident bytes of the engines, inotify instances held by them and what runs
    below them); an engine whose fds cannot be read counts what it reports itself."""
    rss = sum(int(engine.get("rss", 0)) for engine in listed)
    reported = {int(engine["pid"]): int(engine.get("inotify", 0)) for engine in listed}
    instances = 0
    for pid in processes_below(list(reported)):
        seen = inotify_instances(pid)
        instances += reported.get(pid, 0) if seen is None else seen
    return rss, instances
