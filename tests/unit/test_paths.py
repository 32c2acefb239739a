"""safe_path: the workspace boundary, with the exact PermissionError texts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toold.sandbox.paths import relative_posix, safe_path

from .conftest import Call


def _refused(workspace: Path, path: str) -> str:
    with pytest.raises(PermissionError) as info:
        safe_path(workspace, path)
    return str(info.value)


@pytest.mark.parametrize("path", ["~x", "~", "~/notes.txt", "~root/.ssh"])
def test_home_relative(workspace: Path, path: str) -> None:
    assert _refused(workspace, path) == f"Home-relative paths are not allowed: '{path}'"


@pytest.mark.parametrize("path", ["/etc/passwd", "/", "C:/Windows", "C:\\Windows", "\\\\srv\\x"])
def test_absolute(workspace: Path, path: str) -> None:
    assert _refused(workspace, path) == f"Absolute paths are not allowed: '{path}'"


def test_absolute_path_inside_workspace_is_still_refused(workspace: Path) -> None:
    inside = os.fspath(workspace / "a.txt")
    assert _refused(workspace, inside) == f"Absolute paths are not allowed: '{inside}'"


@pytest.mark.parametrize("path", ["..", "../x", "a/../../x", "a/b/../../../x", "./.."])
def test_dotdot_escape(workspace: Path, path: str) -> None:
    assert _refused(workspace, path) == f"Path '{path}' escapes workspace {workspace}"


def test_sibling_with_common_prefix(tmp_path: Path, workspace: Path) -> None:
    evil = tmp_path / "ws_evil"
    evil.mkdir()
    (evil / "x").write_text("secret")
    for path in ("../ws_evil/x", "../ws_evil", "../ws_"):
        assert _refused(workspace, path) == f"Path '{path}' escapes workspace {workspace}"


def test_dotdot_inside_is_fine(workspace: Path) -> None:
    assert safe_path(workspace, "a/../b") == workspace / "b"
    assert safe_path(workspace, "a/./b/../c.txt") == workspace / "a" / "c.txt"
    assert safe_path(workspace, "./x") == workspace / "x"


@pytest.mark.parametrize("path", ["", ".", "./", "a/..", "a/b/../.."])
def test_root_forms(workspace: Path, path: str) -> None:
    assert safe_path(workspace, path) == workspace


def test_missing_paths_inside_are_fine(workspace: Path) -> None:
    assert safe_path(workspace, "new/dir/file.txt") == workspace / "new" / "dir" / "file.txt"


def test_tilde_inside_a_name_is_fine(workspace: Path) -> None:
    assert safe_path(workspace, "a/~b") == workspace / "a" / "~b"


def test_accepts_pathlike(workspace: Path) -> None:
    assert safe_path(workspace, Path("a") / "b") == workspace / "a" / "b"


def test_a_path_past_path_max_is_refused_without_echoing_it(workspace: Path) -> None:
    message = _refused(workspace, "a/" * 3_000_000)
    assert message == f"Path is 6000000 characters long; paths stop at 4096: {'a/' * 30!r}..."


def test_nul_byte(workspace: Path) -> None:
    assert _refused(workspace, "a\x00b") == "NUL bytes are not allowed in paths: 'a\\x00b'"


def test_file_symlink_pointing_inside(workspace: Path) -> None:
    (workspace / "real.txt").write_text("x")
    (workspace / "link.txt").symlink_to(workspace / "real.txt")
    link = workspace / "link.txt"
    assert _refused(workspace, "link.txt") == f"Symlink detected in path chain: {link}"


def test_file_symlink_pointing_outside(workspace: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("s")
    (workspace / "sub").mkdir()
    (workspace / "sub" / "link.txt").symlink_to(tmp_path / "secret.txt")
    link = workspace / "sub" / "link.txt"
    assert _refused(workspace, "sub/link.txt") == f"Symlink detected in path chain: {link}"


def test_folder_symlink_pointing_inside(workspace: Path) -> None:
    (workspace / "real").mkdir()
    (workspace / "real" / "f.txt").write_text("x")
    (workspace / "alias").symlink_to(workspace / "real", target_is_directory=True)
    alias = workspace / "alias"
    assert _refused(workspace, "alias/f.txt") == f"Symlink detected in path chain: {alias}"
    assert _refused(workspace, "alias") == f"Symlink detected in path chain: {alias}"
    assert _refused(workspace, "alias/new.txt") == f"Symlink detected in path chain: {alias}"


def test_folder_symlink_pointing_outside(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "a").mkdir()
    (workspace / "a" / "out").symlink_to(outside, target_is_directory=True)
    link = workspace / "a" / "out"
    assert _refused(workspace, "a/out/x/y.txt") == f"Symlink detected in path chain: {link}"


def test_dangling_symlink(workspace: Path) -> None:
    (workspace / "dangling").symlink_to(workspace / "nowhere")
    link = workspace / "dangling"
    assert _refused(workspace, "dangling") == f"Symlink detected in path chain: {link}"


def test_symlink_removed_by_dotdot_is_not_in_the_chain(workspace: Path, tmp_path: Path) -> None:
    # "link/.." is resolved lexically, so the returned path never goes through the link.
    (workspace / "link").symlink_to(tmp_path, target_is_directory=True)
    assert safe_path(workspace, "link/../b.txt") == workspace / "b.txt"


def test_checks_run_in_the_spec_order(workspace: Path, tmp_path: Path) -> None:
    (workspace / "link").symlink_to(tmp_path, target_is_directory=True)
    # home-relative beats absolute-looking and escaping
    assert _refused(workspace, "~/../..").startswith("Home-relative paths are not allowed")
    # absolute beats escaping
    assert _refused(workspace, "/../..").startswith("Absolute paths are not allowed")
    # escaping beats a symlink met on the way
    assert _refused(workspace, "link/../../x") == (
        f"Path 'link/../../x' escapes workspace {workspace}"
    )


def test_relative_posix(workspace: Path) -> None:
    assert relative_posix(workspace, workspace / "a" / "b.txt") == "a/b.txt"
    assert relative_posix(workspace, workspace) == "."


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"file_path": "../x"}),
        ("write_file", {"file_path": "../x", "content": ""}),
        ("edit_file", {"file_path": "../x", "old_text": "a", "new_text": "b"}),
        ("glob", {"pattern": "*", "path": ".."}),
        ("grep", {"pattern": "x", "path": ".."}),
    ],
)
def test_every_file_and_search_tool_is_guarded(
    call: Call, workspace: Path, tool: str, args: dict[str, str]
) -> None:
    path = args.get("file_path", args.get("path"))
    with call.fails(PermissionError) as info:
        call(tool, **args)
    assert str(info.value) == f"Path '{path}' escapes workspace {workspace}"
