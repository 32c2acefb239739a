"""The JSON-RPC half of a call, and what the event loop alone costs against the floor.

Usage: ``python tests/bench/rpcpath.py [--calls N] [--rounds N]`` (prints both figures).

- ``rpc_half``: an ``LspSession`` in process over a ``StreamReader`` fed whole frames and
  a ``FrameWriter`` writing into memory, ``ToolGateway.call`` replaced by one that returns
  a fixed outcome (a 20-line file's text), ``calls`` sequential ``tools/call read_file``:
  frame in, decode, dispatch, the session's handler, pydantic params and result, JSON
  out. What is timed is what toold adds around ``gateway.call`` (percall.py times
  ``gateway.call`` itself; peers.py and floor.py the whole call over stdio). Per request:
  p50 and minimum wall time, and CPU time.
- ``loop_floor``: floor_server.py (blocking stdlib) against asyncio_floor_server.py (the
  same work on asyncio, a task per request, and ``--inline``), interleaved rounds as
  floor.py runs them: the ratio an asyncio daemon reaches before doing any work of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from floor import FLOOR_SERVER, _rate, spawn
from lsp import frame

HERE = Path(__file__).resolve().parent
ASYNCIO_FLOOR = HERE / "asyncio_floor_server.py"
TEXT = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(20))


class Answers:
    """The session's output: hands each written frame to the request waiting for it."""

    def __init__(self) -> None:
        self.waiting: asyncio.Future[bytes] | None = None

    def write(self, data: bytes) -> None:
        if self.waiting is not None and not self.waiting.done():
            self.waiting.set_result(data)

    def flush(self) -> None:
        pass


async def rpc_half(workspace: Path, calls: int) -> dict[str, float]:
    """Per-request figures of the JSON-RPC half, in microseconds."""
    from toold.gateway import ToolGateway
    from toold.outcome import ToolOutcome
    from toold.server import create_server
    from toold.transport import FrameWriter

    session = create_server(workspace)
    reader = asyncio.StreamReader()
    answers = Answers()
    serving = asyncio.ensure_future(session.serve(reader, FrameWriter(None, answers)))  # type: ignore[arg-type]
    loop = asyncio.get_running_loop()

    async def request(msg_id: int, method: str, params: dict[str, Any]) -> bytes:
        answers.waiting = loop.create_future()
        reader.feed_data(
            frame({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        )
        return await answers.waiting

    await request(
        1, "initialize", {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {}}
    )
    reader.feed_data(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
    await session.ready()
    outcome = ToolOutcome(content=TEXT)

    async def answered_at_once(
        self: ToolGateway, name: str, arguments: Any, context: Any = None
    ) -> ToolOutcome:
        return outcome

    real = ToolGateway.call
    ToolGateway.call = answered_at_once  # type: ignore[method-assign]
    try:
        params = {"name": "read_file", "arguments": {"file_path": "small.txt"}}
        for n in range(calls // 10):  # warm-up: imports, pydantic's first validations
            await request(10 + n, "tools/call", params)
        times = []
        cpu = time.process_time()
        for n in range(calls):
            start = time.perf_counter()
            answer = await request(calls + n, "tools/call", params)
            times.append(time.perf_counter() - start)
        cpu = time.process_time() - cpu
        if b"quick brown fox" not in answer:
            raise RuntimeError(f"unexpected answer {answer[:200]!r}")
    finally:
        ToolGateway.call = real  # type: ignore[method-assign]
        reader.feed_eof()
        session.request_stop(0)
        await serving
    return {
        "p50_us": round(statistics.median(times) * 1e6, 1),
        "min_us": round(min(times) * 1e6, 1),
        "cpu_us": round(cpu / calls * 1e6, 1),
    }


def loop_floor(workspace: Path, small: Path, rounds: int, calls: int) -> dict[str, Any]:
    """Calls per second of the stdlib floor and of the asyncio floor, interleaved."""
    python = sys.executable
    servers = {
        "floor": [python, os.fspath(FLOOR_SERVER)],
        "asyncio": [python, os.fspath(ASYNCIO_FLOOR)],
        "asyncio_inline": [python, os.fspath(ASYNCIO_FLOOR), "--inline"],
    }
    rates: dict[str, list[float]] = {key: [] for key in servers}
    clients = {key: spawn(argv, key, workspace) for key, argv in servers.items()}
    try:
        order = list(clients)
        for n in range(rounds + 1):
            for key in order if n % 2 else reversed(order):
                client = clients[key]
                rate = _rate(
                    lambda c=client: c.request("bench/readFile", {"path": os.fspath(small)}), calls
                )
                if n:  # round 0 warms every server up
                    rates[key].append(rate)
    finally:
        for client in clients.values():
            client.stop()
    floor = rates["floor"]
    out: dict[str, Any] = {"floor_calls_per_s": round(statistics.median(floor))}
    for key in ("asyncio", "asyncio_inline"):
        out[f"{key}_calls_per_s"] = round(statistics.median(rates[key]))
        out[f"{key}_ratio"] = round(
            statistics.median(a / f for a, f in zip(rates[key], floor, strict=True)), 2
        )
    return out


def main() -> int:
    """Run both measurements and print them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000, help="requests for the JSON-RPC half")
    parser.add_argument("--rounds", type=int, default=6, help="interleaved rounds of the floors")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="toold-rpcpath-") as tmp:
        workspace = Path(tmp).resolve()
        small = workspace / "small.txt"
        small.write_text(TEXT, encoding="utf-8")
        half = asyncio.run(rpc_half(workspace, args.calls))
        print(
            f"JSON-RPC half per request: p50 {half['p50_us']} µs, min {half['min_us']} µs, "
            f"CPU {half['cpu_us']} µs"
        )
        floors = loop_floor(workspace, small, args.rounds, 1000)
    print(
        f"stdlib floor {floors['floor_calls_per_s']} calls/s; asyncio, a task per request "
        f"{floors['asyncio_calls_per_s']} (×{floors['asyncio_ratio']}), inline "
        f"{floors['asyncio_inline_calls_per_s']} (×{floors['asyncio_inline_ratio']})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
