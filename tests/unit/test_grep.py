"""grep: modes, filters, limits, skipped files, and the ripgrep prefilter against pure Python."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from toold.config import LimitsConfig, TooldConfig
from toold.search import grep as grep_module
from toold.search.grep import GrepQuery, grep_lines
from toold.search.walk import Tree
from toold.tools import BuiltinToolProvider, ToolRuntime, ToolSet

from .conftest import Call, Caller, Put, ToolsWith

MB = 1_048_576


def test_invalid_regex_is_a_result_not_an_exception(call: Call) -> None:
    assert call("grep", pattern="(") == [
        "Invalid regex pattern: missing ), unterminated subpattern at position 0"
    ]
    assert call("grep", pattern="[a") == [
        "Invalid regex pattern: unterminated character set at position 0"
    ]
    assert call("grep", pattern="*") == ["Invalid regex pattern: nothing to repeat at position 0"]


@pytest.fixture
def meta(put: Put) -> None:
    put(
        "meta.txt",
        "a.c\nabc\na+c\naac\n(x)\nx|y\n$5\n^caret\ncaret\nb\\s\n",
    )


@pytest.mark.usefixtures("meta")
@pytest.mark.parametrize(
    ("pattern", "lines"),
    [
        ("a.c", [1, 2, 3, 4]),
        (r"a\.c", [1]),
        ("a+c", [4]),
        (r"a\+c", [3]),
        (r"\(x\)", [5]),
        ("(x)", [5, 6]),
        ("x|y", [5, 6]),
        (r"x\|y", [6]),
        (r"\$5", [7]),
        ("5$", [7]),
        ("^caret", [9]),
        (r"\^caret", [8]),
        ("caret", [8, 9]),
        (r"\\", [10]),
        ("[$^]", [7, 8]),
        ("(?i)CARET", [8, 9]),
        ("CARET", []),
    ],
)
def test_python_regex_semantics(call: Call, pattern: str, lines: list[int]) -> None:
    result = call("grep", pattern=pattern)
    assert [int(r.split(":")[1]) for r in result] == lines


def test_include_filter_is_relative_to_search_root(call: Call, put: Put) -> None:
    put("src/a.py", "hit")
    put("src/b.txt", "hit")
    put("src/sub/c.py", "hit")
    assert call("grep", pattern="hit", include="*.py") == ["src/a.py:1:hit", "src/sub/c.py:1:hit"]
    assert call("grep", pattern="hit", include="src/*.py") == ["src/a.py:1:hit"]
    assert call("grep", pattern="hit", path="src", include="sub/*.py") == ["src/sub/c.py:1:hit"]
    assert call("grep", pattern="hit", include="*.rs") == []


def test_path_pointing_at_a_file(call: Call, put: Put) -> None:
    put("a.txt", "one\nhit\n")
    put("b.txt", "hit\n")
    assert call("grep", pattern="hit", path="a.txt") == ["a.txt:2:hit"]
    assert call("grep", pattern="hit", path="a.txt", include="*.txt") == ["a.txt:2:hit"]
    assert call("grep", pattern="hit", path="a.txt", include="*.py") == []


def test_skips_files_over_one_megabyte(call: Call, put: Put) -> None:
    assert put("exact.txt", "needle\n" + "x" * (MB - 7)).stat().st_size == MB
    assert put("over.txt", "needle\n" + "x" * (MB - 6)).stat().st_size == MB + 1
    for pattern in ("needle", "need[l]e"):
        assert call("grep", pattern=pattern) == ["exact.txt:1:needle"]


def test_skips_non_utf8_files(call: Call, put: Put) -> None:
    put("latin1.txt", "needle café\n".encode("latin-1"))
    put("bad_tail.txt", b"needle\n\xff\xfe\n")
    put("good.txt", "needle café\n")
    for pattern in ("needle", "needl."):
        assert call("grep", pattern=pattern) == ["good.txt:1:needle café"]


def test_at_most_1000_matches(call: Call, put: Put) -> None:
    put("a.txt", "hit\n" * 600)
    put("b.txt", "hit\n" * 600)
    for pattern in ("hit", "h.t"):
        result = call("grep", pattern=pattern)
        assert len(result) == 1000
        assert result[599] == "a.txt:600:hit"
        assert result[600] == "b.txt:1:hit"
        assert result[-1] == "b.txt:400:hit"


def test_match_limit_from_config(tools_with: ToolsWith, put: Put) -> None:
    put("a.txt", "hit\n" * 10)
    config = TooldConfig(limits=LimitsConfig(grep_max_matches=3))
    call = tools_with(config=config)
    assert call("grep", pattern="hit") == ["a.txt:1:hit", "a.txt:2:hit", "a.txt:3:hit"]


@pytest.mark.parametrize(
    "skipped", [".git", ".pytest_cache", ".venv", "__pycache__", "node_modules", ".toold"]
)
def test_skip_list_unless_path_points_inside(call: Call, put: Put, skipped: str) -> None:
    put("keep.txt", "needle")
    put(f"{skipped}/inner.txt", "needle")
    put(f"deep/{skipped}/x.txt", "needle")
    for pattern in ("needle", "needl[e]"):
        assert call("grep", pattern=pattern) == ["keep.txt:1:needle"]
        assert call("grep", pattern=pattern, path=skipped) == [f"{skipped}/inner.txt:1:needle"]
        assert call("grep", pattern=pattern, path=f"deep/{skipped}") == [
            f"deep/{skipped}/x.txt:1:needle"
        ]


def test_counts_and_files_follow_file_order(call: Call, put: Put) -> None:
    put("b/x.txt", "hit\nhit\n")
    put("a.txt", "hit\n")
    put("c.txt", "miss\n")
    assert call("grep", pattern="hit", output_mode="count") == ["a.txt:1", "b/x.txt:2"]
    assert call("grep", pattern="hit", output_mode="files_with_matches") == ["a.txt", "b/x.txt"]


# The ripgrep prefilter (literal patterns) must never change what grep returns.


@pytest.fixture
def mixed_tree(put: Put, workspace: Path, tmp_path: Path) -> None:
    put("a.txt", "needle\nno\nneedle again\n")
    put("b/c.txt", "x needle y\n")
    put("sp ace.txt", "needle\n")
    put("-dash.txt", "needle\n")
    put(".hidden/h.txt", "needle\n")
    put(".git/g.txt", "needle\n")
    put("node_modules/pkg/n.txt", "needle\n")
    put("__pycache__/p.txt", "needle\n")
    put(".toold/t.txt", "needle\n")
    put("big.txt", "needle\n" + "x" * MB)
    put("edge.txt", "needle\n" + "x" * (MB - 7))
    put("latin1.txt", b"needle \xe9\n")
    put("crlf.txt", b"one\r\nneedle\r\n")
    put("cr.txt", b"a\rneedle\r")
    put("bom.txt", "\ufeffneedle\n")
    put("upper.txt", "NEEDLE\n")
    put("deep/x/y/z.txt", "pre needle post\n")
    put("nul.bin", b"\x00\x01needle\x00\n")
    put("unicode.txt", "日本 needle 語\n")
    put("empty.txt", "")
    (workspace / "link.txt").symlink_to(workspace / "a.txt")
    (workspace / "linkdir").symlink_to(workspace / "b", target_is_directory=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "o.txt").write_text("needle\n")
    (workspace / "out").symlink_to(outside, target_is_directory=True)


# os.walk order: a folder's files (sorted), then each sub-folder in turn.
EXPECTED = [
    "-dash.txt:1:needle",
    "a.txt:1:needle",
    "a.txt:3:needle again",
    "bom.txt:1:\ufeffneedle",
    "cr.txt:2:needle",
    "crlf.txt:2:needle",
    "edge.txt:1:needle",
    "nul.bin:1:\x00\x01needle\x00",
    "sp ace.txt:1:needle",
    "unicode.txt:1:日本 needle 語",
    ".hidden/h.txt:1:needle",
    "b/c.txt:1:x needle y",
    "deep/x/y/z.txt:1:pre needle post",
]


def _grep_all_ways(call: Call, monkeypatch: pytest.MonkeyPatch, **args: str) -> list[list[str]]:
    """grep with a literal (ripgrep prefilter), without ripgrep, and as an equivalent regex."""
    literal: str = args.pop("pattern")
    regex = "".join(f"[{c}]" if c.isalnum() else re.escape(c) for c in literal)
    assert GrepQuery(re.compile(literal)).literal == literal
    assert GrepQuery(re.compile(regex)).literal is None
    with_rg = call("grep", pattern=literal, **args)
    as_regex = call("grep", pattern=regex, **args)
    with monkeypatch.context() as m:
        m.setattr(grep_module, "ripgrep_binary", lambda: None)
        without_rg = call("grep", pattern=literal, **args)
    return [with_rg, as_regex, without_rg]


def test_ripgrep_is_available_for_the_prefilter(workspace: Path) -> None:
    (workspace / "f.txt").write_text("needle\n")
    assert grep_module.ripgrep_binary() is not None
    query = GrepQuery(re.compile("needle"))
    assert grep_module._rg_candidates(workspace, query, "needle") == ["f.txt"]


@pytest.mark.usefixtures("mixed_tree")
def test_literal_and_regex_agree_on_the_whole_tree(
    call: Call, monkeypatch: pytest.MonkeyPatch
) -> None:
    for result in _grep_all_ways(call, monkeypatch, pattern="needle"):
        assert result == EXPECTED


@pytest.mark.usefixtures("mixed_tree")
@pytest.mark.parametrize(
    "args",
    [
        {"pattern": "needle", "path": "b"},
        {"pattern": "needle", "path": ".git"},
        {"pattern": "needle", "path": "node_modules/pkg"},
        {"pattern": "needle", "path": "a.txt"},
        {"pattern": "needle", "include": "*.txt"},
        {"pattern": "needle", "include": "deep/**"},
        {"pattern": "needle", "output_mode": "count"},
        {"pattern": "needle", "output_mode": "files_with_matches"},
        {"pattern": "NEEDLE"},
        {"pattern": "日本"},
        {"pattern": "needle again"},
        {"pattern": "-"},
        {"pattern": "absent"},
    ],
)
def test_literal_and_regex_agree(
    call: Call, monkeypatch: pytest.MonkeyPatch, args: dict[str, str]
) -> None:
    with_rg, as_regex, without_rg = _grep_all_ways(call, monkeypatch, **args)
    assert with_rg == as_regex == without_rg


def test_literal_and_regex_agree_under_a_skipped_folder_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The workspace itself lives inside node_modules: only folders below the root are skipped.
    ws = tmp_path / "node_modules" / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "f.txt").write_text("needle\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "g.txt").write_text("needle\n")
    call_ws = Caller(ToolSet(BuiltinToolProvider(ToolRuntime(workspace=ws)).get_tools()))

    for result in _grep_all_ways(call_ws, monkeypatch, pattern="needle"):
        assert result == ["sub/f.txt:1:needle"]


def test_grep_lines_reports_workspace_relative_paths(workspace: Path) -> None:
    (workspace / "sub").mkdir()
    (workspace / "sub" / "f.txt").write_text("a\nneedle\n")
    with Tree(workspace.resolve(), "sub") as tree:
        matches = list(grep_lines(tree, GrepQuery(re.compile("needle"))))
    assert [(m.path, m.line_number, m.text) for m in matches] == [("sub/f.txt", 2, "needle")]


def test_literal_property() -> None:
    assert GrepQuery(re.compile("plain text-1/2")).literal == "plain text-1/2"
    for pattern in ("a.b", "a*", "(a)", "[a]", "a|b", "^a", "a$", "a\\b", "a{2}", "a+", "a?"):
        assert GrepQuery(re.compile(pattern)).literal is None
    assert GrepQuery(re.compile("")).literal is None
    assert GrepQuery(re.compile("abc", re.MULTILINE)).literal is None


def test_files_of_a_folder_come_before_its_subfolders(call: Call, put: Put) -> None:
    put("a/z.txt", "hit")
    put("a.txt", "hit")
    put("b.txt", "hit")
    expected = ["a.txt:1:hit", "b.txt:1:hit", "a/z.txt:1:hit"]
    assert call("grep", pattern="hit") == expected
    assert call("grep", pattern="h[i]t") == expected


@pytest.mark.parametrize(
    ("pattern", "required"),
    [
        (r"class \w+Error\(", "Error("),
        (r"(foo|bar)needle", "needle"),
        (r"x*needle\b", "needle"),
        (r"\d+ items? found", " found"),
        (r"need(le)", "need"),  # only top-level characters count
        (r"nee?dle", "dle"),
        (r"ne?edl", "edl"),
        (r"ab?c", None),  # runs shorter than three characters
        (r"(?i)needle", None),  # case folding is Python's to do
        (r"[a-z]+\.py", ".py"),
    ],
)
def test_the_literal_every_match_contains(pattern: str, required: str | None) -> None:
    assert grep_module.required_literal(re.compile(pattern)) == required


@pytest.mark.usefixtures("mixed_tree")
@pytest.mark.parametrize(
    "pattern", [r"x? ?needle\b", r"^needle", r"(pre|x) needle", r"needle( again)?$", r"日本 \w+"]
)
def test_regexes_prefiltered_by_their_literal_find_what_python_alone_finds(
    call: Call, monkeypatch: pytest.MonkeyPatch, pattern: str
) -> None:
    searched: list[str] = []
    real = grep_module._rg_candidates

    def spy(root: Path, query: GrepQuery, literal: str) -> object:
        searched.append(literal)
        return real(root, query, literal)

    monkeypatch.setattr(grep_module, "_rg_candidates", spy)
    with_rg = call("grep", pattern=pattern)
    assert searched and searched[0] in ("needle", " needle", "日本 "), searched
    monkeypatch.setattr(grep_module, "ripgrep_binary", lambda: None)
    assert with_rg == call("grep", pattern=pattern)
    assert with_rg  # the fixture has matches for each


# Texts whose edges and spans trip a search that skips lines: empty files, no final
# newline, blank lines, matches that span a newline in the whole text but not in a line.
EDGE_TEXTS = ("", "\n", "a", "a\n", "\n\nab\n", "b a\nab", "a \nb\n\n", "xb\na\nb", "ab\n\n")


@pytest.mark.parametrize(
    "pattern",
    [r"a", r"^a", r"a$", r"^$", r"x*", r"a\s+b", r"\bab\b", r"[^a]b", r"(?s)a.b", r"$", r"ab|ba"],
)
def test_only_lines_a_line_by_line_search_finds(workspace: Path, pattern: str) -> None:
    for n, text in enumerate(EDGE_TEXTS):
        (workspace / f"edge{n}.txt").write_text(text, encoding="utf-8")
    regex = re.compile(pattern)
    oracle = [
        (f"edge{n}.txt", number, line)
        for n, text in enumerate(EDGE_TEXTS)
        for number, line in enumerate(text.splitlines(), 1)
        if regex.search(line)
    ]
    found = grep_lines(Tree(workspace, "."), GrepQuery(regex, skip_dirs=frozenset({".toold"})))
    assert sorted((m.path, m.line_number, m.text) for m in found) == sorted(oracle)
