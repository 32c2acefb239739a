"""``toold undo [ID]`` and ``toold checkpoints [diff ID]``: checkpoints from a shell.

They attach like every command (standard library only) and speak the wire contract's
``checkpoints/*`` methods, so what they restore is exactly what an editor would.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from toold_protocol.errors import CONFLICT


def checkpoints_command(client: Any, diff: str | None, as_json: bool) -> int:
    """List the checkpoints, newest first, or print one's diff to now."""
    if diff is not None:
        print(client.request("checkpoints/diff", {"id": diff})["diff"], end="")
        return 0
    entries = client.request("checkpoints/list", {})["checkpoints"]
    if as_json:
        print(json.dumps(entries, indent=2, ensure_ascii=False))
        return 0
    for entry in reversed(entries):
        mark = " (undone)" if entry["undone"] else ""
        paths = ", ".join(entry["paths"])
        print(f"{entry['id']}\t{entry['time']}\t{entry['tool']} ({entry['origin']}){mark}\t{paths}")
    return 0


def undo_command(client: Any, checkpoint_id: str | None, force: bool, as_json: bool) -> int:
    """Restore the files as they were before ``checkpoint_id`` (the last call by default)."""
    params: dict[str, Any] = {"force": force}
    if checkpoint_id is not None:
        params["id"] = checkpoint_id
    try:
        done = client.request("checkpoints/restore", params)
    except Exception as exc:
        if getattr(exc, "code", None) != CONFLICT:
            raise
        # The message names the files and why: changed outside toold, or toold.toml.
        message = getattr(exc, "message", str(exc))
        print(
            f"toold: {message} (nothing restored; toold undo --force restores anyway)",
            file=sys.stderr,
        )
        return 1
    if as_json:
        print(json.dumps(done, indent=2, ensure_ascii=False))
    else:
        restored = ", ".join(done["restored"])
        print(f"restored {restored} (redo: toold undo {done['checkpoint']['id']})")
    return 0
