"""glob: pattern semantics, the skip list, file roots and ordering."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toold.search.patterns import compile_glob
from toold.search.walk import Tree

from .conftest import Call, Put


@pytest.fixture
def tree(put: Put) -> None:
    for rel in (
        "top.py",
        "README.md",
        "src/a.py",
        "src/b.txt",
        "src/x/y/c.py",
        "src/x/notes.md",
        "lib/src/d.py",
        "lib/e.py",
    ):
        put(rel, "")


@pytest.mark.usefixtures("tree")
def test_name_pattern_matches_at_any_depth(call: Call) -> None:
    assert call("glob", pattern="*.py") == [
        "lib/e.py",
        "lib/src/d.py",
        "src/a.py",
        "src/x/y/c.py",
        "top.py",
    ]
    assert call("glob", pattern="c.py") == ["src/x/y/c.py"]


@pytest.mark.usefixtures("tree")
def test_double_star_spans_zero_or_more_folders(call: Call) -> None:
    assert call("glob", pattern="src/**/*.py") == ["src/a.py", "src/x/y/c.py"]


@pytest.mark.usefixtures("tree")
def test_slash_patterns_are_anchored_at_the_search_root(call: Call) -> None:
    assert call("glob", pattern="src/*.py") == ["src/a.py"]
    assert call("glob", pattern="*/*.py") == ["lib/e.py", "src/a.py"]
    assert call("glob", pattern="./src/*.py") == ["src/a.py"]


@pytest.mark.usefixtures("tree")
def test_leading_double_star_includes_top_level(call: Call) -> None:
    assert call("glob", pattern="**/*.md") == ["README.md", "src/x/notes.md"]


@pytest.mark.usefixtures("tree")
def test_trailing_double_star_takes_everything_below(call: Call) -> None:
    assert call("glob", pattern="src/x/**") == ["src/x/notes.md", "src/x/y/c.py"]


@pytest.mark.usefixtures("tree")
def test_path_narrows_the_root_but_results_stay_workspace_relative(call: Call) -> None:
    assert call("glob", pattern="*.py", path="src") == ["src/a.py", "src/x/y/c.py"]
    assert call("glob", pattern="x/**/*.py", path="src") == ["src/x/y/c.py"]
    assert call("glob", pattern="src/*.py", path="lib") == ["lib/src/d.py"]


@pytest.mark.usefixtures("tree")
def test_path_pointing_at_a_file(call: Call) -> None:
    assert call("glob", pattern="*.py", path="src/a.py") == ["src/a.py"]
    assert call("glob", pattern="a.*", path="src/a.py") == ["src/a.py"]
    assert call("glob", pattern="*.txt", path="src/a.py") == []


@pytest.mark.usefixtures("tree")
def test_missing_path_is_empty(call: Call) -> None:
    assert call("glob", pattern="*", path="no/such/dir") == []


@pytest.mark.usefixtures("tree")
def test_question_mark_and_sets(call: Call, put: Put) -> None:
    put("n/a1.py", "")
    put("n/b2.py", "")
    put("n/c3.py", "")
    put("n/ab.py", "")
    assert call("glob", pattern="??.py", path="n") == ["n/a1.py", "n/ab.py", "n/b2.py", "n/c3.py"]
    assert call("glob", pattern="[ab]?.py", path="n") == ["n/a1.py", "n/ab.py", "n/b2.py"]
    assert call("glob", pattern="[!a]?.py", path="n") == ["n/b2.py", "n/c3.py"]
    assert call("glob", pattern="?[0-9].py", path="n") == ["n/a1.py", "n/b2.py", "n/c3.py"]


def test_odd_bracket_patterns_do_not_crash(call: Call, put: Put) -> None:
    put("[x].py", "")
    put("[!].py", "")
    put("a&&b.py", "")
    assert call("glob", pattern="[[]x].py") == ["[x].py"]
    assert call("glob", pattern="[!].py") == ["[!].py"]
    assert call("glob", pattern="[z-a].py") == []
    assert call("glob", pattern="a[&]&b.py") == ["a&&b.py"]
    assert call("glob", pattern="[a&&b]&&b.py") == ["a&&b.py"]
    assert call("glob", pattern="[") == []


def test_sets_and_wildcards_never_cross_folders() -> None:
    assert not compile_glob("a[!x]b/*").match("a/b/c")
    assert not compile_glob("a[/]b/*").match("a/b/c")
    assert not compile_glob("a?b/*").match("a/b/c")
    assert not compile_glob("a*b/*").match("a/b/c")
    assert compile_glob("x/a**b").match("x/a/y/b")


@pytest.mark.parametrize(
    "skipped", [".git", ".pytest_cache", ".venv", "__pycache__", "node_modules", ".toold"]
)
def test_skip_list_unless_path_points_inside(call: Call, put: Put, skipped: str) -> None:
    put("keep.py", "")
    put(f"{skipped}/inner.py", "")
    put(f"pkg/{skipped}/deep.py", "")
    assert call("glob", pattern="*.py") == ["keep.py"]
    assert call("glob", pattern="**/*.py") == ["keep.py"]
    assert call("glob", pattern="*.py", path=skipped) == [f"{skipped}/inner.py"]
    assert call("glob", pattern="*.py", path=f"pkg/{skipped}") == [f"pkg/{skipped}/deep.py"]
    assert call("glob", pattern="inner.py", path=f"{skipped}/inner.py") == [f"{skipped}/inner.py"]


def test_skip_list_applies_below_an_explicit_skipped_root(call: Call, put: Put) -> None:
    put(".venv/lib.py", "")
    put(".venv/node_modules/m.py", "")
    assert call("glob", pattern="*.py", path=".venv") == [".venv/lib.py"]


def test_hidden_files_are_found(call: Call, put: Put) -> None:
    put(".env.py", "")
    put(".config/settings.py", "")
    assert call("glob", pattern="*.py") == [".config/settings.py", ".env.py"]


def test_symlinks_are_neither_listed_nor_followed(
    call: Call, put: Put, workspace: Path, tmp_path: Path
) -> None:
    put("real/a.py", "")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("")
    (workspace / "link.py").symlink_to(workspace / "real" / "a.py")
    (workspace / "inner").symlink_to(workspace / "real", target_is_directory=True)
    (workspace / "out").symlink_to(outside, target_is_directory=True)
    assert call("glob", pattern="*.py") == ["real/a.py"]


def test_folders_are_not_results(call: Call, put: Put) -> None:
    put("pkg.py/inside.txt", "")
    assert call("glob", pattern="*.py") == []


def test_results_sorted_and_unique(call: Call, put: Put) -> None:
    for rel in ("b/z.py", "a/y.py", "c.py", "a/b/x.py", "B.py"):
        put(rel, "")
    result = call("glob", pattern="**/*.py")
    assert result == ["B.py", "a/b/x.py", "a/y.py", "b/z.py", "c.py"]
    assert len(set(result)) == len(result)
    assert call("glob", pattern="**/*.py", path="./a/..") == result


def test_results_sort_as_plain_strings(call: Call, put: Put) -> None:
    for rel in ("a/x.py", "a-b/x.py", "foo.py", "foo/bar.py"):
        put(rel, "")
    assert call("glob", pattern="*.py") == ["a-b/x.py", "a/x.py", "foo.py", "foo/bar.py"]


# -- the walk from directory descriptors (search.walk) -----------------------------------


def test_a_symlinked_start_is_refused_not_followed(
    call: Call, put: Put, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("")
    (workspace / "out").symlink_to(outside, target_is_directory=True)
    put("real/a.py", "")
    (workspace / "real" / "up").symlink_to(outside, target_is_directory=True)
    for path in ("out", "out/secret.py", "real/up", "real/up/secret.py"):
        with call.fails(PermissionError, match="Symlink detected in path chain"):
            call("glob", pattern="*", path=path)
    assert call("glob", pattern="*", path="real") == ["real/a.py"]


def test_walk_yields_files_in_walk_order_with_both_paths(put: Put, workspace: Path) -> None:
    for rel in ("s/b.txt", "s/a/c.txt", "s/a.txt", "s/.h/d.txt", "s/node_modules/e.txt"):
        put(rel, rel)
    with Tree(workspace, "s") as tree:
        assert tree.kind == "folder"
        found = [(f.rel, f.path) for f in tree.files()]
        assert found == [
            ("a.txt", "s/a.txt"),
            ("b.txt", "s/b.txt"),
            (".h/d.txt", "s/.h/d.txt"),
            ("a/c.txt", "s/a/c.txt"),
        ]
    with Tree(workspace, "s") as tree:
        assert [f.rel for f in tree.files(include_hidden=False)] == ["a.txt", "b.txt", "a/c.txt"]
    with Tree(workspace, "s/a/c.txt") as tree:
        assert tree.kind == "file"
        [only] = list(tree.files())
        assert (only.rel, only.path, only.read(100)) == ("c.txt", "s/a/c.txt", b"s/a/c.txt")


def test_select_reaches_only_what_the_walk_would(put: Put, workspace: Path, tmp_path: Path) -> None:
    put("d/x.txt", "x")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "x.txt").write_text("secret")
    (workspace / "link").symlink_to(tmp_path / "outside", target_is_directory=True)
    (workspace / "d" / "y.txt").symlink_to(tmp_path / "outside" / "x.txt")
    with Tree(workspace, ".") as tree:
        read = {f.path: f.read(100) for f in tree.select(["d/x.txt", "d/y.txt", "link/x.txt"])}
    assert read == {"d/x.txt": b"x", "d/y.txt": None}  # link/: refused; d/y.txt: not read


def test_read_bounds_and_refuses_non_files(put: Put, workspace: Path) -> None:
    put("big.txt", "x" * 50)
    os.mkfifo(workspace / "fifo")
    with Tree(workspace, ".") as tree:
        files = {f.name: f for f in tree.files()}
    assert set(files) == {"big.txt"}  # a FIFO is not a regular file: never listed
    with Tree(workspace, ".") as tree:
        [big] = [f for f in tree.select(["big.txt", "fifo"]) if f.name == "big.txt"]
        assert big.read(49) is None
        assert big.read(50) == b"x" * 50
        [fifo] = [f for f in tree.select(["fifo"])]
        assert fifo.read(100) is None  # opened non-blocking, refused: not a regular file


def test_missing_and_non_folder_starts(put: Put, workspace: Path) -> None:
    put("f.txt", "")
    with pytest.raises(FileNotFoundError):
        Tree(workspace, "nope")
    with pytest.raises(NotADirectoryError):
        Tree(workspace, "f.txt/x")
    os.mkfifo(workspace / "fifo")
    with Tree(workspace, "fifo") as tree:
        assert tree.kind == "other"
        assert list(tree.files()) == []


def test_deep_trees_hold_one_descriptor_a_level(put: Put, workspace: Path) -> None:
    deep = "/".join(["d"] * 40)
    put(f"{deep}/f.txt", "")
    put("z/g.txt", "")
    before = len(os.listdir("/proc/self/fd"))
    with Tree(workspace, ".") as tree:
        found = []
        for f in tree.files():
            found.append(f.path)
            assert len(os.listdir("/proc/self/fd")) <= before + 42
    assert found == [f"{deep}/f.txt", "z/g.txt"]
    assert len(os.listdir("/proc/self/fd")) == before
