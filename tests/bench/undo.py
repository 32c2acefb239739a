"""What undo for shell calls costs a bash call (issue 26): the baseline's walks on a large tree.

Usage: ``python tests/bench/undo.py [--files N] [--calls N] [--runner NAME]`` (prints a
table); ``bench_undo(files, calls)`` returns the figures.

In process, on a temporary workspace of ``--files`` (default 10,000) files of 1 KiB in
folders of 100, bound as the daemon binds it (toold.assembly.bind), with the local
runner unless told otherwise: ``bash -c true`` through ``gateway.call`` (origin user),
``--calls`` times each,

1. with ``checkpoints.enabled = false``: the call alone;
2. with checkpoints on: the first call (the baseline reads and stores the tree once),
   then the steady state (nothing read);
3. with checkpoints on, each call changing one file (``echo >> f``): one file read and
   one checkpoint recorded.

The added latency is the median of 2 or 3 minus the median of 1. Where inotify works,
the walks are incremental: a quiet call only drains the baseline's event queue, a call
that changes one file lists that file's folder again; without inotify every call walks
the tree twice. The floor printed beside it is a bare walk of the same
tree (``os.scandir`` and ``lstat`` of every entry, nothing else), which tells the walk's own
cost from the machine's load. Figures only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

CONTENT = b"".join(b"line %04d of a benchmark file.................\n" % i for i in range(21))


def _tree(root: Path, files: int) -> None:
    for i in range(files):
        folder = root / f"d{i // 100:03d}"
        if i % 100 == 0:
            folder.mkdir()
        (folder / f"f{i:05d}.txt").write_bytes(CONTENT)


def _floor(root: Path, calls: int) -> float:
    """Median milliseconds of a bare stat walk of ``root``: the least any walk costs here."""

    def walk(fd: int) -> None:
        with os.scandir(fd) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != ".toold":
                        sub = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                        walk(sub)
                        os.close(sub)
                else:
                    entry.stat(follow_symlinks=False)

    seconds = []
    for _ in range(calls):
        started = time.perf_counter()
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        walk(fd)
        os.close(fd)
        seconds.append(time.perf_counter() - started)
    return round(statistics.median(seconds) * 1000, 2)


def _stats(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {
        "p50Ms": round(statistics.median(ordered) * 1000, 2),
        "p90Ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))] * 1000, 2),
    }


async def _calls(workspace: Path, enabled: bool, calls: int, runner: str) -> dict[str, Any]:
    from toold.assembly import bind
    from toold.tools.context import CallContext

    def refused(message: str) -> None:
        raise RuntimeError(f"the configuration was refused: {message}")

    overrides = {"execution": {"tool_runner": runner}, "checkpoints": {"enabled": enabled}}
    state = bind(workspace, overrides, lambda *_: None, refused)
    context = CallContext(origin="user")

    async def bash(command: str) -> float:
        started = time.perf_counter()
        outcome = await state.gateway.call("bash", {"command": command}, context)
        took = time.perf_counter() - started
        if outcome.is_error:
            raise RuntimeError(f"bash {command}: {outcome.content}")
        return took

    try:
        first = await bash("true")
        quiet = [await bash("true") for _ in range(calls)]
        changing = [await bash(f"echo {i} >> d000/f00000.txt") for i in range(calls)]
    finally:
        await state.aclose()
    return {"firstMs": round(first * 1000, 1), "true": _stats(quiet), "change": _stats(changing)}


def bench_undo(files: int = 10_000, calls: int = 30, runner: str = "local") -> dict[str, Any]:
    """The figures, from a fresh temporary workspace and user state folder."""
    with tempfile.TemporaryDirectory(prefix="toold-undo-") as scratch:
        root = Path(scratch)
        workspace = root / "ws"
        workspace.mkdir()
        _tree(workspace, files)
        os.environ["TOOLD_STATE_DIR"] = str(root / "state")
        off = asyncio.run(_calls(workspace, False, calls, runner))
        on = asyncio.run(_calls(workspace, True, calls, runner))
        floor = _floor(workspace, calls)
    return {
        "files": files,
        "calls": calls,
        "runner": runner,
        "off": off,
        "on": on,
        "floorMs": floor,
        "load": os.getloadavg()[0],
    }


def table(results: dict[str, Any]) -> str:
    """The figures as text."""
    off, on = results["off"], results["on"]
    base = off["true"]["p50Ms"]
    return "\n".join(
        [
            f"bash through the gateway on {results['files']} files "
            f"(runner {results['runner']}, {results['calls']} calls each):",
            f"  checkpoints off: bash true       p50 {base:8.2f} ms  "
            f"p90 {off['true']['p90Ms']:8.2f} ms",
            f"  checkpoints on:  first call          {on['firstMs']:8.1f} ms (reads the tree once)",
            f"  checkpoints on:  bash true       p50 {on['true']['p50Ms']:8.2f} ms  "
            f"p90 {on['true']['p90Ms']:8.2f} ms  (+{on['true']['p50Ms'] - base:.2f} ms)",
            f"  checkpoints on:  one file changed p50 {on['change']['p50Ms']:8.2f} ms  "
            f"p90 {on['change']['p90Ms']:8.2f} ms  "
            f"(+{on['change']['p50Ms'] - off['change']['p50Ms']:.2f} ms)",
            f"  floor: a bare scandir + lstat walk of the tree  {results['floorMs']:8.2f} ms "
            f"(load average {results['load']:.1f} on {os.cpu_count()} CPUs)",
        ]
    )


def main() -> None:
    """Run the bench and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--runner", default="local")
    args = parser.parse_args()
    print(table(bench_undo(args.files, args.calls, args.runner)))


if __name__ == "__main__":
    main()
