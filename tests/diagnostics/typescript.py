"""typescript-language-server and typescript from npm, installed once into a cache.

``${XDG_CACHE_HOME:-~/.cache}/toold/typescript-lsp-<versions>`` holds both packages (the
versions are pinned: the server's 6.x needs Node 22, the Node 20 of .ci/run runs 5.x). A
test puts them in its workspace's ``node_modules`` (hard links, a copy across
filesystems), where a TypeScript project keeps them: the bwrap sandbox the server runs in
shows the workspace but nothing of the cache in the user's home. Without npm, or when
the install fails, the test is skipped, and fails in CI (tests.environment).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.environment import unavailable

SERVER_PACKAGE = "typescript-language-server@5.3.0"
TYPESCRIPT_PACKAGE = "typescript@5.9.3"
INSTALL_TIMEOUT = 600


def cache_dir() -> Path:
    """The cache folder of these pinned versions."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    name = f"typescript-lsp-{SERVER_PACKAGE.split('@')[1]}-ts-{TYPESCRIPT_PACKAGE.split('@')[1]}"
    return Path(base) / "toold" / name


def ensure_installed() -> Path:
    """The cache's ``node_modules``, installed with npm when missing."""
    home = cache_dir()
    modules = home / "node_modules"
    if (modules / ".bin" / "typescript-language-server").exists():
        return modules
    npm = shutil.which("npm") or unavailable("npm is missing: install Node.js 20+ with npm")
    home.parent.mkdir(parents=True, exist_ok=True)
    scratch = home.with_name(f"{home.name}.partial-{os.getpid()}")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    argv = [npm, "install", "--prefix", os.fspath(scratch), "--no-audit", "--no-fund"]
    try:
        done = subprocess.run(
            [*argv, SERVER_PACKAGE, TYPESCRIPT_PACKAGE],
            cwd=scratch,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
            check=False,
        )
        if done.returncode != 0:
            unavailable(f"npm install {SERVER_PACKAGE} {TYPESCRIPT_PACKAGE}: {done.stderr[-2000:]}")
        shutil.rmtree(home, ignore_errors=True)
        os.rename(scratch, home)  # whole or not at all: a parallel run may have won
    except OSError:
        if not (modules / ".bin" / "typescript-language-server").exists():
            raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return modules


def install_into(workspace: Path) -> Path:
    """``workspace/node_modules`` with both packages; the server's program is returned."""
    source = ensure_installed()
    target = workspace / "node_modules"

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:  # another filesystem
            shutil.copy2(src, dst)

    shutil.copytree(source, target, symlinks=True, copy_function=link)
    return target / ".bin" / "typescript-language-server"
