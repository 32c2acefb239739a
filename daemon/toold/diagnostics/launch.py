"""How a language server is started: under the workspace's runner policy, never with the
daemon's secrets.

With the bwrap runner (the default where bubblewrap works), the server runs inside a
bubblewrap sandbox of the same view as the tools' (toold.sandbox.bwrap: the system
read-only, the workspace read-write, no network unless ``execution.network``, no /home,
dies with the daemon). With any other runner it runs as a plain child of the daemon,
in the workspace, in its own process group. Either way its environment is the tools'
allow-list (toold.sandbox.environment: PATH, locale, TERM, a private HOME and TMPDIR and
``execution.env_passthrough``), so API keys in the daemon's environment never reach it.
Docker's containers are not used for servers: a server must see the workspace's files
at their own paths, and a long-lived container per server costs more than it guards here.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path

from toold.config import TooldConfig
from toold.diagnostics.servers import ServerSpec
from toold.sandbox.bwrap import SANDBOX_HOME, BwrapSandbox
from toold.sandbox.environment import DEFAULT_PATH, sandbox_environment
from toold.sandbox.runner import ToolRunner


@dataclass(frozen=True)
class Launch:
    """A server's command line, environment and folder, and where it runs."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    sandbox: str
    """"bwrap" when inside bubblewrap, else "none" (the scrubbed environment only)."""
    parent_pid: int | None
    """The daemon's pid as the server sees it: None in bwrap's own PID namespace."""


class Launcher:
    """Builds each server's launch for one workspace; owns the private HOME of servers
    that run outside a sandbox (removed with it)."""

    def __init__(self, root: Path, runner: ToolRunner | None) -> None:
        self.root = root
        self.runner = runner
        self._home = tempfile.mkdtemp(prefix="toold-lsp-home-")
        weakref.finalize(self, shutil.rmtree, self._home, ignore_errors=True)

    def launch(self, spec: ServerSpec, config: TooldConfig) -> Launch:
        """The server's launch under the runner's policy."""
        program = spec.argv[0]
        path = os.environ.get("PATH") or DEFAULT_PATH
        if os.path.isabs(program):  # its own folder first: a server may start siblings
            path = f"{os.path.dirname(program)}:{path}"
        sandbox = None if self.runner is None else self.runner.sandbox
        if isinstance(sandbox, BwrapSandbox) and sandbox.problem is None:
            env = sandbox_environment(config, home=SANDBOX_HOME, tmpdir=SANDBOX_HOME, path=path)
            argv = sandbox.interpreter_argv(list(spec.argv))
            return Launch(argv, env, self.root, "bwrap", None)
        env = sandbox_environment(config, home=self._home, tmpdir=self._home, path=path)
        return Launch(list(spec.argv), env, self.root, "none", os.getpid())
