"""A sandbox's route out under a policy: the proxy's folder, its argv and environment.

The bwrap and docker runners each hold one ProxyRoute while an ``[execution.network]``
table is in force: it starts the proxy (toold.sandbox.network.proxy) on a Unix socket in
a private folder, which the runner binds at SOCKET_DIR inside; wraps the sandbox's
command in the forwarder (toold.sandbox.network.forward) that listens on the sandbox's
loopback; and gives the command the proxy variables. The sandbox keeps its own network
namespace, so a program that ignores the variables reaches nothing.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from pathlib import Path

from toold.config import NetworkPolicy, TooldConfig
from toold.sandbox.network import PROXY_PORT, SOCKET_DIR, SOCKET_NAME
from toold.sandbox.network.proxy import NetworkProxy, Recorder

FORWARD_MODULE = "toold.sandbox.network.forward"
NO_PROXY = "localhost,127.0.0.1,::1"
"""The sandbox's own loopback is reached directly (it is the sandbox's, not the host's)."""


def proxy_environment() -> dict[str, str]:
    """HTTP(S)_PROXY, ALL_PROXY and NO_PROXY, in both cases, for a sandboxed command."""
    url = f"http://127.0.0.1:{PROXY_PORT}"
    env: dict[str, str] = {}
    for name, value in (
        ("HTTP_PROXY", url), ("HTTPS_PROXY", url), ("ALL_PROXY", url), ("NO_PROXY", NO_PROXY),
    ):  # fmt: skip
        env[name] = env[name.lower()] = value
    return env


class ProxyRoute:
    """The proxy of one sandbox and how the sandbox reaches it."""

    def __init__(self, policy: NetworkPolicy, audit: Recorder | None = None) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="toold-network-"))
        self._cleanup = weakref.finalize(self, shutil.rmtree, self.folder, ignore_errors=True)
        self.proxy = NetworkProxy(policy, self.folder, audit)
        self.proxy.start()

    @classmethod
    def for_config(cls, config: TooldConfig, audit: Recorder | None) -> ProxyRoute | None:
        """A route when ``execution.network`` is a table; None for true or false."""
        policy = config.execution.network
        return cls(policy, audit) if isinstance(policy, NetworkPolicy) else None

    def command(self, python: str, command: list[str]) -> list[str]:
        """``command`` started by the forwarder (``python`` runs it inside the sandbox)."""
        socket_path = f"{SOCKET_DIR}/{SOCKET_NAME}"
        forward = [python, "-P", "-m", FORWARD_MODULE, "--socket", socket_path]
        return [*forward, "--port", str(PROXY_PORT), "--", *command]

    def close(self) -> None:
        """Stop the proxy and remove its folder."""
        self.proxy.close()
        self._cleanup()
