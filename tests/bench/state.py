"""Benchmark of toold's live state, through the real daemon over stdio.

Usage: ``python tests/bench/state.py [--quick]`` (prints JSON), or call ``bench_state``.

Measures:

1. ``jobs/finished`` latency from process exit: the job's last act is ``date +%s.%N``;
   the figure is the notification's arrival (wall clock, stamped by the reader thread)
   minus that printed time. Target ≤ 20 ms.
2. outside edit → ``tasks/changed`` latency: the bench replaces ``.tasks.json`` the way
   editors save (temp file + rename) and times until the notification arrives.
   Target ≤ 300 ms.
3. ``task_create`` calls per second, each one a locked read-modify-write of
   ``.tasks.json`` with fsync: sequential round trips, pipelined, and two daemons
   pipelining into one workspace at once.

Standard library only, with the bench's own framing client (``lsp.py``), so it measures
the daemon.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from lsp import ServerProcess, initialize_params, read_body, toold_argv

JOBS_FINISHED_TARGET_MS = 20.0
TASKS_CHANGED_TARGET_MS = 300.0
TIMEOUT_S = 30.0
PIPELINE_DEPTH = 50

Arrival = tuple[float, float, dict[str, Any]]
"""(time.time(), time.perf_counter(), message) when the reader thread got it."""


class Daemon(ServerProcess):
    """``toold serve`` on one workspace, read on a thread that stamps every arrival."""

    def __init__(self, workspace: Path) -> None:
        super().__init__(toold_argv(workspace))
        self.arrivals: queue.Queue[Arrival | None] = queue.Queue()
        self.kept: list[Arrival] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.initialize(initialize_params(workspace))

    def _read(self) -> None:
        while True:
            body = read_body(self.stdout)
            wall, perf = time.time(), time.perf_counter()
            if body is None:  # the daemon exited (maybe mid-frame)
                self.arrivals.put(None)
                return
            self.arrivals.put((wall, perf, json.loads(body)))

    def send_request(self, method: str, params: Any) -> int:
        """Send a request; returns its id."""
        msg_id, message = self.new_request(method, params)
        self.send(message)
        return msg_id

    def wait(self, match: Callable[[dict[str, Any]], bool]) -> Arrival:
        """The first message (kept or new) ``match`` accepts."""
        for i, kept in enumerate(self.kept):
            if match(kept[2]):
                return self.kept.pop(i)
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            try:
                arrival = self.arrivals.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise self.failed(f"did not answer within {TIMEOUT_S:g} s") from None
            if arrival is None:
                raise self.failed("closed its output")
            if match(arrival[2]):
                return arrival
            self.kept.append(arrival)

    def result(self, msg_id: int) -> Any:
        """The result of request ``msg_id``."""
        message = self.wait(lambda m: "method" not in m and m.get("id") == msg_id)[2]
        if "error" in message:
            raise self.error(f"{self.name}: request #{msg_id} failed: {message['error']}")
        return message["result"]

    def request(self, method: str, params: Any) -> Any:
        """Request and wait for the result."""
        return self.result(self.send_request(method, params))

    def tool(self, name: str, **arguments: Any) -> Any:
        """tools/call as a person at the editor (origin user), which the guard lets through."""
        params = {"name": name, "arguments": arguments, "origin": "user"}
        return self.request("tools/call", params)

    def forget_notifications(self) -> None:
        """Drop notifications received so far."""
        self.kept = [a for a in self.kept if "method" not in a[2]]
        while True:
            try:
                arrival = self.arrivals.get_nowait()
            except queue.Empty:
                return
            if arrival is not None and "method" not in arrival[2]:
                self.kept.append(arrival)

    def stopped(self) -> None:
        self.reader.join(timeout=10)


def summary(samples_ms: list[float], target_ms: float) -> dict[str, Any]:
    ordered = sorted(samples_ms)
    return {
        "samples": len(ordered),
        "median_ms": round(statistics.median(ordered), 3),
        "p90_ms": round(ordered[max(0, round(0.9 * len(ordered)) - 1)], 3),
        "max_ms": round(ordered[-1], 3),
        "target_ms": target_ms,
        "meets_target": statistics.median(ordered) <= target_ms,
    }


def bench_jobs_finished(daemon: Daemon, runs: int) -> dict[str, Any]:
    """From the job's last act (printing the time) to jobs/finished arriving here."""
    samples: list[float] = []
    for i in range(runs + 1):  # the first run warms imports and caches up
        submitted = daemon.tool("background_run", command="sleep 0.05; date +%s.%N")["content"]
        job_id = submitted.rsplit(" ", 1)[1]
        wall, _, message = daemon.wait(
            lambda m, job_id=job_id: (
                m.get("method") == "jobs/finished" and m["params"]["jobId"] == job_id
            )
        )
        params = message["params"]
        if params["status"] != "done":
            raise RuntimeError(f"job failed: {params}")
        if i:
            samples.append((wall - float(params["result"])) * 1000)
    return summary(samples, JOBS_FINISHED_TARGET_MS)


def bench_tasks_changed(daemon: Daemon, workspace: Path, runs: int) -> dict[str, Any]:
    """From an editor-style save of .tasks.json to tasks/changed arriving here."""
    daemon.request("tasks/list", {})  # answers once outside edits are watched
    daemon.forget_notifications()
    path = workspace / ".tasks.json"
    stamp = "2024-01-01T00:00:00+00:00"
    samples: list[float] = []
    for i in range(runs + 1):
        title = f"edited {i}"
        task = {
            "id": "BENCH001",
            "title": title,
            "description": "",
            "status": "pending",
            "depends_on": [],
            "created_at": stamp,
            "updated_at": stamp,
        }
        staged = path.with_name(".tasks.json.bench")
        staged.write_text(json.dumps({"tasks": {"BENCH001": task}}, indent=2), encoding="utf-8")
        os.replace(staged, path)
        saved = time.perf_counter()
        _, arrived, _ = daemon.wait(
            lambda m, title=title: (
                m.get("method") == "tasks/changed"
                and any(t["title"] == title for t in m["params"]["tasks"])
            )
        )
        if i:
            samples.append((arrived - saved) * 1000)
    return summary(samples, TASKS_CHANGED_TARGET_MS)


def _create_frames(daemon: Daemon, count: int, tag: str) -> list[int]:
    params = [
        {"name": "task_create", "arguments": {"title": f"{tag} {i}"}, "origin": "user"}
        for i in range(count)
    ]
    return [daemon.send_request("tools/call", p) for p in params]


def _check_created(daemon: Daemon, ids: list[int]) -> None:
    for msg_id in ids:
        result = daemon.result(msg_id)
        if result["isError"]:
            raise RuntimeError(f"task_create failed: {result['content']}")


@contextlib.contextmanager
def _warmed(ws: Path, count: int = 1) -> Iterator[list[Daemon]]:
    """``count`` daemons on the new workspace ``ws``, each past a first task_create."""
    ws.mkdir()
    with contextlib.ExitStack() as stack:
        daemons = []
        for _ in range(count):
            daemons.append(stack.enter_context(Daemon(ws)))
        for daemon in daemons:
            daemon.tool("task_create", title="warm-up")
        yield daemons


def bench_task_create(root: Path, calls: int) -> dict[str, Any]:
    """task_create calls per second: sequential, pipelined, and two daemons at once."""
    results: dict[str, Any] = {"calls": calls}

    with _warmed(root / "sequential") as [daemon]:
        begin = time.perf_counter()
        for i in range(calls):
            _check_created(daemon, _create_frames(daemon, 1, f"seq{i}"))
        elapsed = time.perf_counter() - begin
        results["sequential_calls_per_s"] = round(calls / elapsed, 1)
        results["sequential_mean_ms"] = round(elapsed / calls * 1000, 3)

    with _warmed(root / "pipelined") as [daemon]:
        begin = time.perf_counter()
        for batch in range(max(1, calls // PIPELINE_DEPTH)):
            _check_created(daemon, _create_frames(daemon, PIPELINE_DEPTH, f"pipe{batch}"))
        elapsed = time.perf_counter() - begin
        done = max(1, calls // PIPELINE_DEPTH) * PIPELINE_DEPTH
        results["pipelined_calls_per_s"] = round(done / elapsed, 1)

    ws = root / "two-daemons"
    with _warmed(ws, 2) as daemons:
        begin = time.perf_counter()
        pending = [_create_frames(d, calls, f"d{n}") for n, d in enumerate(daemons)]
        for d, ids in zip(daemons, pending, strict=True):
            _check_created(d, ids)
        elapsed = time.perf_counter() - begin
        results["two_daemons_calls_per_s"] = round(2 * calls / elapsed, 1)
        stored = json.loads((ws / ".tasks.json").read_text(encoding="utf-8"))["tasks"]
        results["two_daemons_tasks_stored"] = len(stored)
        results["two_daemons_tasks_expected"] = 2 * calls + 2
    return results


def bench_state(quick: bool) -> dict[str, Any]:
    """Run the three state benchmarks through real daemons; returns the raw figures."""
    runs, calls = (5, 100) if quick else (30, 500)
    with tempfile.TemporaryDirectory(prefix="toold-bench-state-") as tmp:
        root = Path(tmp)
        ws = root / "live"
        ws.mkdir()
        with Daemon(ws) as daemon:
            results = {
                "jobs_finished_latency": bench_jobs_finished(daemon, runs),
                "tasks_changed_latency": bench_tasks_changed(daemon, ws, runs),
            }
        results["task_create"] = bench_task_create(root, calls)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    args = parser.parse_args(argv)
    print(json.dumps(bench_state(args.quick), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
