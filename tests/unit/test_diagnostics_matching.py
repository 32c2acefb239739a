"""Which servers check a file is kept per Servers (every write asks), and a reload that
changes a server's globs is seen by the next write."""

from __future__ import annotations

from pathlib import Path

from tests.bound import run_bound
from toold.diagnostics.servers import Servers, ServerSpec
from toold.diagnostics.step import watch_files
from toold.workspace import WorkspaceState

PYTHON = ServerSpec("ruff", ("ruff", "server"), ("*.py",))
SOURCES = ServerSpec("src-only", ("checker",), ("src/*.py",))
MISSING = ServerSpec("shell", ("not-installed",), ("*.sh",))


def names(specs: list[ServerSpec]) -> list[str]:
    """The servers' names, in order."""
    return [spec.name for spec in specs]


def test_a_name_glob_matches_by_name_and_a_path_glob_by_path_asked_twice() -> None:
    by_name = Servers(usable=(PYTHON,), missing=(MISSING,))
    for _ in range(2):  # the second answer is the kept one: the same
        assert names(by_name.for_file("a/x.py")) == ["ruff"]
        assert names(by_name.for_file("b/x.py")) == ["ruff"]
        assert names(by_name.missing_for("a/x.py")) == []
        assert names(by_name.missing_for("run.sh")) == ["shell"]
        assert by_name.for_file("x.txt") == [] == by_name.missing_for("x.txt")
    by_path = Servers(usable=(PYTHON, SOURCES), missing=())
    for _ in range(2):  # same name, other folder: the path glob tells them apart
        assert names(by_path.for_file("src/x.py")) == ["ruff", "src-only"]
        assert names(by_path.for_file("lib/x.py")) == ["ruff"]
    by_path.for_file("src/x.py").clear()  # a caller's list is its own
    assert names(by_path.for_file("src/x.py")) == ["ruff", "src-only"]


def test_a_reload_that_changes_a_servers_files_is_seen_by_the_next_write(
    workspace: Path,
) -> None:
    toml = workspace / "toold.toml"
    server = '[diagnostics.servers.x]\ncommand = ["toold-no-such-server"]\nfiles = [{}]\n'
    toml.write_text(server.format('"*.foo"'))

    async def checked(state: WorkspaceState, path: str) -> bool:
        return await watch_files(state.runtime, None, [path]) is not None

    async def scenario(state: WorkspaceState) -> None:
        assert await checked(state, "a.foo") and not await checked(state, "a.bar")
        toml.write_text(server.format('"*.bar"'))
        assert await state.reload(from_file=True) is None
        assert await checked(state, "a.bar") and not await checked(state, "a.foo")

    run_bound(workspace, scenario)
