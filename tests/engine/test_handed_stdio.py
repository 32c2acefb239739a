"""The editor's pipes a relay hands over are the session's from serve_session's first
line: a session that fails before it serves closes them, so the editor sees the end of
the server's output. (Kept open, they made a Python 3.11 asyncio editor, pygls's
LanguageClient, wait forever in stop() though its ``toold serve`` had exited: its
Process.wait() waits for the pipes as well as the process.)"""

from __future__ import annotations

import asyncio
import os
import socket
from types import SimpleNamespace
from typing import Any, cast

import pytest

from toold.engine.serving import serve_session


def test_a_session_that_fails_before_serving_closes_the_editors_pipes() -> None:
    stdin_r, stdin_w = os.pipe()  # the editor writes stdin_w, the session reads stdin_r
    stdout_r, stdout_w = os.pipe()  # the session writes stdout_w, the editor reads stdout_r
    os.set_blocking(stdout_r, False)  # still open: BlockingIOError, not a wait
    unbound = cast(Any, SimpleNamespace(state=None))  # no workspace: it fails at once
    ours, theirs = socket.socketpair()
    try:
        with pytest.raises(AssertionError):
            asyncio.run(serve_session(unbound, ours, (stdin_r, stdout_w), 1, {"kind": "stdio"}))
        assert os.read(stdout_r, 1) == b""  # the end of the server's output
        with pytest.raises(BrokenPipeError):  # and nobody reads the editor's input
            os.write(stdin_w, b"x")
    finally:
        for fd in (stdin_w, stdout_r):
            os.close(fd)
        ours.close()
        theirs.close()
