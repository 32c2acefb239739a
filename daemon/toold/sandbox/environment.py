"""The environment a sandboxed worker gets: an allow-list, never the daemon's own.

The daemon's environment holds secrets (``ANTHROPIC_API_KEY``, cloud credentials, tokens
of whoever started it). Every runner but ``local`` builds its workers' environment here
and nowhere else: ``PATH``, ``LANG`` and ``LC_*``, ``TERM``, a private ``HOME`` and
``TMPDIR``, plus the names the user lists in ``execution.env_passthrough``. Whatever a
tool starts inside (bash, python_repl, git) inherits exactly this.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toold.config import TooldConfig

CARRIED = ("PATH", "LANG", "TERM", "TOOLD_TOOL_CALL")
"""Names always carried over from the daemon when it has them (TOOLD_TOOL_CALL: a toold
started inside a sandbox, where the engine is out of sight, knows it serves the agent)."""
LOCALE = re.compile(r"LC_[A-Z_]+")
"""Locale categories (LC_ALL, LC_CTYPE, ...), carried over too."""
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""PATH when the daemon has none."""


def sandbox_environment(
    config: TooldConfig,
    *,
    home: str,
    tmpdir: str,
    path: str | None = None,
    source: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The whole environment of a sandboxed worker: the allow-list taken from ``source``
    (the daemon's environment by default), ``HOME`` and ``TMPDIR`` set to the sandbox's
    own folders, ``PATH`` replaced when given, then ``execution.env_passthrough``."""
    source = os.environ if source is None else source
    env = {
        name: value for name, value in source.items() if name in CARRIED or LOCALE.fullmatch(name)
    }
    env["PATH"] = path or env.get("PATH") or DEFAULT_PATH
    env["HOME"] = home
    env["TMPDIR"] = tmpdir
    for name in config.execution.env_passthrough:
        if name in source:
            env[name] = source[name]
    return env
