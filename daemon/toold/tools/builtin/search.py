"""glob and grep over the workspace, on the shared search engine."""

from __future__ import annotations

import re
from collections import Counter

from pydantic import Field

from toold.search.grep import GrepQuery, grep_lines
from toold.search.patterns import compile_glob
from toold.search.walk import Tree
from toold.tools.annotations import SEARCHES
from toold.tools.base import ToolArguments
from toold.tools.builtin._workspace import WorkspaceTool

PATHS = {"type": "array", "items": {"type": "string"}}
"""Workspace-relative paths."""
LINES = {"type": "array", "items": {"type": "string"}}
"""grep's entries (``path:line:text``, paths or ``path:N``, by output_mode)."""
INCLUDE_IGNORED = "Also search files .gitignore, .ignore or .git/info/exclude leave out."


class GlobArguments(ToolArguments):
    pattern: str = Field(
        description=(
            "Glob pattern. Without '/' it matches file names at any depth ('*.py'); "
            "with '/' it is anchored at the search root, '**' spanning folders ('src/**/*.py')."
        )
    )
    path: str = Field(".", description="Folder (or file) to search from, workspace-relative.")
    include_ignored: bool = Field(False, description=INCLUDE_IGNORED)


class GrepArguments(ToolArguments):
    pattern: str = Field(description="Python regular expression, matched line by line.")
    path: str = Field(".", description="Folder (or file) to search, workspace-relative.")
    include: str = Field("", description="Optional glob filter on candidate files, e.g. '*.py'.")
    output_mode: str = Field(
        "content",
        description="'content' (path:line:text), 'files_with_matches' (paths) or 'count' (path:N).",
    )
    include_ignored: bool = Field(False, description=INCLUDE_IGNORED)


class GlobTool(WorkspaceTool):
    name = "glob"
    annotations = SEARCHES
    description = (
        "Find files by glob pattern; returns sorted workspace-relative paths. "
        "Skips .git, .venv, node_modules, caches and what .gitignore ignores unless path "
        "points inside one."
    )
    Arguments = GlobArguments
    output_schema = PATHS

    def run(self, args: GlobArguments) -> list[str]:
        """Sorted, de-duplicated workspace-relative paths of matching files."""
        matcher = compile_glob(args.pattern)
        try:
            # Walked from descriptors: no link followed.
            tree = Tree(self.workspace, args.path, respect_ignores=self.ignores(args))
        except (FileNotFoundError, NotADirectoryError):
            return []
        with tree:
            return sorted({f.path for f in tree.files() if matcher.match(f.rel)})


class GrepTool(WorkspaceTool):
    name = "grep"
    annotations = SEARCHES
    description = (
        "Search file contents with a Python regular expression; returns 'path:line:text' "
        "entries (at most 1000). Skips files over 1 MB and non-UTF-8 files."
    )
    Arguments = GrepArguments
    output_schema = LINES

    def run(self, args: GrepArguments) -> list[str]:
        """Matches in the spec's output modes."""
        try:
            regex = re.compile(args.pattern)
        except re.error as exc:
            return [f"Invalid regex pattern: {exc}"]
        query = GrepQuery(
            regex=regex,
            include=compile_glob(args.include) if args.include else None,
            max_matches=self.config.limits.grep_max_matches,
        )
        try:
            # Every line from a file opened by the walk.
            tree = Tree(self.workspace, args.path, respect_ignores=self.ignores(args))
        except (FileNotFoundError, NotADirectoryError):
            return []
        with tree:
            matches = list(grep_lines(tree, query))
        if args.output_mode == "files_with_matches":
            return list(dict.fromkeys(m.path for m in matches))
        if args.output_mode == "count":
            counts = Counter(m.path for m in matches)
            return [f"{rel}:{n}" for rel, n in counts.items()]
        return [f"{m.path}:{m.line_number}:{m.text}" for m in matches]


TOOLS = (GlobTool, GrepTool)
