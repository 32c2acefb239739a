"""Benchmark of the shared workspace engine (toold.engine).

Usage: ``python tests/bench/engine.py [--quick]`` (prints JSON), or call ``bench_engine``.

Measures:

1. ``toold call read_file`` wall time for the whole process, attached to a running
   engine against ``--no-daemon`` (a private daemon started and stopped by the call),
   runs interleaved; the median is the figure (target ≤ 100 ms attached).
2. ``read_file`` round trips over ``toold serve`` relayed to the engine against ``toold
   serve --no-daemon``, sequential and pipelined, alternating rounds.

Engines run under a runtime folder of the bench's own, stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsp import Client, frame, initialize_params, private_engines, toold_cli

CALL_TARGET_MS = 100.0
PIPELINE_DEPTH = 50


def _wall(argv: list[str], cwd: Path) -> float:
    begin = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, check=False)
    elapsed = time.perf_counter() - begin
    if done.returncode != 0:
        raise RuntimeError(f"{argv} failed: {done.stderr.decode(errors='replace')}")
    return elapsed


def bench_call(workspace: Path, runs: int, private_runs: int) -> dict[str, Any]:
    """``toold call`` wall times, attached and private, interleaved."""
    call = [*toold_cli(), "call", "read_file", json.dumps({"file_path": "small.txt"})]
    subprocess.run(
        [*toold_cli(), "daemon", "start"], cwd=workspace, check=True, capture_output=True
    )
    _wall(call, workspace)  # warm: the engine's first call loads the tools
    attached: list[float] = []
    private: list[float] = []
    for i in range(runs):
        attached.append(_wall(call, workspace))
        if i < private_runs:
            private.append(_wall([*call, "--no-daemon"], workspace))
    median_attached = statistics.median(attached) * 1000
    median_private = statistics.median(private) * 1000
    return {
        "attached_runs": runs,
        "attached_median_ms": round(median_attached, 1),
        "attached_p90_ms": round(sorted(attached)[int(0.9 * (runs - 1))] * 1000, 1),
        "no_daemon_runs": private_runs,
        "no_daemon_median_ms": round(median_private, 1),
        "speedup": round(median_private / median_attached, 1),
        "target_ms": CALL_TARGET_MS,
    }


class _Server(Client):
    def send_bytes(self, data: bytes) -> None:
        self.stdin.write(data)
        self.stdin.flush()


def _calls_per_s(server: _Server, calls: int) -> tuple[float, float]:
    params = {"name": "read_file", "arguments": {"file_path": "small.txt"}, "origin": "user"}
    begin = time.perf_counter()
    for _ in range(calls):
        server.request("tools/call", params)
    sequential = calls / (time.perf_counter() - begin)
    batches = max(1, calls // PIPELINE_DEPTH)
    begin = time.perf_counter()
    for _ in range(batches):
        frames = []
        for _ in range(PIPELINE_DEPTH):
            _, message = server.new_request("tools/call", params)
            frames.append(frame(message))
        server.send_bytes(b"".join(frames))
        for _ in range(PIPELINE_DEPTH):
            server.read_response()
    pipelined = batches * PIPELINE_DEPTH / (time.perf_counter() - begin)
    return sequential, pipelined


def bench_relay(workspace: Path, calls: int, rounds: int) -> dict[str, Any]:
    """read_file calls/s through the relay to the engine vs a private daemon."""
    ws = os.fspath(workspace)
    argv = [sys.executable, "-m", "toold", "serve", "--workspace", ws]
    figures: dict[str, list[tuple[float, float]]] = {"relay": [], "direct": []}
    with _Server(argv, name="relay") as relay, _Server([*argv, "--no-daemon"]) as direct:
        for server in (relay, direct):
            server.initialize(initialize_params(workspace))
            _calls_per_s(server, min(100, calls))  # warm-up
        for _ in range(rounds):
            figures["relay"].append(_calls_per_s(relay, calls))
            figures["direct"].append(_calls_per_s(direct, calls))
    out: dict[str, Any] = {"calls_per_round": calls, "rounds": rounds}
    for name, samples in figures.items():
        out[f"{name}_calls_per_s"] = round(statistics.median(s[0] for s in samples), 1)
        out[f"{name}_pipelined_calls_per_s"] = round(statistics.median(s[1] for s in samples), 1)
    out["relay_over_direct"] = round(out["relay_calls_per_s"] / out["direct_calls_per_s"], 2)
    return out


def bench_engine(quick: bool) -> dict[str, Any]:
    """Both measurements, on a scratch workspace, under a runtime folder of our own."""
    with private_engines(), tempfile.TemporaryDirectory(prefix="toold-bench-ws-") as scratch:
        workspace = Path(scratch)
        (workspace / "small.txt").write_text("".join(f"line {i}\n" for i in range(20)))
        calls = bench_call(workspace, 10 if quick else 30, 3 if quick else 10)
        relay = bench_relay(workspace, 300 if quick else 2000, 2 if quick else 5)
        return {"toold_call": calls, "read_file_relay": relay}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print(json.dumps(bench_engine(args.quick), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
