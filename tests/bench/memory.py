"""Resident memory of the workspace engine and the ``toold serve`` relay, against floors.

Usage: ``python tests/bench/memory.py [--quick] [--calls N]`` (prints JSON), or call
``bench_memory``.

For each process it reads VmRSS (/proc/PID/status) and Pss and USS (Private_Clean +
Private_Dirty) from /proc/PID/smaps_rollup, after ``SETTLE_S`` of quiet:

- floors: a bare interpreter (``python -c`` waiting on stdin, as a console script
  starts: with ``site``), the same without ``site`` (``python -I -S``: what is left
  when nothing at all is imported), a minimal asyncio Unix-socket server (stdlib
  only, one connection served), the least an engine's event loop can cost, and a bare
  pygls server (bare_pygls_server.py: initialized, one request answered), the least a
  server built on pygls, as the engine is, can cost;
- the engine: started by ``toold daemon start`` (workspace bound, no session), then
  idle with one editor session attached through ``toold serve``, then after
  ``--calls`` ``tools/call read_file`` through that session, then idle again once the
  editor is gone (what each engine left by one-shot commands holds for its idle time);
- the relay: the ``toold serve`` process, idle once the engine holds the editor's
  pipes, and after the calls (no byte passes through it, so it should not grow).

Targets (issue 24): engine ≤ 45 MiB and relay ≤ 10 MiB RSS idle; the ratios divide by
the floor each one is compared with. Engines run under a runtime folder of the bench's
own, stopped at the end. RSS counts shared pages (libpython, libc) in full; PSS shares
them out and USS leaves them out, so USS is what one more engine costs the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsp import Client, initialize_params, private_engines, toold_cli

BARE_PYGLS = Path(__file__).resolve().parent / "bare_pygls_server.py"
ENGINE_TARGET_MIB = 45.0
RELAY_TARGET_MIB = 10.0
SETTLE_S = 1.0
ASYNCIO_FLOOR = r"""
import asyncio, os, sys
async def serve(reader, writer):
    while line := await reader.readline():
        writer.write(line)
        await writer.drain()
async def main():
    path = sys.argv[1]
    server = await asyncio.start_unix_server(serve, path)
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
asyncio.run(main())
"""
"""The floor of an engine: an asyncio Unix-socket server (with the default executor's
thread, as the engine's pool has) serving one echo connection."""


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS, Pss and USS (private pages) of ``pid`` in KiB."""
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
    pss = uss = 0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        name, _, value = line.partition(":")
        if name == "Pss":
            pss = int(value.split()[0])
        elif name in ("Private_Clean", "Private_Dirty"):
            uss += int(value.split()[0])
    return {"rss_kib": rss, "pss_kib": pss, "uss_kib": uss}


def _mib(figures: dict[str, int]) -> dict[str, float]:
    return {key.replace("_kib", "_mib"): round(value / 1024, 1) for key, value in figures.items()}


def _settled(pid: int) -> dict[str, int]:
    time.sleep(SETTLE_S)  # a bench, not a test: let the process finish what it was doing
    return memory_kib(pid)


def _idle_process(argv: list[str]) -> dict[str, int]:
    """The memory of a process that waits on stdin once it said it is ready."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        if proc.stdout.readline() != b"ready\n":
            raise RuntimeError(f"{argv} did not start")
        return _settled(proc.pid)
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)
        proc.stdout.close()


def _asyncio_floor(scratch: Path) -> dict[str, int]:
    """The asyncio floor server, after one echo on one connection."""
    import socket

    path = scratch / "floor.sock"
    argv = [sys.executable, "-c", ASYNCIO_FLOOR, os.fspath(path)]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        if proc.stdout.readline() != b"ready\n":
            raise RuntimeError("the asyncio floor server did not start")
        with socket.socket(socket.AF_UNIX) as conn:
            conn.connect(os.fspath(path))
            conn.sendall(b"hello\n")
            conn.recv(64)
            return _settled(proc.pid)
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)
        proc.stdout.close()


def _pygls_floor(workspace: Path) -> dict[str, int]:
    """The bare pygls server, initialized, after one ``bench/readFile``."""
    with Client([sys.executable, os.fspath(BARE_PYGLS)], name="bare pygls") as bare:
        bare.initialize(initialize_params(workspace))
        bare.request("bench/readFile", {"path": os.fspath(workspace / "small.txt")})
        return _settled(bare.pid)


def floors(scratch: Path, workspace: Path) -> dict[str, dict[str, int]]:
    """The four floors (see the module docstring)."""
    wait = "import sys; print('ready', flush=True); sys.stdin.read()"
    return {
        "python": _idle_process([sys.executable, "-c", wait]),
        "python_no_site": _idle_process([sys.executable, "-I", "-S", "-c", wait]),
        "asyncio_server": _asyncio_floor(scratch),
        "bare_pygls_server": _pygls_floor(workspace),
    }


def _engine_pid(workspace: Path) -> int:
    done = subprocess.run(
        [*toold_cli(), "daemon", "status", "--json", "--workspace", os.fspath(workspace)],
        capture_output=True,
        check=True,
    )
    return int(json.loads(done.stdout)["pid"])


def measure_toold(workspace: Path, calls: int) -> dict[str, dict[str, int]]:
    """Engine and relay memory: engine alone, idle with a session, after ``calls`` calls."""
    ws = os.fspath(workspace)
    start = [*toold_cli(), "daemon", "start", "--workspace", ws]
    subprocess.run(start, check=True, capture_output=True)
    engine = _engine_pid(workspace)
    out = {"engine_started": _settled(engine)}
    with Client([*toold_cli(), "serve", "--workspace", ws], name="relay") as relay:
        relay.initialize(initialize_params(workspace))
        out["engine_idle_session"] = _settled(engine)
        out["relay_idle"] = memory_kib(relay.pid)
        params = {"name": "read_file", "arguments": {"file_path": "small.txt"}, "origin": "user"}
        for _ in range(calls):
            relay.request("tools/call", params)
        out[f"engine_after_{calls}_calls"] = _settled(engine)
        out[f"relay_after_{calls}_calls"] = memory_kib(relay.pid)
    out["engine_idle_after_sessions"] = _settled(engine)
    return out


def bench_memory(calls: int) -> dict[str, Any]:
    """Floors, engine and relay figures in MiB, the ratios and the targets."""
    with private_engines(), tempfile.TemporaryDirectory(prefix="toold-bench-ws-") as scratch:
        workspace = Path(scratch) / "ws"
        workspace.mkdir()
        (workspace / "small.txt").write_text("".join(f"line {i}\n" for i in range(20)))
        floor = floors(Path(scratch), workspace)
        toold = measure_toold(workspace, calls)
    engine_idle = toold["engine_idle_session"]["rss_kib"] / 1024
    relay_idle = toold["relay_idle"]["rss_kib"] / 1024
    return {
        "floors": {name: _mib(f) for name, f in floor.items()},
        "toold": {name: _mib(f) for name, f in toold.items()},
        "ratios_rss": {
            "engine_idle_over_asyncio_server": round(
                toold["engine_idle_session"]["rss_kib"] / floor["asyncio_server"]["rss_kib"], 2
            ),
            "engine_idle_over_bare_pygls": round(
                toold["engine_idle_session"]["rss_kib"] / floor["bare_pygls_server"]["rss_kib"], 2
            ),
            "relay_idle_over_python": round(
                toold["relay_idle"]["rss_kib"] / floor["python"]["rss_kib"], 2
            ),
            "relay_idle_over_python_no_site": round(
                toold["relay_idle"]["rss_kib"] / floor["python_no_site"]["rss_kib"], 2
            ),
        },
        "targets_mib": {"engine_idle": ENGINE_TARGET_MIB, "relay_idle": RELAY_TARGET_MIB},
        "meets_targets": {
            "engine_idle": engine_idle <= ENGINE_TARGET_MIB,
            "relay_idle": relay_idle <= RELAY_TARGET_MIB,
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000, help="tools/call read_file to make")
    args = parser.parse_args()
    print(json.dumps(bench_memory(args.calls), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
