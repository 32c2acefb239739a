"""Shared plumbing for the editor clients' tests: finding (or installing) their toolchains."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.environment import in_ci

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = ROOT / "editor-clients"


def run(argv: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None) -> str:
    """Run a command; fail the test with its whole output when it does not succeed."""
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{' '.join(argv)} timed out after {timeout}s\n{exc.stdout}\n{exc.stderr}")
    output = (
        f"$ {' '.join(argv)} (in {cwd})\n"
        f"--- stdout ---\n{done.stdout}\n--- stderr ---\n{done.stderr}"
    )
    if done.returncode != 0:
        pytest.fail(f"exit status {done.returncode}\n{output}", pytrace=False)
    return done.stdout


def apt_install(packages: list[str]) -> str | None:
    """apt-get install PACKAGES when we are root; returns why it did not work, or None."""
    if shutil.which("apt-get") is None:
        return "apt-get is not available"
    if os.geteuid() != 0:
        return "not root, so apt-get cannot install it"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}

    def attempt(*argv: str) -> str | None:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
        except subprocess.TimeoutExpired:
            return f"{' '.join(argv)} timed out"
        if done.returncode != 0:
            return f"{' '.join(argv)} failed: {done.stderr.strip()[-500:]}"
        return None

    install = ("apt-get", "install", "-y", "--no-install-recommends", *packages)
    if attempt(*install) is None:
        return None
    return attempt("apt-get", "update") or attempt(*install)


def require_tool(
    name: str,
    apt_packages: list[str],
    min_version: tuple[int, ...],
    version_flag: str,
    hint: str = "",
) -> str:
    """The path of NAME at MIN_VERSION or later. In CI a missing or old NAME fails the test
    (CI installs its toolchain up front); elsewhere a missing NAME is installed with apt,
    and the test is skipped with the reason when that does not work."""

    def problem() -> str | None:
        path = shutil.which(name)
        if path is None:
            return f"{name} is not installed"
        out = subprocess.run([path, version_flag], capture_output=True, text=True, timeout=60)
        match = re.search(r"(\d+)\.(\d+)\.(\d+)", out.stdout + out.stderr)
        if match is None:
            return f"cannot tell {name}'s version from {out.stdout!r}"
        found = tuple(int(part) for part in match.groups())
        if found < min_version:
            wanted = ".".join(map(str, min_version))
            return f"{name} {match.group(0)} is older than the {wanted} these tests need"
        return None

    why = problem()
    hint = hint or f"install it (apt-get install -y {' '.join(apt_packages)})"
    if why is not None and in_ci():
        pytest.fail(f"{why}: CI must {hint}", pytrace=False)
    if why is not None and shutil.which(name) is None:
        failed = apt_install(apt_packages)
        why = problem() if failed is None else f"{why}; {failed}"
    if why is None:
        return shutil.which(name) or name
    print(f"SKIP: {why}; {hint} to run these tests")
    pytest.skip(f"{why}; {hint} to run these tests")
