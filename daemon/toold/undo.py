"""``toold undo [ID]`` and ``toold checkpoints [diff ID]``: checkpoints from a shell.

They attach like every command (standard library only) and speak the wire contract's
``checkpoints/*`` methods, so what they restore is exactly what an editor would.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from toold.terminal import one_line, visible
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
        what = f"{one_line(entry['tool'])} ({one_line(entry['origin'])}){mark}"
        paths = one_line(", ".join(entry["paths"]))
        columns = [one_line(entry["id"]), one_line(entry["time"]), what, paths]
        if entry.get("uncovered"):
            columns.append(uncovered_column(entry["uncovered"]))
        print("\t".join(columns))
    return 0


UNCOVERED_SHOWN = 80
"""Characters of a checkpoint's ``uncovered`` note the listing shows (--json has it all)."""


def uncovered_column(note: str) -> str:
    """A shell call's ``uncovered`` note, short: ``not covered: 2 ignored paths (...)``."""
    text = one_line(note.removeprefix("undo does not cover "))
    if len(text) > UNCOVERED_SHOWN:
        text = text[: UNCOVERED_SHOWN - 1] + "…"
    return f"not covered: {text}"


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
        message = one_line(getattr(exc, "message", str(exc)))
        print(
            f"toold: {message} (nothing restored; toold undo --force restores anyway)",
            file=sys.stderr,
        )
        return 1
    if as_json:
        print(json.dumps(done, indent=2, ensure_ascii=False))
    else:
        restored = one_line(", ".join(done["restored"]))
        print(f"restored {restored} (redo: toold undo {done['checkpoint']['id']})")
        if done.get("diagnostics"):
            print(diagnostics_text(done["diagnostics"]))
    return 0


def diagnostics_text(found: dict[str, Any]) -> str:
    """A restore's diagnostics worded as an edit's are (loaded only when there are some:
    the command otherwise starts on the standard library alone)."""
    from toold.diagnostics.report import render
    from toold_protocol.models import DiagnosticsDelta

    return visible(render(DiagnosticsDelta.model_validate(found)))
