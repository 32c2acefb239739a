"""Benchmark of the execution runners, through the real daemon over stdio.

Usage: ``python tests/bench/runners.py [--quick]`` (prints a table and JSON), or call
``bench_runners``.

For each runner (``execution.tool_runner``) it times ``tools/call read_file`` of a
two-line file — a trivial tool, so the figure is the runner's own cost — and reports
the overhead against the ``local`` runner measured in the same run:

- ``warm``: ``warm_workers = 1`` and a pause before each call long enough for the pool
  to have its worker ready (an agent's think time between calls is far longer); its
  overhead is against the local runner paced the same way, since a pause alone makes
  the next call slower (idle CPUs, cold caches);
- ``cold``: ``warm_workers = 0``, every call starts its worker (subprocess and bwrap: a
  fork from the fork server; docker: a new container);
- ``back_to_back``: ``warm_workers = 1``, calls sent one after the other with no pause,
  so the pool refills while calls wait.

Then a ``python_repl`` round trip (``1 + 1``) on the local runner, if the tool exists.
Runners that cannot run here (no bwrap, no Docker engine) are reported as skipped.
Standard library only (plus toold for the Docker image), with the bench's own framing
client (``lsp.py``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsp import Client, initialize_params, toold_argv

TARGETS_MS = {"subprocess": 30.0, "subprocess_warm": 3.0, "bwrap": 50.0}
SETTLE_S = {"subprocess": 0.05, "bwrap": 0.05, "docker": 2.0}
"""Pause before a warm call: time for the pool's refill (a fork, or a container start)."""


@dataclass(frozen=True)
class Plan:
    local: int
    warm: int
    cold: int
    back_to_back: int
    container_factor: float  # docker calls are slow; do fewer of them


QUICK = Plan(local=50, warm=10, cold=8, back_to_back=10, container_factor=0.5)
FULL = Plan(local=300, warm=40, cold=30, back_to_back=40, container_factor=0.4)


class Daemon(Client):
    """``toold serve`` on one workspace with the bench's blocking client (lsp.py)."""

    stop_timeout_s = 15.0

    def __init__(self, workspace: Path) -> None:
        super().__init__(toold_argv(workspace))
        self.initialize(initialize_params(workspace))

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        return self.request("tools/call", {"name": name, "arguments": arguments, "origin": "user"})


def _configure(workspace: Path, runner: str, warm_workers: int) -> None:
    text = f'[execution]\ntool_runner = "{runner}"\nwarm_workers = {warm_workers}\n'
    (workspace / "toold.toml").write_text(text, encoding="utf-8")


def _summary(samples_s: list[float]) -> dict[str, Any]:
    ordered = sorted(samples_s)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * len(ordered)))]
    return {
        "calls": len(samples_s),
        "p50_ms": round(statistics.median(samples_s) * 1000, 3),
        "p99_ms": round(p99 * 1000, 3),
        "min_ms": round(ordered[0] * 1000, 3),
    }


def _timed_calls(
    daemon: Daemon, count: int, settle_s: float, name: str = "read_file", args: Any = None
) -> list[float]:
    args = args if args is not None else {"file_path": "small.txt"}
    samples = []
    for _ in range(count):
        if settle_s:
            time.sleep(settle_s)
        start = time.perf_counter()
        result = daemon.call(name, args)
        samples.append(time.perf_counter() - start)
        if result.get("isError"):
            raise RuntimeError(f"{name} failed: {result['content']}")
    return samples


def _measure(workspace: Path, runner: str, warm_workers: int, count: int, settle_s: float) -> Any:
    _configure(workspace, runner, warm_workers)
    with Daemon(workspace) as daemon:
        first = daemon.call("read_file", {"file_path": "small.txt"})  # binds, starts the pool
        if first.get("isError"):
            return {"skipped": first["content"]}
        return _summary(_timed_calls(daemon, count, settle_s))


def _unavailable(runner: str) -> str | None:
    if runner == "bwrap" and shutil.which("bwrap") is None:
        return "bubblewrap is not installed"
    if runner == "docker":
        try:
            from toold.sandbox.docker import engine_socket_problem, ensure_image
        except ImportError as exc:
            return f"toold.sandbox.docker unavailable: {exc}"
        problem = engine_socket_problem()
        if problem is not None:
            return f"no Docker engine: {problem}"
        try:
            ensure_image()
        except Exception as exc:
            return f"cannot build the sandbox image: {exc}"
    return None


def bench_runners(quick: bool) -> dict[str, Any]:
    """Per-call overhead of each runner on a trivial tool, and a python_repl round trip."""
    plan = QUICK if quick else FULL
    results: dict[str, Any] = {
        "mode": "quick" if quick else "full",
        "tool": "read_file of a two-line file",
        "targets_ms": TARGETS_MS,
        "baselines": {},
    }
    with tempfile.TemporaryDirectory(prefix="toold-bench-runners-") as tmp:
        workspace = Path(tmp).resolve()
        (workspace / "small.txt").write_text("alpha\nbeta\n", encoding="utf-8")
        local = _measure(workspace, "local", 0, plan.local, 0.0)
        results["local"] = local
        for runner in ("subprocess", "bwrap", "docker"):
            problem = _unavailable(runner)
            if problem is not None:
                results[runner] = {"skipped": problem}
                continue
            factor = plan.container_factor if runner == "docker" else 1.0
            warm, cold, b2b = (
                max(3, round(n * factor)) for n in (plan.warm, plan.cold, plan.back_to_back)
            )
            settle = SETTLE_S[runner]
            # A pause before each call costs by itself (idle CPUs, cold caches): the warm
            # figure is compared with the local runner paced the same way.
            paced = _measure(workspace, "local", 0, warm, settle)
            results["baselines"][f"local_paced_{settle:g}s"] = paced
            entry: dict[str, Any] = {
                "warm": _measure(workspace, runner, 1, warm, settle),
                "cold": _measure(workspace, runner, 0, cold, 0.0),
                "back_to_back": _measure(workspace, runner, 1, b2b, 0.0),
            }
            for kind, base in (("warm", paced), ("cold", local), ("back_to_back", local)):
                if "p50_ms" in entry[kind]:
                    entry[kind]["overhead_ms"] = round(entry[kind]["p50_ms"] - base["p50_ms"], 3)
            results[runner] = entry
        results["python_repl"] = _bench_repl(workspace, plan)
    return results


def _bench_repl(workspace: Path, plan: Plan) -> dict[str, Any]:
    _configure(workspace, "local", 0)
    with Daemon(workspace) as daemon:
        names = {t["name"] for t in daemon.request("tools/list", {})["tools"]}
        if "python_repl" not in names:
            return {"skipped": "no python_repl tool in this build"}
        daemon.call("python_repl", {"code": "x = 1"})  # starts its interpreter
        samples = _timed_calls(daemon, plan.warm * 2, 0.0, "python_repl", {"code": "x + 1"})
        return {"runner": "local", **_summary(samples)}


def table(results: dict[str, Any]) -> str:
    """A plain-text table of the figures."""
    lines = [f"{'runner':<12} {'mode':<13} {'p50 ms':>9} {'p99 ms':>9} {'overhead ms':>12}"]
    local = results["local"]
    lines.append(f"{'local':<12} {'':<13} {local['p50_ms']:>9.2f} {local['p99_ms']:>9.2f}")
    for name, paced in results["baselines"].items():
        mode = name.removeprefix("local_")
        lines.append(f"{'local':<12} {mode:<13} {paced['p50_ms']:>9.2f} {paced['p99_ms']:>9.2f}")
    for runner in ("subprocess", "bwrap", "docker"):
        entry = results[runner]
        if "skipped" in entry:
            lines.append(f"{runner:<12} skipped: {entry['skipped']}")
            continue
        for kind in ("warm", "cold", "back_to_back"):
            row = entry[kind]
            if "skipped" in row:
                lines.append(f"{runner:<12} {kind:<13} skipped: {row['skipped']}")
                continue
            lines.append(
                f"{runner:<12} {kind:<13} {row['p50_ms']:>9.2f} {row['p99_ms']:>9.2f} "
                f"{row['overhead_ms']:>12.2f}"
            )
    repl = results["python_repl"]
    if "skipped" in repl:
        lines.append(f"{'python_repl':<12} skipped: {repl['skipped']}")
    else:
        lines.append(
            f"{'python_repl':<12} {'local':<13} {repl['p50_ms']:>9.2f} {repl['p99_ms']:>9.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls")
    args = parser.parse_args(argv)
    results = bench_runners(args.quick)
    print(table(results))
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
