"""Real VS Code for the tests: code-server from npm, run by Node 24 from npm, cached.

code-server 4.139.1 bundles VS Code 1.139.1 and needs Node 24 (the npm package ``node@24``
ships that binary) plus Debian's build dependencies for its native modules. Both live in
``${XDG_CACHE_HOME:-~/.cache}/toold/vscode``, one folder per version, installed once into a
scratch folder and renamed into place when complete, so a second run installs nothing and an
interrupted run leaves nothing half-installed behind. Run it by hand with
``python -m tests.clients.code_server`` (it prints the code-server command and the time taken).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

NODE_PACKAGE = "node@24"
NODE_MAJOR = "v24."
CODE_SERVER_VERSION = "4.139.1"
VSCODE_VERSION = "1.139.1"
#: Debian packages: the native modules' build dependencies, and the browser the tests drive.
APT_PACKAGES = [
    "build-essential",
    "pkg-config",
    "libkrb5-dev",
    "libx11-dev",
    "libxkbfile-dev",
    "libsecret-1-dev",
    "chromium",
]
CHROMIUM = Path("/usr/bin/chromium")
INSTALL_TIMEOUT = 1800


class SetupError(RuntimeError):
    """code-server could not be installed; the message says what failed and the fix."""


@dataclass(frozen=True)
class CodeServer:
    """An installed code-server: run ``[node, entry, ...]``."""

    node: Path
    entry: Path

    def argv(self, *args: str) -> list[str]:
        """The command line of ``code-server ARGS``."""
        return [os.fspath(self.node), os.fspath(self.entry), *args]

    def env(self) -> dict[str, str]:
        """The environment code-server runs in: Node 24 first on PATH."""
        path = f"{self.node.parent}{os.pathsep}{os.environ.get('PATH', '')}"
        return {**os.environ, "PATH": path}


def cache_dir() -> Path:
    """``${XDG_CACHE_HOME:-$HOME/.cache}/toold/vscode``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "toold" / "vscode"


def _run(argv: list[str], cwd: Path, env: dict[str, str], what: str) -> None:
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise SetupError(f"{what} timed out after {INSTALL_TIMEOUT}s: {' '.join(argv)}") from exc
    if done.returncode != 0:
        tail = (done.stdout[-3000:] + "\n" + done.stderr[-3000:]).strip()
        raise SetupError(
            f"{what} failed (exit {done.returncode}): {' '.join(argv)} in {cwd}\n{tail}\n"
            f"Fix: apt-get install -y {' '.join(APT_PACKAGES)} (the native modules' build "
            "dependencies), then run again."
        )


def _npm() -> str:
    npm = shutil.which("npm")
    if npm is None:
        raise SetupError("npm is missing: install Node.js 20 or later with npm.")
    return npm


def _node_version(node: Path) -> str:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=60)
    except OSError:
        return ""
    return out.stdout.strip()


def _install_into(final: Path, install: Callable[[Path], None]) -> Path:
    """Run ``install(scratch)`` and rename the scratch folder to ``final`` when it succeeds."""
    if final.is_dir():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    scratch = final.with_name(f"{final.name}.partial-{os.getpid()}")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    try:
        install(scratch)
        os.rename(scratch, final)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return final


def ensure_node() -> Path:
    """Node 24's binary, installed from npm's ``node@24`` package when missing."""
    home = cache_dir() / "node-24"
    node = home / "node_modules" / "node" / "bin" / "node"
    if home.is_dir() and not _node_version(node).startswith(NODE_MAJOR):
        shutil.rmtree(home)  # a broken earlier install: start again

    def install(scratch: Path) -> None:
        argv = [_npm(), "install", "--prefix", os.fspath(scratch), "--no-audit", "--no-fund"]
        _run([*argv, NODE_PACKAGE], scratch, dict(os.environ), f"npm install {NODE_PACKAGE}")
        package = scratch / "node_modules" / "node"
        if not _node_version(package / "bin" / "node").startswith(NODE_MAJOR):
            # npm skipped the package's install script (allowScripts): run it, as npm would.
            node = shutil.which("node") or "node"
            script = [node, "installArchSpecificPackage"]
            _run(script, package, dict(os.environ), f"{NODE_PACKAGE}'s install script")
        found = _node_version(package / "bin" / "node")
        if not found.startswith(NODE_MAJOR):
            raise SetupError(f"{NODE_PACKAGE} installed no Node 24 binary (found {found!r})")

    _install_into(home, install)
    return node


def _postinstall_done(package: Path) -> bool:
    vscode = package / "lib" / "vscode"
    return (vscode / "bin" / "remote-cli" / "code-server").exists() and any(
        (vscode / "node_modules" / "@vscode" / "spdlog" / "build" / "Release").glob("*.node")
    )


def ensure_code_server() -> CodeServer:
    """code-server, installed with Node 24 when missing; raises SetupError with the fix."""
    node = ensure_node()
    home = cache_dir() / f"code-server-{CODE_SERVER_VERSION}"
    package = home / "node_modules" / "code-server"
    if home.is_dir() and not _postinstall_done(package):
        shutil.rmtree(home)
    env = {**os.environ, "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}"}

    def install(scratch: Path) -> None:
        argv = [_npm(), "install", "--prefix", os.fspath(scratch), "--no-audit", "--no-fund"]
        _run([*argv, f"code-server@{CODE_SERVER_VERSION}"], scratch, env, "npm install code-server")
        installed = scratch / "node_modules" / "code-server"
        if not _postinstall_done(installed):
            # npm >= 11.19 may skip dependencies' install scripts ("not covered by
            # allowScripts"): run code-server's own, as npm would have.
            node_version = _node_version(node)
            script_env = {**env, "npm_config_user_agent": f"npm/11 node/{node_version} linux x64"}
            _run(["sh", "./postinstall.sh"], installed, script_env, "code-server's postinstall.sh")
        if not _postinstall_done(installed):
            raise SetupError(f"code-server's native modules were not built in {installed}")

    _install_into(home, install)
    return CodeServer(node=node, entry=package / "out" / "node" / "entry.js")


def missing_apt_packages() -> list[str]:
    """The APT_PACKAGES dpkg does not list as installed."""
    if shutil.which("dpkg-query") is None:
        return []
    missing = []
    for name in APT_PACKAGES:
        done = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", name], capture_output=True, text=True, check=False
        )
        if "install ok installed" not in done.stdout:
            missing.append(name)
    return missing


def main() -> int:
    """Install (or find) code-server and print where it is and how long it took."""
    started = time.monotonic()
    try:
        server = ensure_code_server()
    except SetupError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(" ".join(server.argv()))
    print(f"ready in {time.monotonic() - started:.1f}s (cache {cache_dir()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
