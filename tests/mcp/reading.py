"""What the MCP tests read back: a result's one text block, and the workspace's audit log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp.types as types


def text(result: types.CallToolResult) -> str:
    """The text of a result that has exactly one block, a text one."""
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def audit(workspace: Path) -> list[dict[str, Any]]:
    """Every line of the workspace's audit log."""
    lines = (workspace / ".toold" / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]
