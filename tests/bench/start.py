"""Benchmark of start-up through the shared engine, against a bare pygls server.

Usage: ``python tests/bench/start.py [--quick]`` (prints a table and JSON), or call
``bench_start``.

Each round, interleaved so machine noise hits all three alike:

- ``bare``: spawn ``bare_pygls_server.py`` (the floor), time until ``initialize`` is
  answered;
- ``fresh``: ``toold serve`` on a new workspace (no engine yet: the relay spawns one),
  time until the first ``tools/list`` is answered (that result needs the bound workspace);
- ``attach``: ``toold serve`` again on the same workspace, whose engine now runs, time
  until its first ``tools/list`` is answered.

Reported: medians and the extra over ``bare`` (targets: fresh within +100 ms, attach
within +30 ms; issue 28), and the fresh engine's CPU time (user + system, from
``/proc``) at its first ``tools/list`` answer: on a machine other work keeps busy the
wall times spread by tens of percent, the CPU an engine spends to get there much less.

``toold`` is the console script installed beside this
interpreter, as ``bare`` is this interpreter: a version manager's shim found first on
PATH (pyenv's runs bash and ``pyenv exec``, about 70 ms) would be counted against toold
alone (``--script`` names another). Engines run under a runtime folder of the bench's
own and are stopped at the end. Standard library only, with the bench's own framing
client.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsp import Client, initialize_params, private_engines, toold_cli

HERE = Path(__file__).resolve().parent
BARE_SERVER = HERE / "bare_pygls_server.py"
TARGETS_MS = {"fresh": 100.0, "attach": 30.0}
"""Extra over bare pygls the issue allows each."""


def first_result_ms(
    argv: list[str], workspace: Path, tools_list: bool, cpu: list[float] | None = None
) -> float:
    """Spawn ``argv``, initialize, optionally ask tools/list: ms until the last answer
    (and, given ``cpu``, the workspace engine's CPU ms by then appended to it)."""
    begin = time.perf_counter()
    client = Client(argv)
    try:
        client.initialize(initialize_params(workspace))
        if tools_list:
            client.request("tools/list", {})
        elapsed = (time.perf_counter() - begin) * 1000
        if cpu is not None and (used := engine_cpu_ms(workspace)) is not None:
            cpu.append(used)
        return elapsed
    finally:
        client.stop()


def engine_cpu_ms(workspace: Path) -> float | None:
    """User + system CPU ms the engine of ``workspace`` (the process running
    ``toold.engine --workspace`` it) used so far; None off Linux or with no engine."""
    wanted = ["--workspace", str(workspace)]
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
            if "toold.engine" not in argv or not _holds(argv, wanted):
                continue
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after the name, which may hold spaces
        return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")
    return None


def _holds(argv: list[str], run: list[str]) -> bool:
    return any(argv[i : i + len(run)] == run for i in range(len(argv)))


def console_script() -> list[str]:
    """The ``toold`` console script beside this interpreter (else toold_cli())."""
    beside = Path(sys.executable).parent / "toold"
    return [str(beside)] if beside.is_file() else toold_cli()


def bench_start(rounds: int, script: list[str] | None = None) -> dict[str, Any]:
    """``rounds`` interleaved rounds of bare, fresh and attach; medians in ms."""
    samples: dict[str, list[float]] = {"bare": [], "fresh": [], "attach": []}
    engine_cpu: list[float] = []
    serve = [*(script or console_script()), "serve", "--workspace"]
    with private_engines(), tempfile.TemporaryDirectory(prefix="toold-start-") as scratch:
        for i in range(rounds):
            workspace = Path(scratch, f"ws{i}").resolve()
            workspace.mkdir()
            (workspace / "small.txt").write_text("one\ntwo\n", encoding="utf-8")
            bare = [sys.executable, str(BARE_SERVER)]
            samples["bare"].append(first_result_ms(bare, workspace, tools_list=False))
            argv = [*serve, str(workspace)]
            samples["fresh"].append(first_result_ms(argv, workspace, True, engine_cpu))
            samples["attach"].append(first_result_ms(argv, workspace, tools_list=True))
    medians = {name: round(statistics.median(values), 1) for name, values in samples.items()}
    return {
        "rounds": rounds,
        "toold": serve[0],
        "median_ms": medians,
        "extra_over_bare_ms": {
            name: round(medians[name] - medians["bare"], 1) for name in TARGETS_MS
        },
        "targets_extra_ms": TARGETS_MS,
        "fresh_engine_cpu_ms": round(statistics.median(engine_cpu), 1) if engine_cpu else None,
        "samples_ms": {name: [round(v, 1) for v in values] for name, values in samples.items()},
    }


def table(results: dict[str, Any]) -> str:
    """The medians and extras as text."""
    medians, extra = results["median_ms"], results["extra_over_bare_ms"]
    lines = [f"{'start':<8} {'median ms':>10} {'extra ms':>9} {'target':>7}"]
    lines.append(f"{'bare':<8} {medians['bare']:>10}")
    for name, target in TARGETS_MS.items():
        lines.append(f"{name:<8} {medians[name]:>10} {extra[name]:>+9} {target:>+7}")
    if results["fresh_engine_cpu_ms"] is not None:
        lines.append(f"fresh engine CPU to its first answer: {results['fresh_engine_cpu_ms']} ms")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 rounds instead of 15")
    parser.add_argument("--script", help="the toold command to run (default: beside python)")
    args = parser.parse_args()
    results = bench_start(5 if args.quick else 15, [args.script] if args.script else None)
    print(table(results))
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
