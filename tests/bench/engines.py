"""Benchmark: many fresh workspaces on the default path, and what they leave running.

Usage: ``python tests/bench/engines.py [--workspaces 60] [--ci]`` (prints JSON).

Methodology: one ``toold call read_file`` in each of N fresh workspaces, one after the
other, as a CI job or a test suite drives toold, with the engine on (TOOLD_NO_DAEMON
unset), the default configuration (no toold.toml) and a runtime folder of the bench's
own. ``CI`` is unset unless ``--ci`` (then ``CI=true``). Once the last call returned
it waits (polling the engines' pid locks, 60 s at most) until no more than
``daemon.max_idle_engines`` (8) engines run, then reports the engines left, their
resident memory (each engine's own ``/proc/self/statm``, from ``toold daemon list
--json``), the inotify instances they and the processes below them hold
(``anon_inode:inotify`` descriptors in ``/proc/PID/fd``), and the calls' wall times.
Every engine is stopped at the end (``toold daemon stop --all``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, os.fspath(REPO))

from tests.engine.footprint import footprint  # noqa: E402
from tests.engine.support import live_engines  # noqa: E402

CAP = 8
"""``daemon.max_idle_engines``' default."""


def bench_engines(workspaces: int = 60, ci: bool = False) -> dict[str, Any]:
    """Touch ``workspaces`` fresh folders with ``toold call read_file``; the figures."""
    runtime = Path(tempfile.mkdtemp(prefix="toold-b-", dir="/tmp"))
    root = Path(tempfile.mkdtemp(prefix="toold-bench-ws-"))
    env = {**os.environ, "TOOLD_RUNTIME_DIR": os.fspath(runtime)}
    env.pop("TOOLD_NO_DAEMON", None)
    env.pop("CI", None)
    if ci:
        env["CI"] = "true"
    argv = [sys.executable, "-P", "-m", "toold"]
    walls = []
    try:
        for index in range(workspaces):
            folder = root / f"ws{index:03d}"
            folder.mkdir()
            (folder / "a.txt").write_text("alpha\n")
            begin = time.perf_counter()
            done = subprocess.run(
                [*argv, "call", "read_file", '{"file_path": "a.txt"}'],
                cwd=folder,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            walls.append(time.perf_counter() - begin)
            if done.returncode != 0:
                logs = "".join(log.read_text()[-3000:] for log in runtime.glob("*.log*"))
                raise RuntimeError(f"call {index} failed: {done.stderr}\n{logs}")
        settled = time.perf_counter()
        deadline = settled + 60
        while len(live_engines(runtime)) > CAP and time.perf_counter() < deadline:
            time.sleep(0.05)
        settle_s = time.perf_counter() - settled
        listed = json.loads(
            subprocess.run(
                [*argv, "daemon", "list", "--json"],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        rss, instances = footprint(listed)
        return {
            "workspaces": workspaces,
            "ci": ci,
            "enginesLeft": len(listed),
            "cap": CAP,
            "rssMiB": round(rss / 2**20, 1),
            "rssPerEngineMiB": round(rss / 2**20 / max(len(listed), 1), 1),
            "inotifyInstances": instances,
            "callMedianS": round(statistics.median(walls), 3),
            "callTotalS": round(sum(walls), 1),
            "settleS": round(settle_s, 2),
        }
    finally:
        subprocess.run(
            [*argv, "daemon", "stop", "--all"], env=env, capture_output=True, check=False
        )
        shutil.rmtree(runtime, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    """Run the bench and print its figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspaces", type=int, default=60)
    parser.add_argument("--ci", action="store_true", help="with CI=true")
    args = parser.parse_args()
    print(json.dumps(bench_engines(args.workspaces, args.ci), indent=2))


if __name__ == "__main__":
    main()
