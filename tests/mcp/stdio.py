"""``toold mcp`` on stdio as the mcp SDK's client starts it, with this test's environment.

The SDK's ``stdio_client`` hands a server only a few variables (PATH, HOME...) unless
told otherwise: here the process gets ``os.environ``, so it finds the test's runtime
folder (tests/mcp/conftest.py) and the engines it starts are the test's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp.client.stdio import StdioServerParameters


def toold_mcp(
    workspace: Path, *args: str, env: dict[str, str] | None = None
) -> StdioServerParameters:
    """``python -m toold mcp --workspace WORKSPACE ARGS...`` with ``env`` (default: this
    process's environment)."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "toold", "mcp", "--workspace", os.fspath(workspace), *args],
        env=dict(os.environ) if env is None else env,
    )
