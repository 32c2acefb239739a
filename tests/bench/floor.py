"""toold against the floor (floor_server.py), and what an idle daemon costs.

bench.py runs both as steps of its main table:

- ``bench_floor``: ``tools/call read_file`` sequential calls per second against the
  floor server's ``bench/readFile`` on the same file through the same client,
  interleaved (rounds alternate toold and floor, and which goes first) so machine
  noise hits both alike; the ratio is the median of the per-round ratios.
- ``bench_idle``: toold, bare pygls and the floor, each initialized and asked once,
  then left alone for ``IDLE_S``: CPU clock ticks (utime + stime of every thread,
  /proc/PID/stat), voluntary context switches summed over /proc/PID/task/*/status
  (each one is a thread waking up) and VmRSS at the end. Target: 0 wake-ups.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsp import Client, initialize_params, toold_argv

HERE = Path(__file__).resolve().parent
FLOOR_SERVER = HERE / "floor_server.py"
BARE_SERVER = HERE / "bare_pygls_server.py"
FLOOR_TARGET = 0.6
IDLE_S = 10.0
SETTLE_S = 1.0


class FloorError(RuntimeError):
    """A server died or answered with an error."""


class FloorClient(Client):
    """The bench's blocking client (lsp.py), raising FloorError."""

    error = FloorError


def spawn(argv: list[str], name: str, workspace: Path) -> Client:
    """A server on stdio, initialized on ``workspace``."""
    client = FloorClient(argv, name=name)
    client.initialize(initialize_params(workspace, clientInfo={"name": "toold-bench"}))
    return client


def servers(workspace: Path) -> dict[str, Callable[[], Client]]:
    """How to start each server this module compares."""
    python = sys.executable
    return {
        "toold": lambda: spawn(toold_argv(workspace), "toold", workspace),
        "bare": lambda: spawn([python, os.fspath(BARE_SERVER)], "bare pygls", workspace),
        "floor": lambda: spawn([python, os.fspath(FLOOR_SERVER)], "floor", workspace),
    }


def _rate(call: Callable[[], Any], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return calls / (time.perf_counter() - start)


def bench_floor(workspace: Path, small: Path, rounds: int, calls: int) -> dict[str, Any]:
    """Sequential read_file calls/s, toold vs the floor, in alternating rounds."""
    expected = small.read_text(encoding="utf-8")
    first_line = "1: " + expected.splitlines()[0]
    make = servers(workspace)
    with make["toold"]() as toold, make["floor"]() as floor:

        def toold_call() -> None:
            args = {"file_path": small.name}
            result = toold.request("tools/call", {"name": "read_file", "arguments": args})
            if result.get("isError") or not str(result.get("content")).startswith(first_line):
                raise FloorError(f"toold read_file returned {result!r}")

        def floor_call() -> None:
            if floor.request("bench/readFile", {"path": os.fspath(small)})["text"] != expected:
                raise FloorError("the floor server read the file wrong")

        _rate(toold_call, 200)  # imports, caches, pydantic schemas
        _rate(floor_call, 200)
        toold_rates: list[float] = []
        floor_rates: list[float] = []
        for n in range(rounds):
            if n % 2:
                floor_rates.append(_rate(floor_call, calls))
                toold_rates.append(_rate(toold_call, calls))
            else:
                toold_rates.append(_rate(toold_call, calls))
                floor_rates.append(_rate(floor_call, calls))
    ratios = [t / f for t, f in zip(toold_rates, floor_rates, strict=True)]
    ratio = statistics.median(ratios)
    return {
        "rounds": rounds,
        "calls_per_round": calls,
        "toold_calls_per_s": [round(r) for r in toold_rates],
        "floor_calls_per_s": [round(r) for r in floor_rates],
        "toold_median_calls_per_s": round(statistics.median(toold_rates)),
        "floor_median_calls_per_s": round(statistics.median(floor_rates)),
        "ratios": [round(r, 3) for r in ratios],
        "ratio": round(ratio, 3),
        "target": FLOOR_TARGET,
        "meets_target": ratio >= FLOOR_TARGET,
    }


def cpu_and_wakeups(pid: int) -> tuple[int, int]:
    """Clock ticks used (utime + stime) and voluntary context switches of every thread."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    switches = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        for line in status.splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                switches += int(line.split()[1])
    return ticks, switches


def bench_idle(workspace: Path, idle_s: float = IDLE_S) -> dict[str, Any]:
    """CPU, wake-ups and RSS of each server left idle for ``idle_s`` seconds, side by side."""
    small = os.fspath(workspace / "small.txt")
    first = {
        "toold": ("tools/list", {}),
        "bare": ("bench/readFile", {"path": small}),
        "floor": ("bench/readFile", {"path": small}),
    }
    started: dict[str, Client] = {}
    try:
        for key, make in servers(workspace).items():
            started[key] = make()
            started[key].request(*first[key])
        time.sleep(SETTLE_S)  # let start-up work (deferred imports, threads) finish
        before = {key: cpu_and_wakeups(s.pid) for key, s in started.items()}
        time.sleep(idle_s)  # the measurement itself: nothing happens on purpose
        results: dict[str, Any] = {"idle_s": idle_s, "clock_ticks_per_s": os.sysconf("SC_CLK_TCK")}
        for key, server in started.items():
            ticks, switches = cpu_and_wakeups(server.pid)
            results[key] = {
                "clock_ticks": ticks - before[key][0],
                "wakeups": switches - before[key][1],
                "threads": len(os.listdir(f"/proc/{server.pid}/task")),
                "rss_kib": server.rss_kib(),
            }
    finally:
        for server in started.values():
            server.stop()
    return results


def rows(floor: dict[str, Any], idle: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """bench.py's table rows for both measurements."""
    verdict = "meets" if floor["meets_target"] else "MISSES"
    out = [
        (
            f"read_file sequential vs the floor ({floor['rounds']} rounds interleaved)",
            f"{floor['toold_median_calls_per_s']} calls/s",
            f"{floor['floor_median_calls_per_s']} calls/s",
            f"×{floor['ratio']:.2f}",
            f"baseline: floor_server.py (stdlib only); {verdict} target ≥ ×{floor['target']}; "
            f"round ratios {min(floor['ratios']):.2f}–{max(floor['ratios']):.2f}",
        )
    ]
    t, b, f = idle["toold"], idle["bare"], idle["floor"]
    out.append(
        (
            f"idle {idle['idle_s']:.0f} s: wake-ups / clock ticks",
            f"{t['wakeups']} / {t['clock_ticks']}",
            f"{b['wakeups']} / {b['clock_ticks']}",
            f"floor {f['wakeups']} / {f['clock_ticks']}",
            f"baseline: bare pygls; voluntary context switches of every thread; target 0; "
            f"toold has {t['threads']} threads",
        )
    )
    out.append(
        (
            "idle RSS after initialize + 1 request",
            f"{t['rss_kib'] / 1024:.1f} MiB",
            f"{b['rss_kib'] / 1024:.1f} MiB",
            f"{(t['rss_kib'] - b['rss_kib']) / 1024:+.1f} MiB",
            f"baseline: bare pygls; the floor: {f['rss_kib'] / 1024:.1f} MiB; target ≤ 50 MiB",
        )
    )
    return out
