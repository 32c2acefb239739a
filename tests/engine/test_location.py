"""The runtime folder's checks, and what the engine answers a client it will not serve."""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path

import pytest

from tests.engine.support import Engines
from toold.engine.location import RUNTIME_ENV, EnginePaths, RuntimeDirError, runtime_dir


def test_a_symlinked_runtime_folder_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    monkeypatch.setenv(RUNTIME_ENV, str(link))
    with pytest.raises(RuntimeDirError, match="not a folder"):
        runtime_dir()


def test_a_runtime_folder_that_is_a_file_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv(RUNTIME_ENV, str(tmp_path / "file"))
    with pytest.raises(RuntimeDirError, match="not a folder"):
        runtime_dir()


def test_an_open_runtime_folder_of_ours_is_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)
    monkeypatch.setenv(RUNTIME_ENV, str(folder))
    assert runtime_dir() == folder
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_a_missing_runtime_folder_is_made_owner_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RUNTIME_ENV, str(tmp_path / "new"))
    assert stat.S_IMODE(runtime_dir().stat().st_mode) == 0o700


@pytest.mark.parametrize(
    ("hello", "why"),
    [
        (b"not json\n", "bad hello"),
        (b'{"toold": 99, "kind": "status"}\n', "protocol 3"),
        (b'{"toold": 2, "kind": "stdio", "version": "0.0.9"}\n', "toold 0.0.9 speaks protocol 2"),
        (b'{"toold": 3, "kind": "shell"}\n', "kind must be one of"),
        (b'{"toold": 3, "kind": "stdio"}\n', "two descriptors"),
    ],
)
def test_a_bad_hello_is_refused_and_the_engine_serves_on(
    engines: Engines, workspace: Path, hello: bytes, why: str
) -> None:
    engines.toold("daemon", "start", cwd=workspace)
    (path,) = [p for p in engines.runtime.iterdir() if p.suffix == ".sock"]
    with socket.socket(socket.AF_UNIX) as peer:
        peer.connect(os.fspath(path))
        peer.sendall(hello)
        reply = json.loads(peer.makefile("rb").readline())
    assert reply["ok"] is False and why in reply["error"]
    assert engines.toold("daemon", "status", cwd=workspace).returncode == 0


def test_a_runtime_folder_too_long_for_a_socket_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / ("d" * 90)
    monkeypatch.setenv(RUNTIME_ENV, str(deep))
    with pytest.raises(RuntimeDirError, match="shorter folder"):
        EnginePaths.of(tmp_path)


def test_xdg_runtime_dir_is_used_only_when_it_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(RUNTIME_ENV, raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert runtime_dir() == tmp_path / "toold"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "missing"))
    assert runtime_dir() == Path(f"/tmp/toold-{os.getuid()}")
