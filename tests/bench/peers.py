"""toold against the MCP reference filesystem server, side by side on one workload.

Usage: ``python tests/bench/peers.py [--quick] [--out FILE]``; ``bench_peers(quick)``
returns the same figures as a dict (bench.py embeds them).

Both servers run over stdio on the same temporary workspace and are driven by the same
small client, call by call in alternation (toold, MCP, toold, MCP, ...), so machine noise
hits both alike:

- toold: ``python -m toold serve`` with LSP framing (``Content-Length``),
  ``tools/call`` with origin ``user`` (no permission prompts);
- the peer: ``@modelcontextprotocol/server-filesystem`` (pinned below) under node, MCP's
  newline-delimited JSON-RPC after its ``initialize`` handshake, installed with npm into
  ``tests/bench/.peers/`` (gitignored) on first use.

Operations (toold tool vs MCP tool): read a 20-line file (read_file vs read_text_file),
list a 50-entry folder (list_dir, or glob when list_dir is not registered, vs
list_directory; and vs list_directory_with_sizes, which stats each entry as list_dir
does), find files by name in a 240-file tree (glob ``*.md`` vs search_files
``**/*.md``) and write a 1 KiB file (write_file vs write_file). For each: calls per
second, p50 and p99 latency, and the ratio toold/MCP of calls per second (> 1: toold is
faster). toold's write_file replaces the file atomically (temp file + rename), the MCP
server writes in place; neither fsyncs by default, and a last row measures toold with
``files.fsync = true`` (a second daemon on the same workspace).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsp import Client, initialize_params, toold_argv

HERE = Path(__file__).resolve().parent
PEERS_DIR = HERE / ".peers"
MCP_PACKAGE = "@modelcontextprotocol/server-filesystem"
MCP_VERSION = "2026.8.31"
MCP_ENTRY = PEERS_DIR / "node_modules" / MCP_PACKAGE / "dist" / "index.js"
MCP_PROTOCOL_VERSION = "2025-06-18"
DEFAULT_OUT = HERE / "results-peers.json"

WRITE_CONTENT = "".join(
    f"written line {i:04d} of the benchmark payload.........\n" for i in range(18)
)


class PeerUnavailable(RuntimeError):
    """node, npm or the MCP server package cannot be had here."""


class PeerError(RuntimeError):
    """A server died or answered with an error."""


@dataclass(frozen=True)
class Plan:
    warmup: int
    calls: int


QUICK = Plan(warmup=30, calls=300)
FULL = Plan(warmup=200, calls=3000)


# --------------------------------------------------------------------------- clients


class LspClient(Client):
    """toold: LSP base-protocol framing (``Content-Length`` headers), see lsp.py."""

    error = PeerError

    def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """tools/call as a person would (origin user); the content, or PeerError."""
        params = {"name": tool, "arguments": arguments, "origin": "user"}
        result = self.request("tools/call", params)
        if result.get("isError"):
            raise PeerError(f"toold {tool}: {result.get('content')}")
        return result["content"]


class McpClient(Client):
    """MCP's stdio transport: one JSON-RPC message per line; the process as in lsp.py."""

    error = PeerError

    def send(self, message: dict[str, Any]) -> None:
        self.stdin.write(json.dumps(message, separators=(",", ":")).encode("utf-8") + b"\n")
        self.stdin.flush()

    def receive(self) -> dict[str, Any] | None:
        line = self.stdout.readline()
        if not line:
            return None
        message: dict[str, Any] = json.loads(line)
        return message

    def say_goodbye(self) -> None:
        """Close stdin: the MCP server exits at its end."""
        self.stdin.close()

    def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """tools/call; the text of the first content block, or PeerError."""
        result = self.request("tools/call", {"name": tool, "arguments": arguments})
        if result.get("isError"):
            raise PeerError(f"mcp {tool}: {result.get('content')}")
        return result["content"][0]["text"]


def start_toold(workspace: Path, config: dict[str, Any] | None = None) -> LspClient:
    """Spawn and initialize toold on ``workspace`` (``config``: initializationOptions)."""
    client = LspClient(toold_argv(workspace), name="toold", cwd=workspace)
    extra = {} if config is None else {"initializationOptions": {"config": config}}
    client.initialize(initialize_params(workspace, **extra))
    return client


def start_mcp(workspace: Path, node: str) -> McpClient:
    """Spawn the MCP server with ``workspace`` as its one allowed folder and initialize it."""
    argv = [node, os.fspath(MCP_ENTRY), os.fspath(workspace)]
    client = McpClient(argv, name="MCP server", cwd=workspace)
    params = {
        "protocolVersion": MCP_PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "toold-bench", "version": "0"},
    }
    client.initialize(params, initialized="notifications/initialized")
    return client


# --------------------------------------------------------------------------- setup


def ensure_mcp_server() -> str:
    """node's path, installing the pinned MCP server into tests/bench/.peers/ if needed."""
    node = shutil.which("node")
    if node is None:
        raise PeerUnavailable("node is not on PATH (apt-get install nodejs npm)")
    if not MCP_ENTRY.is_file():
        npm = shutil.which("npm")
        if npm is None:
            raise PeerUnavailable("npm is not on PATH (apt-get install npm)")
        PEERS_DIR.mkdir(parents=True, exist_ok=True)
        argv = [npm, "install", "--prefix", os.fspath(PEERS_DIR), "--no-audit", "--no-fund"]
        done = subprocess.run(
            [*argv, f"{MCP_PACKAGE}@{MCP_VERSION}"], capture_output=True, text=True, check=False
        )
        if done.returncode != 0 or not MCP_ENTRY.is_file():
            raise PeerUnavailable(f"npm install {MCP_PACKAGE} failed: {done.stderr[-1000:]}")
    return node


def make_workspace(root: Path) -> dict[str, int]:
    """The shared workload: a small file, a folder to list, a tree to search."""
    (root / "small.txt").write_text(
        "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(20)),
        encoding="utf-8",
    )
    folder = root / "folder"
    folder.mkdir()
    for i in range(45):
        (folder / f"file{i:02d}.txt").write_text("x\n", encoding="utf-8")
    for i in range(5):
        (folder / f"sub{i}").mkdir()
    md = 0
    for a in range(4):
        for b in range(6):
            leaf = root / "tree" / f"pkg{a}" / f"mod{b}"
            leaf.mkdir(parents=True)
            for c in range(10):
                suffix = ".md" if c == 0 else ".py"
                md += suffix == ".md"
                (leaf / f"f{c}{suffix}").write_text("pass\n", encoding="utf-8")
    (root / "out").mkdir()
    return {"folder_entries": 50, "tree_files": 240, "tree_md_files": md}


# --------------------------------------------------------------------------- workload

Op = tuple[Callable[[], Any], Callable[[], Any], Callable[[Any, Any], None]]


def operations(
    toold: LspClient,
    mcp: McpClient,
    workspace: Path,
    has_list_dir: bool,
    md_files: int,
    durable: LspClient,
) -> dict[str, Op]:
    """Each operation: (toold call, MCP call, check of both answers)."""
    ws = os.fspath(workspace)

    def same_read(t: Any, m: Any) -> None:
        if not (isinstance(t, str) and t.startswith("1: line 0:") and m.startswith("line 0:")):
            raise PeerError(f"read answers differ: {str(t)[:80]!r} / {str(m)[:80]!r}")

    def same_list(t: Any, m: Any) -> None:
        entries = len(t) if isinstance(t, list) else len(str(t).splitlines())
        if entries != len(m.splitlines()):
            raise PeerError(f"list answers differ: {str(t)[:200]!r} / {m[:200]!r}")

    def same_sized_list(t: Any, m: Any) -> None:
        if len(str(t).splitlines()) != 50 or "Total: 45 files, 5 directories" not in m:
            raise PeerError(f"sized list answers differ: {str(t)[:200]!r} / {m[-200:]!r}")

    def same_find(t: Any, m: Any) -> None:
        if not (isinstance(t, list) and len(t) == md_files == len(m.splitlines())):
            raise PeerError(f"find answers differ: {len(t)} / {len(m.splitlines())}")

    def wrote(t: Any, m: Any) -> None:
        if not (str(t).startswith("Wrote") and m.startswith("Successfully wrote")):
            raise PeerError(f"write answers: {t!r} / {m!r}")

    def new_file(call: Callable[[str, str], Any], prefix: str) -> Callable[[], Any]:
        """A call writing a new file each time (each one a checkpoint for toold, so the
        cost of history shows): ``call(path, content)``."""
        written = itertools.count()

        def write() -> Any:
            n = next(written)
            if n % 1000 == 0:  # the MCP server makes no folders: both get theirs made here
                (workspace / f"{prefix}{n // 1000}").mkdir(exist_ok=True)
            return call(f"{prefix}{n // 1000}/f{n}.txt", f"{n}\n{WRITE_CONTENT}")

        return write

    if has_list_dir:
        list_toold: Callable[[], Any] = lambda: toold.call("list_dir", {"path": "folder"})  # noqa: E731
    else:
        list_toold = lambda: toold.call("glob", {"pattern": "folder/*"})  # noqa: E731
    return {
        "read a small file": (
            lambda: toold.call("read_file", {"file_path": "small.txt"}),
            lambda: mcp.call("read_text_file", {"path": f"{ws}/small.txt"}),
            same_read,
        ),
        "list a folder": (
            list_toold,
            lambda: mcp.call("list_directory", {"path": f"{ws}/folder"}),
            same_list,
        ),
        "list a folder with sizes": (
            list_toold,
            lambda: mcp.call("list_directory_with_sizes", {"path": f"{ws}/folder"}),
            same_sized_list if has_list_dir else same_list,
        ),
        "find files by name": (
            lambda: toold.call("glob", {"pattern": "*.md", "path": "tree"}),
            lambda: mcp.call("search_files", {"path": f"{ws}/tree", "pattern": "**/*.md"}),
            same_find,
        ),
        "write a file": (
            lambda: toold.call(
                "write_file", {"file_path": "out/toold.txt", "content": WRITE_CONTENT}
            ),
            lambda: mcp.call("write_file", {"path": f"{ws}/out/mcp.txt", "content": WRITE_CONTENT}),
            wrote,
        ),
        "write a new file each call": (
            new_file(lambda p, c: toold.call("write_file", {"file_path": p, "content": c}), "t"),
            new_file(lambda p, c: mcp.call("write_file", {"path": f"{ws}/{p}", "content": c}), "m"),
            wrote,
        ),
        "write a file, toold with fsync": (
            lambda: durable.call(
                "write_file", {"file_path": "out/durable.txt", "content": WRITE_CONTENT}
            ),
            lambda: mcp.call("write_file", {"path": f"{ws}/out/mcp.txt", "content": WRITE_CONTENT}),
            wrote,
        ),
    }


def _timed(func: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = func()
    return time.perf_counter() - start, result


def _summary(seconds: list[float]) -> dict[str, Any]:
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {
        "calls": len(seconds),
        "calls_per_s": round(len(seconds) / sum(seconds), 1),
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p99_ms": round(p99 * 1000, 3),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 3),
    }


def measure(op: Op, plan: Plan) -> dict[str, Any]:
    """Warm up, then alternate toold and MCP calls one by one."""
    run_toold, run_mcp, check = op
    check(run_toold(), run_mcp())
    for _ in range(plan.warmup):
        run_toold()
        run_mcp()
    toold_s: list[float] = []
    mcp_s: list[float] = []
    for _ in range(plan.calls):
        elapsed, _ = _timed(run_toold)
        toold_s.append(elapsed)
        elapsed, _ = _timed(run_mcp)
        mcp_s.append(elapsed)
    toold, mcp = _summary(toold_s), _summary(mcp_s)
    return {
        "toold": toold,
        "mcp": mcp,
        "ratio_calls_per_s": round(toold["calls_per_s"] / mcp["calls_per_s"], 2),
    }


def _versions(node: str) -> dict[str, str]:
    package = json.loads((MCP_ENTRY.parent.parent / "package.json").read_text(encoding="utf-8"))
    node_version = subprocess.run(
        [node, "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return {
        "mcp_server": f"{MCP_PACKAGE} {package['version']}",
        "node": node_version,
        "python": sys.version.split()[0],
        "cpu_model": cpu,
        "cores": str(os.cpu_count()),
        "platform": platform.platform(),
    }


def bench_peers(quick: bool) -> dict[str, Any]:
    """Run the side-by-side workload; figures per operation plus the machine.

    Without node or npm (or the package) the result is ``{"unavailable": reason}``.
    """
    try:
        node = ensure_mcp_server()
    except PeerUnavailable as exc:
        return {"unavailable": str(exc)}
    plan = QUICK if quick else FULL
    with tempfile.TemporaryDirectory(prefix="toold-peers-") as tmp:
        workspace = Path(tmp).resolve()
        sizes = make_workspace(workspace)
        with (
            start_toold(workspace) as toold,
            start_toold(workspace, {"files": {"fsync": True}}) as durable,
            start_mcp(workspace, node) as mcp,
        ):
            tools = {t["name"] for t in toold.request("tools/list", {})["tools"]}
            has_list_dir = "list_dir" in tools
            md_files = sizes["tree_md_files"]
            ops = operations(toold, mcp, workspace, has_list_dir, md_files, durable)
            results: dict[str, Any] = {
                "mode": "quick" if quick else "full",
                "plan": {"warmup": plan.warmup, "calls": plan.calls},
                "workload": sizes,
                "tools": {
                    "read a small file": "read_file vs read_text_file",
                    "list a folder": f"{'list_dir' if has_list_dir else 'glob'} vs list_directory",
                    "list a folder with sizes": f"{'list_dir' if has_list_dir else 'glob'} vs "
                    "list_directory_with_sizes",
                    "find files by name": "glob '*.md' vs search_files '**/*.md'",
                    "write a file": "write_file (temp file + rename) vs write_file (in place)",
                    "write a new file each call": "write_file of a new 1 KiB file in a folder "
                    "of 1,000 (a checkpoint each for toold) vs write_file",
                    "write a file, toold with fsync": "write_file with files.fsync = true "
                    "(file and folder fsynced) vs write_file",
                },
                "operations": {name: measure(op, plan) for name, op in ops.items()},
                "rss_after_kib": {"toold": toold.rss_kib(), "mcp": mcp.rss_kib()},
                "versions": _versions(node),
            }
    return results


def table(results: dict[str, Any]) -> str:
    """The figures as an aligned text table."""
    rows = [
        (
            "operation",
            "toold calls/s",
            "MCP calls/s",
            "toold/MCP",
            "toold p50/p99 ms",
            "MCP p50/p99 ms",
        )
    ]
    for name, r in results["operations"].items():
        t, m = r["toold"], r["mcp"]
        rows.append(
            (
                name,
                f"{t['calls_per_s']:.0f}",
                f"{m['calls_per_s']:.0f}",
                f"×{r['ratio_calls_per_s']:.2f}",
                f"{t['p50_ms']:.3f} / {t['p99_ms']:.3f}",
                f"{m['p50_ms']:.3f} / {m['p99_ms']:.3f}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    v = results["versions"]
    lines.append("")
    lines.append(
        f"{results['plan']['calls']} alternating calls per server and operation after "
        f"{results['plan']['warmup']} warm-up calls; {v['mcp_server']} on node {v['node']}; "
        f"Python {v['python']}; {v['cpu_model']}, {v['cores']} cores"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results JSON file")
    args = parser.parse_args(argv)
    results = bench_peers(args.quick)
    if "unavailable" in results:
        print(f"peers: {results['unavailable']}", file=sys.stderr)
        return 2
    print(table(results))
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nresults written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
