"""Writes through the gateway, as checkpoints and the audit log grow: the cost per write
must not grow with history (issue 28).

Usage: ``python tests/bench/writes.py [--writes N] [--large N] [--out FILE]`` (prints a
table, writes JSON); ``bench_writes(writes, large)`` returns the same figures.

In process, on a temporary workspace bound as the daemon binds it (toold.assembly.bind,
default configuration), each call goes through ``gateway.call`` with origin ``user``,
the path every front end's tools/call takes: validation, the guard, the checkpoint's
snapshot and record, the write (temp file + rename), and the call's one audit line
(written after the call, on the loop). The user state folder (the checkpoint key)
is a temporary one too. ``--runner local`` runs the tool in the daemon's process, which
leaves out the sandbox worker's round trip (``auto``: bwrap or a worker process).

1. ``--writes`` (default 10,000) write_file calls of 1 KiB, each a new file (so each
   records a checkpoint), timed per block of 1,000: mean and p99 per write. Flat means
   the index, the audit log and the bound cost the same at the last block as at the first.
2. ``--large`` (default 100) write_file calls of 64 KiB of base64 (the audit keeps an
   excerpt and a digest of each, redaction reads the excerpt only): time per write.
3. The sizes of ``.toold/audit.jsonl`` and ``.toold/checkpoints/index.jsonl`` after, and
   the checkpoints kept (``checkpoints.max_bytes`` drops the oldest).

Figures only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results-writes.json"
BLOCK = 1000
CONTENT = "".join(f"written line {i:04d} of the benchmark payload.........\n" for i in range(18))
CONTENT = (CONTENT * 2)[:1024]


def _block(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {
        "writes": len(seconds),
        "meanMs": round(statistics.fmean(seconds) * 1000, 3),
        "p50Ms": round(ordered[len(ordered) // 2] * 1000, 3),
        "p99Ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 3),
    }


async def _run(workspace: Path, writes: int, large: int, runner: str | None) -> dict[str, Any]:
    from toold.assembly import bind
    from toold.tools.context import CallContext

    def refused(message: str) -> None:
        raise RuntimeError(f"the configuration was refused: {message}")

    overrides = None if runner is None else {"execution": {"tool_runner": runner}}
    state = bind(workspace, overrides, lambda *_: None, refused)
    context = CallContext(origin="user")
    try:

        async def write(path: str, content: str) -> float:
            started = time.perf_counter()
            outcome = await state.gateway.call(
                "write_file", {"file_path": path, "content": content}, context
            )
            took = time.perf_counter() - started
            if outcome.is_error:
                raise RuntimeError(f"write_file {path}: {outcome.content}")
            return took

        blocks = []
        seconds: list[float] = []
        for i in range(writes):
            seconds.append(await write(f"d{i // BLOCK}/f{i}.txt", CONTENT))
            if len(seconds) == BLOCK or i == writes - 1:
                blocks.append({"after": i + 1, **_block(seconds)})
                seconds = []
        blob = base64.b64encode(random.Random(28).randbytes(48 * 1024)).decode()
        await write("big/warm-up.b64", blob)  # loads detect-secrets' plugins: not counted
        big = [await write(f"big/b{i}.b64", blob[i:] + blob[:i]) for i in range(large)]
        await asyncio.sleep(0)  # the last audit lines go out after their call
        await asyncio.sleep(0)
        store = state.gateway.checkpoints
        kept = len(store.entries()) if store is not None else 0
    finally:
        await state.aclose()
    files = {
        name: os.path.getsize(workspace / ".toold" / name)
        for name in ("audit.jsonl", "checkpoints/index.jsonl", "checkpoints/index.json")
        if (workspace / ".toold" / name).exists()
    }
    return {
        "oneKiB": blocks,
        "base64_64KiB": _block(big) if big else None,
        "bytes": files,
        "checkpointsKept": kept,
    }


def bench_writes(
    writes: int = 10_000, large: int = 100, runner: str | None = None
) -> dict[str, Any]:
    """The figures, from a fresh temporary workspace and user state folder (``runner``:
    ``execution.tool_runner``; None keeps the default)."""
    with tempfile.TemporaryDirectory(prefix="toold-writes-") as scratch:
        root = Path(scratch)
        (root / "ws").mkdir()
        os.environ["TOOLD_STATE_DIR"] = str(root / "state")
        results = asyncio.run(_run(root / "ws", writes, large, runner))
    results["runner"] = runner or "default"
    results["python"] = sys.version.split()[0]
    results["cpus"] = os.cpu_count()
    return results


def table(results: dict[str, Any]) -> str:
    """The figures as text."""
    lines = [f"1 KiB write_file through the gateway (runner: {results['runner']}), per block:"]
    lines += [
        f"  writes {b['after'] - b['writes'] + 1:>6}-{b['after']:<6} mean {b['meanMs']:7.3f} ms"
        f"  p50 {b['p50Ms']:7.3f} ms  p99 {b['p99Ms']:7.3f} ms  ({1000 / b['meanMs']:.0f}/s)"
        for b in results["oneKiB"]
    ]
    big = results["base64_64KiB"]
    if big:
        lines.append(
            f"64 KiB base64 write_file: mean {big['meanMs']:.3f} ms  p50 {big['p50Ms']:.3f} ms"
            f"  p99 {big['p99Ms']:.3f} ms ({big['writes']} writes)"
        )
    lines.append(
        "after: "
        + ", ".join(f"{name} {size:,} bytes" for name, size in results["bytes"].items())
        + f"; {results['checkpointsKept']:,} checkpoints kept"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the bench and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writes", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=100)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--runner", help="execution.tool_runner (auto, local, subprocess, bwrap); default: toold's"
    )
    args = parser.parse_args(argv)
    results = bench_writes(args.writes, args.large, args.runner)
    print(table(results))
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
