"""Soak: many mixed calls over one connection; memory, descriptors and children stay flat.

One daemon, one connection, 5,000 calls (``TOOLD_FULL_HARDENING=1``: 100,000) kept
eight in flight: read_file, grep, glob, todo_write (updates of a fixed list), todo_read,
background_run of ``true`` and jobs/list, plus client notifications ($/cancelRequest of
finished ids). Every todo_write must bring its todos/changed and every job its
jobs/finished. Measured with the daemon quiet (nothing in flight, every job finished)
after the first two fifths of the calls (the warm-up: caches, thread arenas) and at the
end: resident memory may grow by less than 10 MB, the descriptor count and the set of
live children must not grow, and no child may be left a zombie.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.hardening.support import (
    children,
    fd_count,
    fd_targets,
    next_raw,
    rss_kib,
    scale,
    start_daemon,
    zombies,
)
from tests.processes import serving_pid
from tests.waiting import wait_until

CALLS = scale(5_000, 100_000)
WARMUP = CALLS * 2 // 5
WINDOW = 8
TODOS = 20
RSS_GROWTH_LIMIT_KIB = 10 * 1024

MIX: list[tuple[str, int]] = [
    ("read_file", 30),
    ("grep", 10),
    ("glob", 10),
    ("todo_write", 12),
    ("todo_read", 10),
    ("background_run", 4),
    ("jobs/list", 4),
]


def make_workspace(root: Path) -> Path:
    ws = root / "ws"
    for d in range(10):
        folder = ws / "src" / f"pkg{d}"
        folder.mkdir(parents=True)
        for f in range(20):
            lines = [f"def function_{d}_{f}_{i}(): return {i}\n" for i in range(30)]
            (folder / f"mod{f}.py").write_text("".join(lines), encoding="utf-8")
    return ws.resolve()


class Soak:
    def __init__(self, ws: Path) -> None:
        self.client = start_daemon(ws)
        self.rng = random.Random(4242)
        self.names = [name for name, weight in MIX for _ in range(weight)]
        self.pending: dict[str, str] = {}
        self.sent = 0
        self.done: list[str] = []
        self.notes: Counter[str] = Counter()
        self.owed: Counter[str] = Counter()

    def request(self, kind: str) -> None:
        msg_id = f"s{self.sent}"
        self.sent += 1
        if kind == "jobs/list":
            self.client.request("jobs/list", {}, msg_id=msg_id)
        else:
            args = self.arguments(kind)
            params = {"name": kind, "arguments": args, "origin": "user"}
            self.client.request("tools/call", params, msg_id=msg_id)
        self.pending[msg_id] = kind
        if kind == "todo_write":
            self.owed["todos/changed"] += 1
        if kind == "background_run":
            self.owed["jobs/finished"] += 1

    def arguments(self, kind: str) -> dict[str, Any]:
        r = self.rng
        if kind == "read_file":
            return {"file_path": f"src/pkg{r.randrange(10)}/mod{r.randrange(20)}.py", "limit": 10}
        if kind == "grep":
            return {"pattern": f"function_{r.randrange(10)}_{r.randrange(20)}_1\\b"}
        if kind == "glob":
            return {"pattern": f"mod{r.randrange(20)}.py"}
        if kind == "todo_write":
            status = r.choice(["pending", "in_progress", "done"])
            return {"action": "update", "task_id": f"t{r.randint(1, TODOS)}", "status": status}
        if kind == "background_run":
            return {"command": "true"}
        return {}

    def receive(self) -> None:
        msg = next_raw(self.client, timeout=30)
        assert msg is not None, self.client.stderr()
        if "id" not in msg:
            self.notes[msg["method"]] += 1
            return
        kind = self.pending.pop(msg["id"])
        assert "result" in msg, (kind, msg)
        if kind != "jobs/list":
            assert not msg["result"]["isError"], (kind, msg)
        self.done.append(msg["id"])

    def run(self, count: int) -> None:
        target = self.sent + count
        while self.sent < target or self.pending:
            while self.sent < target and len(self.pending) < WINDOW:
                self.request(self.rng.choice(self.names))
                if self.done and self.rng.random() < 0.05:
                    # A cancel for a finished request: must be ignored.
                    self.client.notify("$/cancelRequest", {"id": self.done[-1]})
            self.receive()

    def settle(self) -> None:
        """Wait for every owed notification: nothing in flight, every job finished."""
        while any(self.notes[name] < n for name, n in self.owed.items()):
            self.receive()
        assert self.notes["todos/changed"] == self.owed["todos/changed"]
        assert self.notes["jobs/finished"] == self.owed["jobs/finished"]

    def measure(self) -> dict[str, Any]:
        pid = serving_pid(self.client.proc.pid)
        return {
            "rss_kib": rss_kib(pid),
            "fds": fd_count(pid),
            "children": sorted(children(pid)),
            "zombies": zombies(pid),
        }


def test_soak_keeps_memory_descriptors_and_children_flat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An empty $HOME: bash -l reads no profile (this machine's runs `pyenv rehash`,
    # 130 ms a call, under a lock that a killed shell leaves behind).
    monkeypatch.setenv("HOME", os.fspath(tmp_path))
    soak = Soak(make_workspace(tmp_path))
    try:
        for i in range(TODOS):
            soak.client.tool("todo_write", action="add", task=f"soak item {i}")
        soak.owed["todos/changed"] += TODOS
        soak.run(WARMUP)
        soak.settle()
        before = soak.measure()
        fds_before = fd_targets(serving_pid(soak.client.proc.pid))
        soak.run(CALLS - WARMUP)
        soak.settle()
        pid = serving_pid(soak.client.proc.pid)
        # A job's log closes just after its jobs/finished went out: let it.
        try:
            wait_until(lambda: fd_count(pid) <= before["fds"], "transient descriptors to close")
        except AssertionError:
            raise AssertionError(f"descriptor leak: {fds_before} -> {fd_targets(pid)}") from None
        after = soak.measure()
        growth = after["rss_kib"] - before["rss_kib"]
        print(f"soak: {CALLS} calls, RSS {before['rss_kib']} -> {after['rss_kib']} KiB")
        assert growth < RSS_GROWTH_LIMIT_KIB, (before, after)
        assert after["zombies"] == [], after
        assert set(after["children"]) <= set(before["children"]), (before, after)
        assert soak.client.proc.poll() is None
    finally:
        assert soak.client.close() == 0, soak.client.stderr()
