"""Diagnostics pulled from typescript-language-server through its tsserver command.

typescript-language-server only pushes diagnostics, without the document's version, and
pushes nothing when a file's diagnostics stay empty (its FileDiagnostics.update skips an
empty list after an empty list): an edit that keeps a file clean would wait out its
whole budget for a push that never comes, and a push could not be told from one about
the text before. Its ``typescript.tsserverRequest`` command runs tsserver's own
``syntacticDiagnosticsSync`` and ``semanticDiagnosticsSync`` on the text synced last
(tsserver answers requests in order), so the answer is exactly that text's, clean or not.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

COMMAND = "typescript.tsserverRequest"
"""The workspace/executeCommand that forwards a request to tsserver."""
KINDS = ("syntacticDiagnosticsSync", "semanticDiagnosticsSync")
"""The diagnostics asked for: syntax, then types (suggestions are hints, left out)."""
SEVERITY = {"error": 1, "warning": 2, "message": 3, "suggestion": 4}

Request = Callable[[str, Any, float], Awaitable[Any]]


class Refused(Exception):
    """tsserver answered a request with a failure."""


def offered(capabilities: dict[str, Any]) -> bool:
    """The server runs tsserver requests (typescript-language-server advertises it)."""
    provider = capabilities.get("executeCommandProvider")
    commands = provider.get("commands") if isinstance(provider, dict) else None
    return isinstance(commands, list) and COMMAND in commands


async def pull(request: Request, uri: str, timeout: float) -> list[dict[str, Any]]:
    """The document's diagnostics as LSP dicts (0-based positions); Refused, TimeoutError."""
    found: list[dict[str, Any]] = []
    for kind in KINDS:
        params = {"command": COMMAND, "arguments": [kind, {"file": uri}]}
        response = await request("workspace/executeCommand", params, timeout)
        if not isinstance(response, dict) or response.get("success") is not True:
            message = response.get("message") if isinstance(response, dict) else response
            raise Refused(f"tsserver {kind}: {message}")
        body = response.get("body")
        items = body if isinstance(body, list) else []
        found += [lsp for lsp in (_as_lsp(item) for item in items) if lsp is not None]
    return found


def _as_lsp(item: Any) -> dict[str, Any] | None:
    """One tsserver diagnostic (1-based line and offset) as an LSP one; None if malformed."""
    if not isinstance(item, dict):
        return None
    start, end = item.get("start"), item.get("end") or item.get("start")
    if not isinstance(start, dict) or not isinstance(end, dict):
        return None
    try:
        span = {
            "start": {"line": int(start["line"]) - 1, "character": int(start["offset"]) - 1},
            "end": {"line": int(end["line"]) - 1, "character": int(end["offset"]) - 1},
        }
    except (KeyError, TypeError, ValueError):
        return None
    code = item.get("code")
    return {
        "range": span,
        "severity": SEVERITY.get(str(item.get("category")), 1),
        "message": item.get("text"),
        "source": "typescript",  # as the server's own pushes name it
        "code": code if isinstance(code, (int, str)) else None,
    }
