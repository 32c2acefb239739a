"""Benchmark of the network proxy: 100 small GETs from inside the sandbox.

Usage: ``python tests/bench/network.py [--count 100]`` prints a table and JSON.

Through bwrap: under docker, ``true`` means Docker's bridge network, from which the
host's 127.0.0.1 (the only address this bench may target) cannot be reached at all.

One bash call per configuration runs a Python loop of ``count`` sequential HTTP GETs
(urllib, a new connection each, as pip and curl make) to a small origin on the host's
127.0.0.1, timing each inside the sandbox:

- ``open``: ``execution.network = true``, the host's network, straight to the origin;
- ``proxy``: ``[execution.network] allow = ["bench.test"]``: the forwarder on the
  sandbox's loopback, the Unix socket, the daemon's proxy (judge, resolve through the
  test resolver, connect), the origin.

The ratio is proxy over open (per GET, p50 and mean). Traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.calls import user_call
from toold.config import TooldConfig
from toold.sandbox.network.policy import TEST_HOSTS
from toold.sandbox.runners import make_runner
from toold.tools.registry import BuiltinToolProvider
from toold.tools.runtime import ToolRuntime
from toold.tools.toolset import ToolSet

LOOP = """
import json, statistics, sys, time, urllib.request
url, count = sys.argv[1], int(sys.argv[2])
times = []
for _ in range(count):
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=20) as answer:
        assert answer.read() == b"ok"
    times.append((time.perf_counter() - started) * 1000)
print(json.dumps({"p50_ms": statistics.median(times), "mean_ms": statistics.fmean(times),
                  "max_ms": max(times), "total_ms": sum(times)}))
"""


def _origin(folder: Path) -> tuple[subprocess.Popen[bytes], int]:
    """``python -m http.server`` serving ``ok`` from ``folder``, in a process of its own
    (in this one it would contend with the proxy's thread for the GIL)."""
    (folder / "ok").write_bytes(b"ok")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [sys.executable, "-m", "http.server", "-b", "127.0.0.1", "-d", str(folder), str(port)]
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return server, port
        time.sleep(0.02)
    server.kill()
    raise SystemExit("the origin server did not start")


def _measure(runner_kind: str, network: Any, workspace: Path, url: str, count: int) -> Any:
    config = TooldConfig.model_validate(
        {"execution": {"tool_runner": runner_kind, "network": network}}
    )

    async def run() -> Any:
        runner = make_runner(config, workspace)
        if runner.problem is not None:
            raise SystemExit(f"the {runner_kind} runner cannot run here: {runner.problem}")
        toolset = ToolSet(BuiltinToolProvider(ToolRuntime(workspace, config)).get_tools())
        try:
            command = f"python3 loop.py {url} {count}"
            return await user_call(toolset, "bash", {"command": command}, runner=runner)
        finally:
            await runner.close()

    outcome = asyncio.run(run())
    if outcome.exit_code != 0:
        raise SystemExit(f"the loop failed: {outcome.content}")
    return json.loads(outcome.content.strip().splitlines()[-1])


def bench_network(runner_kind: str, count: int) -> dict[str, Any]:
    """Per-GET figures with and without the proxy, and their ratio."""
    os.environ[TEST_HOSTS] = "bench.test=127.0.0.1"
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder).resolve() / "ws"
        workspace.mkdir()
        (workspace / "loop.py").write_text(LOOP, encoding="utf-8")
        server, port = _origin(Path(folder))
        try:
            open_ = _measure(runner_kind, True, workspace, f"http://127.0.0.1:{port}/ok", count)
            policy = {"allow": ["bench.test"]}
            proxied = _measure(
                runner_kind, policy, workspace, f"http://bench.test:{port}/ok", count
            )
        finally:
            server.kill()
            server.wait()
    ratio = {key: proxied[key] / open_[key] for key in ("p50_ms", "mean_ms")}
    return {"runner": runner_kind, "count": count, "open": open_, "proxy": proxied, "ratio": ratio}


def table(result: dict[str, Any]) -> str:
    """The figures as a small text table."""
    lines = [
        f"{result['count']} GETs through {result['runner']}",
        "config   p50 ms  mean ms  max ms",
    ]
    for name in ("open", "proxy"):
        row = result[name]
        lines.append(f"{name:<7} {row['p50_ms']:7.2f} {row['mean_ms']:8.2f} {row['max_ms']:7.2f}")
    ratio = result["ratio"]
    lines.append(f"ratio   {ratio['p50_ms']:7.2f} {ratio['mean_ms']:8.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the bench and print it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100)
    args = parser.parse_args(argv)
    result = bench_network("bwrap", args.count)
    print(table(result))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
