"""The floor for bench.py: a bare pygls 2 server with one custom request.

``bench/readFile`` takes ``{"path": "<absolute path>"}`` and returns ``{"text": ...}``,
the same work toold's read_file tool does minus validation, sandboxing and formatting.
Run as ``python tests/bench/bare_pygls_server.py``; it speaks LSP framing on stdio.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pygls.lsp.server import LanguageServer

server = LanguageServer("bare", "0")


@server.feature("bench/readFile")
def read_file(params: Any) -> dict[str, str]:
    """Read a UTF-8 file and return its text."""
    return {"text": Path(params.path).read_text(encoding="utf-8")}


if __name__ == "__main__":
    server.start_io()
