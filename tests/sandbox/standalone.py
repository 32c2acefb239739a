"""A standalone sandbox worker (``python -m toold.sandbox.worker``) driven on its pipes,
one JSON line each way, for the worker's own tests."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any


def start_worker() -> subprocess.Popen[bytes]:
    """A worker on two pipes, as the daemon starts one outside any sandbox."""
    argv = [sys.executable, "-m", "toold.sandbox.worker"]
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def exchange(proc: subprocess.Popen[bytes], request: dict[str, Any]) -> dict[str, Any]:
    """Send one request line; the worker's answer line."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(request).encode() + b"\n")
    proc.stdin.flush()
    answer: dict[str, Any] = json.loads(proc.stdout.readline())
    return answer
