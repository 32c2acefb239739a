"""Helpers for the ``toold run`` tests: run a script through the real CLI, read its lines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def toold_run(
    workspace: Path, script: dict[str, Any] | str, *extra: str, name: str = "script.json"
) -> subprocess.CompletedProcess[str]:
    """Write ``script`` next to the workspace (so grep never sees it) and run it."""
    path = workspace.parent / name
    path.write_text(script if isinstance(script, str) else json.dumps(script), encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "toold", "run", str(path), "--workspace", str(workspace), *extra],
        cwd=workspace.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )


def step_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The per-step lines (without the summary)."""
    return done.stdout.splitlines()[:-1]
