"""duckduckgo_search: the lazy import path, Jianmu's strings, and a clear error offline.

The public internet cannot be reached here, so the real library is pointed (through its
own DDGS_PROXY setting) at proxies on 127.0.0.1: one that refuses connections and one
that never answers. Nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.calls import user_call
from toold.config import TooldConfig
from toold.tools import ToolRuntime, ToolSet
from toold.tools.builtin.web import DuckDuckGoSearchTool, format_results, resolve_ddgs_cls


def make_tool(workspace: Path, **settings: Any) -> DuckDuckGoSearchTool:
    config = TooldConfig.model_validate({"web_search": settings})
    return DuckDuckGoSearchTool(ToolRuntime(workspace=workspace, config=config))


def _search(tool: DuckDuckGoSearchTool) -> Any:
    """The content of a search for ``python`` through the gateway, as the user."""
    return asyncio.run(user_call(ToolSet([tool]), tool.name, {"query": "python"})).content


def test_missing_dependency_raises_the_documents_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # Simulates an environment where neither package is installed: a None entry in
    # sys.modules makes importing that name fail with ModuleNotFoundError.
    monkeypatch.setitem(sys.modules, "ddgs", None)
    monkeypatch.setitem(sys.modules, "duckduckgo_search", None)
    with pytest.raises(RuntimeError) as caught:
        resolve_ddgs_cls()
    message = str(caught.value)
    assert message.startswith(
        "DuckDuckGoSearchTool requires optional dependency 'ddgs' or 'duckduckgo-search'. "
        "Import details: ModuleNotFoundError: "
    )
    details = message.partition("Import details: ")[2]
    assert "ddgs" in details and "duckduckgo_search" in details


def test_missing_dependency_through_the_tool(
    monkeypatch: pytest.MonkeyPatch, workspace: Path
) -> None:
    monkeypatch.setitem(sys.modules, "ddgs", None)
    monkeypatch.setitem(sys.modules, "duckduckgo_search", None)
    tools = ToolSet.from_tools([make_tool(workspace)])
    outcome = asyncio.run(user_call(tools, "web_search", {"query": "python"}))
    assert outcome.is_error
    assert outcome.content.startswith(
        "Error: RuntimeError: DuckDuckGoSearchTool requires optional dependency 'ddgs'"
    )


def test_a_module_without_ddgs_falls_through(monkeypatch: pytest.MonkeyPatch) -> None:
    # A broken install: the module imports but has no DDGS class.
    monkeypatch.setitem(sys.modules, "ddgs", types.ModuleType("ddgs"))
    monkeypatch.setitem(sys.modules, "duckduckgo_search", None)
    with pytest.raises(RuntimeError, match="AttributeError: module 'ddgs' has no attribute 'DDGS'"):
        resolve_ddgs_cls()


def test_result_format() -> None:
    results = [
        {"title": "Python", "href": "https://python.org", "body": "The language"},
        {"title": "PyPI", "href": "https://pypi.org", "body": "Packages"},
    ]
    assert format_results(results) == (
        "[1] Python\nURL: https://python.org\nSnippet: The language\n"
        "\n"
        "[2] PyPI\nURL: https://pypi.org\nSnippet: Packages\n"
    )
    assert format_results([]) == "No results found for this query."


def test_schema() -> None:
    params = DuckDuckGoSearchTool().parameters()
    assert list(params["properties"]) == ["query", "max_results"]
    assert params["required"] == ["query"]


@pytest.fixture
def refusing_port() -> int:
    """A loopback port nobody listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that accepts connections and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield int(sock.getsockname()[1])


def test_offline_search_returns_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, workspace: Path, refusing_port: int
) -> None:
    pytest.importorskip("ddgs", reason="the optional 'web' extra (ddgs) is not installed")
    monkeypatch.setenv("DDGS_PROXY", f"http://127.0.0.1:{refusing_port}")
    result = _search(make_tool(workspace, timeout=10))
    assert result.startswith("Error performing search: ")


def test_unanswered_search_times_out(
    monkeypatch: pytest.MonkeyPatch, workspace: Path, silent_port: int
) -> None:
    pytest.importorskip("ddgs", reason="the optional 'web' extra (ddgs) is not installed")
    monkeypatch.setenv("DDGS_PROXY", f"http://127.0.0.1:{silent_port}")
    result = _search(make_tool(workspace, timeout=0.5))
    assert result == "Error performing search: no answer within 0.5s"


def test_alias_web_search() -> None:
    tools = ToolSet.resolve(["web_search"])
    assert tools.names() == ["duckduckgo_search"]
