"""permissions.paths: a shell word is judged by where it leads, not by how it is spelled.

Inside ``judging_in(root)`` a relative word whose existing part goes through a symlink out
of the workspace (directly, nested, a link to a link, ``link/..``, a glob matching one)
is outside; weird words never raise and count as outside when they cannot be resolved.
Outside ``judging_in`` the judgement stays lexical.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from toold.permissions.paths import (
    MAX_GLOB_MATCHES,
    escapes,
    judged_root,
    judging_in,
    leads_outside,
    names_outside,
)


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path.resolve()
    ws, outside = root / "ws", root / "outside"
    (ws / "dir" / "sub").mkdir(parents=True)
    (outside / "deep").mkdir(parents=True)
    (ws / "link").symlink_to(outside)  # absolute target
    (ws / "dir" / "link2").symlink_to("../../outside")  # relative, nested
    (ws / "l2").symlink_to("link")  # a link to a link
    (ws / "inlink").symlink_to("dir")  # stays inside
    (ws / "dir" / "up").symlink_to("..")  # the root itself: inside
    (ws / "loop1").symlink_to("loop2")
    (ws / "loop2").symlink_to("loop1")
    (ws / "dir" / "file.txt").write_text("x\n", encoding="utf-8")
    with judging_in(ws):
        yield ws


OUTSIDE = (
    "link", "link/", "link/x", "link/deep/x", "./link/x", "dir/link2", "dir/link2/x",
    "dir//link2/x", "l2", "l2/x", "link/../x", "dir/../link/x", "inlink/link2/x",
    "dir/up/link/x", "l*/deep", "lin?/", "[l]ink/deep", "dir/*", "*",
    "loop1/x",  # a loop cannot be resolved: fail closed
    "a\x00b", "x" * 5000, "\ud800x",
)  # fmt: skip
INSIDE = (
    "x", "dir", "dir/file.txt", "dir/sub/new.txt", "inlink/x", "inlink/../x", "dir/up/x",
    "missing/x", "lin*/x", "dir/*.txt", "\udc80x", "dir/sub/../file.txt", "x" * 300,
)  # fmt: skip


@pytest.mark.parametrize("word", OUTSIDE, ids=repr)
def test_a_word_leading_out_through_a_symlink_is_outside(ws: Path, word: str) -> None:
    assert escapes(word)
    assert names_outside(word)
    assert names_outside(f"--output={word}")


@pytest.mark.parametrize("word", INSIDE, ids=repr)
def test_a_word_that_stays_inside_is_inside(ws: Path, word: str) -> None:
    assert not escapes(word)
    assert not names_outside(word)


def test_the_root_is_its_real_path(tmp_path: Path) -> None:
    real = tmp_path.resolve() / "real"
    (real / "link").parent.mkdir()
    (real / "link").symlink_to(tmp_path.resolve())
    (tmp_path / "alias").symlink_to(real)
    with judging_in(tmp_path / "alias"):
        assert judged_root() == str(real)
        assert not escapes("x")
        assert escapes("link/x")


def test_each_check_resolves_the_root_as_it_is_then(tmp_path: Path) -> None:
    """The real root is resolved on first need within a check (a file tool's call needs
    none) and never carried over to the next one: a root whose link now leads elsewhere
    is judged where it leads now."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (second / "link").symlink_to(first.resolve())
    (tmp_path / "alias").symlink_to(first)
    with judging_in(tmp_path / "alias"):
        assert judged_root() == str(first.resolve())
    (tmp_path / "alias").unlink()
    (tmp_path / "alias").symlink_to(second)
    with judging_in(tmp_path / "alias"):
        assert escapes("link/x")  # from second, link leads out to first
        assert judged_root() == str(second.resolve())


def test_without_a_root_the_judgement_is_lexical(tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to("/")
    assert judged_root() is None
    assert not escapes("link/etc/passwd")  # nothing says where the workspace is
    assert escapes("../x") and escapes("/etc/x") and escapes("~/x")
    with judging_in(None):
        assert not escapes("link/etc/passwd")


def test_the_root_is_only_set_inside_the_block(tmp_path: Path) -> None:
    with judging_in(tmp_path):
        with judging_in(None):
            assert judged_root() is None
        assert judged_root() == str(tmp_path.resolve())
    assert judged_root() is None


def test_a_glob_matching_too_many_names_is_outside(ws: Path) -> None:
    many = ws / "many"
    many.mkdir()
    for k in range(MAX_GLOB_MATCHES + 1):
        (many / f"f{k}").touch()
    assert leads_outside(str(ws), "many/*")
    assert not leads_outside(str(ws), "many/f1*")


def test_weird_words_never_raise(ws: Path) -> None:
    words = ("\x00", "/" * 10_000, "../" * 3000, "a/" * 2100, "\udcff" * 300, "\U0010ffff")
    for word in (*words, "x" * 4000, "x/" * 2000):
        escapes(word)
        names_outside(word)
        names_outside("-f" + word)


def test_a_dangling_link_to_outside_is_outside(ws: Path) -> None:
    os.symlink("/nonexistent-toold-target/dir", ws / "dangling")
    assert escapes("dangling")
    assert escapes("dangling/x")
