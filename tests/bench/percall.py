"""The per-call path in process: ``gateway.call`` for each file tool, without JSON-RPC.

Usage: ``python tests/bench/percall.py [--calls N] [--rounds N] [--runner NAME] [--out FILE]``
(prints a table, writes JSON); ``bench_percall(calls, rounds, runner)`` returns the figures.

On a temporary workspace bound as the daemon binds it (toold.assembly.bind, default
configuration: the bwrap runner where it works, checkpoints on), each call goes through
``gateway.call`` with origin ``user``, the path every front end's tools/call takes:
validation, the guard, the checkpoint of a write, the tool in the sandbox worker, the
call's audit line (written on the loop after the call, so two loop turns are let run
between calls, and not timed). What is left out is the transport: peers.py measures the
same operations over stdio against the Node MCP filesystem server.

Operations: read a 20-line file, list a 50-entry folder, write 1 KiB over one file (a
checkpoint per call: the content differs each time) and write 1 KiB to a new file each
call. ``--rounds`` rounds of ``--calls`` calls each (after 30 warm-up calls per
operation), operations alternating by round so that machine noise hits them alike; the
p50 and p90 are over every call. Figures only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results-percall.json"
WARM_UP = 30
CONTENT = "".join(f"written line {i:04d} of the benchmark payload.........\n" for i in range(18))
CONTENT = (CONTENT * 2)[:1020]

Call = Callable[[int], tuple[str, dict[str, Any]]]
OPERATIONS: dict[str, Call] = {
    "read_file": lambda i: ("read_file", {"file_path": "small.txt"}),
    "list_dir": lambda i: ("list_dir", {"path": "folder"}),
    "write_file": lambda i: ("write_file", {"file_path": "w.txt", "content": f"{CONTENT}{i:04d}"}),
    "write_new": lambda i: ("write_file", {"file_path": f"new/f{i}.txt", "content": CONTENT}),
}


def _prepare(workspace: Path) -> None:
    (workspace / "small.txt").write_text("".join(f"line {i}: some text\n" for i in range(20)))
    (workspace / "folder").mkdir()
    for i in range(50):
        (workspace / "folder" / f"entry{i:02d}.txt").write_text("x" * i)


async def _run(workspace: Path, calls: int, rounds: int, runner: str | None) -> dict[str, Any]:
    from toold.assembly import bind
    from toold.tools.context import CallContext

    def refused(message: str) -> None:
        raise RuntimeError(f"the configuration was refused: {message}")

    _prepare(workspace)
    overrides = None if runner is None else {"execution": {"tool_runner": runner}}
    state = bind(workspace, overrides, lambda *_: None, refused)
    context = CallContext(origin="user")
    numbers = {name: iter(range(-WARM_UP, 10**9)) for name in OPERATIONS}
    seconds: dict[str, list[float]] = {name: [] for name in OPERATIONS}

    async def one(name: str) -> float:
        tool, arguments = OPERATIONS[name](next(numbers[name]))
        started = time.perf_counter()
        outcome = await state.gateway.call(tool, arguments, context)
        took = time.perf_counter() - started
        if outcome.is_error:
            raise RuntimeError(f"{tool}: {outcome.content}")
        await asyncio.sleep(0)  # the audit line goes out two loop turns after the call
        await asyncio.sleep(0)
        return took

    try:
        for name in OPERATIONS:
            for _ in range(WARM_UP):
                await one(name)
        for _ in range(rounds):
            for name in OPERATIONS:
                seconds[name] += [await one(name) for _ in range(calls)]
        sandbox = state.gateway.runner.name if state.gateway.runner is not None else "local"
    finally:
        await state.aclose()
    return {"runner": sandbox, "operations": {n: _figures(s) for n, s in seconds.items()}}


def _figures(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {
        "calls": len(seconds),
        "p50Ms": round(ordered[len(ordered) // 2] * 1000, 3),
        "p90Ms": round(ordered[int(len(ordered) * 0.9)] * 1000, 3),
        "meanMs": round(statistics.fmean(seconds) * 1000, 3),
    }


def bench_percall(calls: int = 100, rounds: int = 3, runner: str | None = None) -> dict[str, Any]:
    """The figures, from a fresh temporary workspace and user state folder."""
    with tempfile.TemporaryDirectory(prefix="toold-percall-") as scratch:
        root = Path(scratch)
        (root / "ws").mkdir()
        os.environ["TOOLD_STATE_DIR"] = str(root / "state")
        results = asyncio.run(_run(root / "ws", calls, rounds, runner))
    results["python"] = sys.version.split()[0]
    results["cpus"] = os.cpu_count()
    results["load"] = os.getloadavg()[0]
    return results


def table(results: dict[str, Any]) -> str:
    """The figures as text."""
    lines = [f"gateway.call in process (runner: {results['runner']}):"]
    for name, f in results["operations"].items():
        lines.append(
            f"  {name:<11} p50 {f['p50Ms']:7.3f} ms  p90 {f['p90Ms']:7.3f} ms"
            f"  mean {f['meanMs']:7.3f} ms  ({f['calls']} calls)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the bench and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=100, help="calls per operation and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--runner", help="execution.tool_runner (auto, local, subprocess, bwrap); default: toold's"
    )
    args = parser.parse_args(argv)
    results = bench_percall(args.calls, args.rounds, args.runner)
    print(table(results))
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
