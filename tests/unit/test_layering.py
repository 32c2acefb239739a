"""Dependencies point one way (CONVENTIONS.md, Layout): read from the source, never imported.

The modules of ``toold`` and ``toold_protocol`` are parsed with ``ast``; nothing is
imported, so a module with side effects or a missing optional dependency cannot hide
an edge. Four rules:

- the protocol imports nothing of ``toold`` and nothing outside the standard library
  and pydantic;
- stores and subsystems never import the wire stack (pygls, lsprotocol, the server,
  handlers, rpc, transport, cli), not even for type checking;
- only the server imports the handlers (handlers → services, never the reverse), and a
  store imports another subsystem only along an edge listed in ``STORE_DEPENDENCIES``;
- no import cycles among modules, counting the imports that run at import time (module
  level, outside ``if TYPE_CHECKING``): a function-level import is how a cycle is
  deliberately broken, so it is not an edge.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = {
    "toold": REPO / "daemon" / "toold",
    "toold_protocol": REPO / "protocol" / "toold_protocol",
}

WIRE = (
    "pygls",
    "lsprotocol",
    "toold.server",
    "toold.connection",
    "toold.editor",
    "toold.handlers",
    "toold.rpc",
    "toold.transport",
    "toold.messages",
    "toold.cli",
    "toold.cli_parser",
)
"""The LSP-framed front end: only it may know about pygls and JSON-RPC plumbing."""

STORES = (
    "planning",
    "team",
    "jobs",
    "search",
    "sandbox",
    "tools",
    "permissions",
    "storage",
    "config",
    "config_loading",
    "checkpoints",
    "hooks",
)
SERVICES = ("agents", "workspace", "assembly", "config_gate", "gateway", "watch", "opening")
"""Below the wire too: they hold the workspace and the agents, whatever front end drives them."""

SANDBOX_PRIMITIVES = ("toold.sandbox.paths", "toold.sandbox.process")
"""The sandbox's two modules of OS primitives (the O_NOFOLLOW walk, process groups): below
everything, tools included; the rest of sandbox/ (runners, worker, channel) runs tools."""

STORE_DEPENDENCIES: dict[str, set[str]] = {
    # Every area may import the protocol, ``toold`` itself (the version), toold.errors (the
    # domain exceptions every front end maps), toold.terminal (untrusted text made safe to
    # show) and the sandbox's primitives; the rest is listed.
    # tools.annotations: the guard judges a tool by its own annotations (tools.registry,
    # imported in a function: a builtin's, when a caller passes none).
    "permissions": {"config", "hooks", "storage", "tools"},  # hooks: what pre hooks said
    "planning": {"storage"},
    # permissions.redaction for job output; fairness: a job runs outside its session's share
    "jobs": {"fairness", "permissions", "storage"},
    # checkpoints: one diff format; permissions.redaction: spill files are redacted
    # outcome: toolset re-exports ToolOutcome, whose home is toold.outcome
    "tools": {"checkpoints", "config", "outcome", "permissions", "search", "storage"},
    # The runners, the worker and the channel run tools (tools.registry, tools.context);
    # tools reach only the primitives below them (and the runner as a type).
    # fairness: a session's share of the runner; storage and user_state: the per-user
    # lock around a Docker image build.
    "sandbox": {"config", "fairness", "storage", "tools", "user_state"},
    "team": {"agents", "permissions", "storage", "tools", "watching"},  # mailbox wake-ups
    "checkpoints": {"config", "storage"},
    "hooks": {"config"},
    "config_loading": {"config"},  # reads toold.toml into the schema
}
TYPE_ONLY_DEPENDENCIES: dict[str, set[str]] = {
    # ToolRuntime names the managers it holds (under TYPE_CHECKING): they are built above
    # the tools, never imported by them.
    "tools": {"agents", "jobs", "planning", "team"},
}


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` (both dotted module names) at ``line``."""

    source: str
    target: str
    line: int
    runtime: bool
    """Executed when ``source`` is imported: module level, outside ``if TYPE_CHECKING``."""
    typing: bool = False
    """Only for the type checker: under ``if TYPE_CHECKING``."""

    def __str__(self) -> str:
        return f"{self.source} imports {self.target} (line {self.line})"


def find_modules(packages: dict[str, Path]) -> dict[str, Path]:
    """Every module's dotted name → its file (a package is named by its __init__.py)."""
    found = {}
    for top, root in packages.items():
        for path in sorted(root.rglob("*.py")):
            parts = [top, *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(
    body: Iterable[ast.stmt], runtime: bool, typing: bool = False
) -> Iterator[tuple[ast.stmt, bool, bool]]:
    """Every statement with whether it runs at import time (function bodies never do) and
    whether it is there for the type checker only."""
    for node in body:
        yield node, runtime, typing
        if isinstance(node, ast.If):
            checking = _type_checking(node.test)
            yield from _statements(node.body, runtime and not checking, typing or checking)
            yield from _statements(node.orelse, runtime, typing)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            inner = runtime and isinstance(node, ast.ClassDef)
            yield from _statements(node.body, inner, typing)
        else:
            for field in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field, []):
                    if isinstance(child, ast.ExceptHandler):
                        yield from _statements(child.body, runtime, typing)
                    elif isinstance(child, ast.stmt):
                        yield from _statements([child], runtime, typing)


def find_edges(modules: dict[str, Path]) -> list[Edge]:
    """Every import in every module; ``from pkg import sub`` names the submodule."""
    edges = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, runtime, typing in _statements(tree.body, True):
            if isinstance(node, ast.Import):
                edges += [
                    Edge(name, alias.name, node.lineno, runtime, typing) for alias in node.names
                ]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    edges.append(
                        Edge(name, full if full in modules else base, node.lineno, runtime, typing)
                    )
    return edges


def find_cycles(
    modules: Iterable[str], edges: Iterable[Edge], *, deferred: bool = False
) -> list[list[str]]:
    """Strongly connected components of more than one module (or a self-import), Tarjan's;
    counting module-level imports, and with ``deferred`` those inside functions too."""
    graph: dict[str, set[str]] = {module: set() for module in modules}
    for edge in edges:
        if (edge.runtime or (deferred and not edge.typing)) and edge.target in graph:
            graph[edge.source].add(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while (member := stack.pop()) != node:
                component.append(member)
            component.append(node)
            if len(component) > 1 or node in graph[node]:
                cycles.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return cycles


def area(module: str) -> str:
    """The subsystem a module belongs to: ``toold.jobs.manager`` → ``jobs``, ``toold.storage``
    → ``storage``, anything in toold_protocol → ``protocol``."""
    parts = module.split(".")
    if parts[0] == "toold_protocol":
        return "protocol"
    if module in SANDBOX_PRIMITIVES:
        return "primitives"
    return parts[1] if parts[0] == "toold" and len(parts) > 1 else parts[0]


def within(module: str, prefixes: Iterable[str]) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


MODULES = find_modules(PACKAGES)
EDGES = find_edges(MODULES)


def test_the_walk_sees_the_daemon() -> None:
    assert {"toold.server", "toold.jobs.manager", "toold_protocol.models"} <= set(MODULES)
    assert any(e.source == "toold.server" and within(e.target, ["pygls"]) for e in EDGES)


def test_protocol_imports_only_stdlib_and_pydantic() -> None:
    allowed = set(sys.stdlib_module_names) | {
        "pydantic",
        "pydantic_core",
        "toold_protocol",
        "__future__",
    }
    wrong = [
        str(e)
        for e in EDGES
        if area(e.source) == "protocol" and e.target.split(".")[0] not in allowed
    ]
    assert not wrong, "the wire contract must stay importable by any client:\n" + "\n".join(wrong)


def test_stores_and_services_never_import_the_wire_stack() -> None:
    wrong = [
        str(e) for e in EDGES if area(e.source) in STORES + SERVICES and within(e.target, WIRE)
    ]
    assert not wrong, "move the wire-facing part to handlers/ or server.py:\n" + "\n".join(wrong)


def test_only_the_server_imports_handlers() -> None:
    wrong = [
        str(e)
        for e in EDGES
        if within(e.target, ["toold.handlers"])
        and not within(e.source, ["toold.handlers", "toold.server"])
    ]
    assert not wrong, "handlers depend on services, never the reverse:\n" + "\n".join(wrong)


def test_stores_import_other_subsystems_only_along_listed_edges() -> None:
    everyone = {"protocol", "toold", "errors", "terminal", "primitives"}
    wrong = [
        f"{e} ({area(e.source)} → {area(e.target)})"
        for e in EDGES
        if area(e.source) in STORES
        and within(e.target, ["toold", "toold_protocol"])
        and area(e.target)
        not in everyone
        | {area(e.source)}
        | STORE_DEPENDENCIES.get(area(e.source), set())
        | (set() if e.runtime else TYPE_ONLY_DEPENDENCIES.get(area(e.source), set()))
    ]
    assert not wrong, (
        "a store reaches into another subsystem; move the shared piece down (storage.py, "
        "sandbox/paths.py) or, if the dependency is meant, add it to STORE_DEPENDENCIES "
        "with the reason:\n" + "\n".join(wrong)
    )


def test_every_listed_store_edge_is_still_used() -> None:
    """STORE_DEPENDENCIES stays true: an edge nothing uses any more is struck off."""
    used = {(area(e.source), area(e.target)) for e in EDGES if within(e.target, ["toold"])}
    stale = [f"{s} → {t}" for s, targets in STORE_DEPENDENCIES.items() for t in targets]
    stale = [edge for edge in stale if tuple(edge.split(" → ")) not in used]
    assert not stale, "remove from STORE_DEPENDENCIES: " + ", ".join(stale)


def test_no_import_cycles() -> None:
    cycles = find_cycles(MODULES, EDGES)
    assert not cycles, "import cycles (module level, outside TYPE_CHECKING):\n" + "\n".join(
        " ↔ ".join(cycle) for cycle in cycles
    )


@pytest.mark.parametrize("guarded", [False, True])
def test_the_checks_can_fail(tmp_path: Path, guarded: bool) -> None:
    """A made-up package with a cycle and a sideways store import is caught."""
    root = tmp_path / "toold"
    (root / "jobs").mkdir(parents=True)
    (root / "planning").mkdir()
    for init in (root, root / "jobs", root / "planning"):
        (init / "__init__.py").write_text("")
    back = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    " if guarded else ""
    (root / "jobs" / "manager.py").write_text("from toold.planning.tasks import now\n")
    (root / "planning" / "tasks.py").write_text(f"{back}from ..jobs import manager\n")
    modules = find_modules({"toold": root})
    edges = find_edges(modules)
    assert {(e.source, e.target, e.runtime) for e in edges if within(e.target, ["toold"])} == {
        ("toold.jobs.manager", "toold.planning.tasks", True),
        ("toold.planning.tasks", "toold.jobs.manager", not guarded),
    }
    assert find_cycles(modules, edges) == (
        [] if guarded else [["toold.jobs.manager", "toold.planning.tasks"]]
    )
    assert "planning" not in STORE_DEPENDENCIES["jobs"]


def test_no_test_module_imports_another() -> None:
    """Shared test helpers live in conftest.py or a helper module (tests/processes.py,
    tests/waiting.py, tests/*/support.py), never in a test module another one imports."""
    tests = REPO / "tests"
    wrong = [
        str(edge)
        for edge in find_edges(find_modules({"tests": tests}))
        if edge.target.rpartition(".")[2].startswith("test_")
    ]
    assert not wrong, "\n".join(wrong)


def test_no_cycles_through_deferred_imports() -> None:
    """An import inside a function still ties the two modules together: a cycle through
    one is a layering mistake put off until call time, not a design."""
    cycles = find_cycles(MODULES, EDGES, deferred=True)
    assert not cycles, "import cycles (counting imports inside functions):\n" + "\n".join(
        " ↔ ".join(cycle) for cycle in cycles
    )


def test_the_sandbox_primitives_import_nothing_of_toold() -> None:
    wrong = [
        str(e)
        for e in EDGES
        if e.source in SANDBOX_PRIMITIVES
        and within(e.target, ["toold"])
        and e.target not in SANDBOX_PRIMITIVES
    ]
    assert not wrong, "the primitives sit below every subsystem:\n" + "\n".join(wrong)


OPENERS = {"toold.assembly": "bind", "toold.watch": "watch_workspace"}
"""What opens a workspace: only toold.opening.open_workspace calls them (issue 28)."""


def _openers_used(path: Path) -> set[str]:
    """``toold.assembly.bind`` / ``toold.watch.watch_workspace`` as ``path`` reaches them:
    imported by name, or as an attribute of their module imported whole."""
    found = set()
    modules: dict[str, str] = {}  # local name → module imported whole
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module in OPENERS:
            found |= {node.module for a in node.names if a.name == OPENERS[node.module]}
        elif isinstance(node, ast.ImportFrom) and node.module == "toold":
            modules |= {a.asname or a.name: f"toold.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            modules |= {a.asname or a.name: a.name for a in node.names if a.name in OPENERS}
        elif isinstance(node, ast.Attribute):
            module = modules.get(ast.unparse(node.value), "")
            if OPENERS.get(module) == node.attr:
                found.add(module)
    return found


def test_only_open_workspace_binds_and_watches() -> None:
    """Every front end opens its workspace through toold.opening.open_workspace: bind →
    watch → serve → aclose in one place, never a copy of its own."""
    users = {name: _openers_used(path) for name, path in MODULES.items()}
    assert users["toold.opening"] == set(OPENERS), "the pin no longer sees open_workspace"
    wrong = [f"{name} uses {', '.join(sorted(used))}" for name, used in users.items() if used]
    wrong = [line for line in wrong if not line.startswith("toold.opening ")]
    assert not wrong, "open the workspace with toold.opening.open_workspace:\n" + "\n".join(wrong)


def test_no_front_end_re_judges_a_call_or_reads_a_refusal_text() -> None:
    """A verdict is data (issue 28): front ends render the outcome's fields. Only the guard
    and the gateway name DENIED, and only the guard calls ``decide``."""
    wrong = []
    for name, path in MODULES.items():
        if within(name, ["toold.permissions"]):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and name != "toold.gateway":
                wrong += [f"{name} imports DENIED" for a in node.names if a.name == "DENIED"]
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "decide"
            ):
                wrong.append(f"{name} calls {ast.unparse(node.func)} (line {node.lineno})")
    assert not wrong, "render the outcome's decision, rule and remedy:\n" + "\n".join(wrong)


RUNS_TOOLS = ("toold.dispatch", "toold.sandbox", "toold.compat")
"""Where a tool is run (``Tool.call``, ``runner.run(tool, args)``): the one dispatch below
ToolGateway.call, the sandboxes it hands calls to, and the seeds' faces (issue 28)."""
DISPATCHED_BY = {"toold.gateway", "toold.workspace"}
"""Who reaches toold.dispatch: the gateway, and a background job's command (judged when the
job was submitted) in WorkspaceState.run_job_command."""


def _tool_runs(tree: ast.AST) -> list[int]:
    """Lines that run a tool: ``<x>.call(args)`` (Tool.call takes one argument; a gateway's
    call takes three) or ``<runner>.run(tool, args)``."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and not node.keywords
        and (
            (node.func.attr == "call" and len(node.args) == 1)
            or (
                node.func.attr == "run"
                and len(node.args) == 2
                and "runner" in ast.unparse(node.func.value).lower()
            )
        )
    ]


def test_one_run_path() -> None:
    """A tool runs only through ToolGateway.call → toold.dispatch (and the sandboxes below
    it) or a seed's face in toold.compat; ToolSet is a collection that runs nothing."""
    runs = {
        name: _tool_runs(ast.parse(path.read_text(encoding="utf-8")))
        for name, path in MODULES.items()
    }
    assert runs["toold.dispatch"] and runs["toold.compat.bareagent"], "the pin sees no run"
    wrong = [
        f"{name} line {line}"
        for name, lines in runs.items()
        if not within(name, RUNS_TOOLS)
        for line in lines
    ]
    assert not wrong, "run a tool through ToolGateway.call:\n" + "\n".join(wrong)
    importers = {e.source for e in EDGES if e.target == "toold.dispatch"}
    assert importers == DISPATCHED_BY
    toolset = ast.parse(MODULES["toold.tools.toolset"].read_text(encoding="utf-8"))
    [cls] = [n for n in toolset.body if isinstance(n, ast.ClassDef) and n.name == "ToolSet"]
    methods = {n.name for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    assert not methods & {"run", "call", "execute", "invoke"}, "ToolSet only collects tools"
    base = ast.parse(MODULES["toold.tools.base"].read_text(encoding="utf-8"))
    [tool] = [n for n in base.body if isinstance(n, ast.ClassDef) and n.name == "Tool"]
    assert "execute" not in {n.name for n in tool.body if isinstance(n, ast.AsyncFunctionDef)}


def test_the_run_path_pin_can_fail() -> None:
    """The pin sees a Tool.call and a runner's run, and neither a gateway's call nor another
    object's run."""
    source = "async def f(tool, runner, gateway):\n"
    source += "    await gateway.call('bash', {}, ctx)\n    await tool.call({})\n"
    source += "    await self.runner.run(tool, {})\n    ScriptRunner(s).run(script)\n"
    assert _tool_runs(ast.parse(source)) == [3, 4]
