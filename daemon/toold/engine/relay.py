"""``toold serve``: the editor's stdio, attached to the workspace's engine.

Editors change nothing: they start ``toold serve`` and speak LSP-framed JSON-RPC on
its stdin and stdout. The relay finds the workspace (``--workspace``, else the first
message, ``initialize``: its ``initializationOptions.workspace``, ``workspaceFolders``,
``rootUri`` or ``rootPath``, else the current folder), attaches to that workspace's
engine (starting one if needed) and hands it its stdin and stdout descriptors, with
the bytes it read to find the workspace: the engine reads and answers the editor
directly, so no byte passes through the relay. The engine ends the session with a line
naming the exit status, which becomes the relay's; a relay that dies (its connection
closes) ends the session at once, its calls cancelled. Standard library only.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from toold.engine.attach import EngineError, attach

PEEK_LIMIT = 64 * 1024 * 1024
"""Largest first message read to find the workspace (beyond it: the current folder)."""


def _read_first_frame(fd: int) -> tuple[bytes, dict[str, Any] | None]:
    """The bytes of stdin up to the end of the first frame, and that frame's JSON."""
    data = b""
    while b"\r\n\r\n" not in data and len(data) < 65536:
        chunk = os.read(fd, 65536)
        if not chunk:
            return data, None
        data += chunk
    head, sep, body = data.partition(b"\r\n\r\n")
    length = None
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            length = int(value.strip())
    if not sep or length is None or length > PEEK_LIMIT:
        return data, None
    while len(body) < length:
        chunk = os.read(fd, max(65536, length - len(body)))
        if not chunk:
            return data, None
        data += chunk
        body += chunk
    try:
        message = json.loads(body[:length])
    except ValueError:
        return data, None
    return data, message if isinstance(message, dict) else None


def _uri_path(uri: Any) -> Path | None:
    if not isinstance(uri, str):
        return None
    parsed = urlparse(uri)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


def workspace_of(message: dict[str, Any] | None) -> Path | None:
    """The workspace an ``initialize`` names, in the daemon's order of precedence."""
    if message is None or message.get("method") != "initialize":
        return None
    params = message.get("params")
    if not isinstance(params, dict):
        return None
    options = params.get("initializationOptions")
    if isinstance(options, dict) and isinstance(options.get("workspace"), str):
        return Path(options["workspace"])
    folders = params.get("workspaceFolders")
    if isinstance(folders, list) and folders and isinstance(folders[0], dict):
        found = _uri_path(folders[0].get("uri"))
        if found is not None:
            return found
    found = _uri_path(params.get("rootUri"))
    if found is not None:
        return found
    root_path = params.get("rootPath")
    return Path(root_path) if isinstance(root_path, str) else None


def relay(
    workspace: Path | None,
    *,
    client_process_id: int | None = None,
    max_message_bytes: int | None = None,
) -> int:
    """Serve stdin/stdout through the engine; the session's exit status."""
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    preface = b""
    if workspace is None:
        preface, first = _read_first_frame(stdin)
        workspace = workspace_of(first) or Path.cwd()
    if not workspace.is_dir():
        print(f"toold: workspace {workspace} is not a folder", file=sys.stderr)
        return 2
    extra = {
        "client": "toold serve",
        "clientProcessId": client_process_id,
        "maxMessageBytes": max_message_bytes,
        "preface": base64.b64encode(preface).decode("ascii"),
    }
    try:
        attached = attach(workspace, "stdio", extra, fds=[stdin, stdout])
    except (EngineError, OSError) as exc:
        print(f"toold: {exc}", file=sys.stderr)
        return 1
    # The engine reads and writes the editor's pipes itself; this connection only says
    # when the session ends (and, closed by our death, ends it).
    line = attached.reader.readline()
    try:
        end = json.loads(line) if line else None
    except ValueError:
        end = None
    if not isinstance(end, dict) or not isinstance(end.get("exit"), int):
        print(
            f"toold: the engine for {attached.paths.workspace} ended the session without a "
            f"status (it may have crashed); see its log {attached.paths.log}",
            file=sys.stderr,
        )
        return 1
    return int(end["exit"])
