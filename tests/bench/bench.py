"""Benchmark of the toold daemon against a bare pygls server and ripgrep.

Usage: ``python tests/bench/bench.py [--quick] [--out FILE] [--grep-root DIR]``

Measures, in one run:

1. cold start: spawn the server, send ``initialize``, time until its response
   (toold vs. ``bare_pygls_server.py``, the floor);
2. ``tools/call read_file`` round trips over one stdio connection, sequential
   (p50/p99, calls/s) and pipelined, vs. a bare pygls ``bench/readFile`` request;
3. ``tools/call grep`` over this interpreter's site-packages vs. ``rg`` itself;
4. read_file sequential calls/s against the floor (``floor_server.py``: stdlib only),
   interleaved, and an idle daemon's wake-ups, CPU and resident memory (``floor.py``).

It prints a table and writes the raw figures and the machine description as JSON
(default ``tests/bench/results.json``). It talks to the servers with the bench's own
small framing client (``lsp.py`` here), so it measures the daemon and not toold's client
code.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import floor
from lsp import Client, frame, initialize_params, toold_argv

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
BARE_SERVER = HERE / "bare_pygls_server.py"
DEFAULT_OUT = HERE / "results.json"

COLD_START_TARGET_S = 0.1
PIPELINE_DEPTH = 50
GREP_REGEX_TARGET = 1.5
GREP_CAP = 1000  # toold's grep_max_matches default
GREP_PATTERNS = (
    ("literal", "def __init__"),
    ("rare literal", "ZeroDivisionError"),
    ("regex", r"class \w+Error\("),
)


@dataclass(frozen=True)
class Settings:
    cold_runs: int
    read_calls: int
    read_connections: int
    grep_runs: int
    floor_rounds: int
    floor_calls: int
    idle_s: float


FULL = Settings(
    cold_runs=10,
    read_calls=2000,
    read_connections=3,
    grep_runs=3,
    floor_rounds=8,
    floor_calls=2000,
    idle_s=10.0,
)
QUICK = Settings(
    cold_runs=3,
    read_calls=300,
    read_connections=1,
    grep_runs=1,
    floor_rounds=2,
    floor_calls=500,
    idle_s=3.0,
)


class BenchError(RuntimeError):
    """A server misbehaved (died, answered with an error)."""


# --------------------------------------------------------------------------- client


class Server(Client):
    """A spawned server and the bench's blocking JSON-RPC client (see lsp.py)."""

    error = BenchError

    def send_bytes(self, data: bytes) -> None:
        """Write raw frame bytes (several frames at once when pipelining)."""
        self.stdin.write(data)
        self.stdin.flush()

    def request_frame(self, method: str, params: Any) -> tuple[int, bytes]:
        """A request frame and its id."""
        msg_id, message = self.new_request(method, params)
        return msg_id, frame(message)


def bench_initialize_params(workspace: Path) -> dict[str, Any]:
    return initialize_params(workspace, clientInfo={"name": "toold-bench"})


def toold_server(workspace: Path) -> Server:
    """Spawn toold on ``workspace``."""
    return Server(toold_argv(workspace), name="toold")


def bare_server() -> Server:
    """Spawn the bare pygls server."""
    return Server([sys.executable, os.fspath(BARE_SERVER)], name="bare pygls")


def started(server: Server, workspace: Path) -> Server:
    """Initialize and send initialized (the server is stopped if that fails)."""
    server.initialize(bench_initialize_params(workspace))
    return server


# --------------------------------------------------------------------------- stats


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def percentile(samples: list[float], pct: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), round(pct / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


# --------------------------------------------------------------------------- benchmarks


def cold_once(
    make: Callable[[], Server], workspace: Path, first_call: tuple[str, Any] | None = None
) -> tuple[float, float | None]:
    """Seconds from spawn to the initialize response, and to a first call's response.

    toold loads pydantic and its tools after answering initialize, so the second
    figure shows when it can actually serve a tool.
    """
    init = frame(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": bench_initialize_params(workspace),
        }
    )
    start = time.perf_counter()
    server = make()
    first: float | None = None
    try:
        server.last_id = 1
        server.send_bytes(init)
        response = server.read_response()
        elapsed = time.perf_counter() - start
        server.result_of(response, 1, "initialize")
        if first_call is not None:
            server.notify("initialized", {})
            server.request(*first_call)
            first = time.perf_counter() - start
    finally:
        server.stop()
    return elapsed, first


def bench_cold_start(workspace: Path, settings: Settings) -> dict[str, Any]:
    """Alternate toold and bare runs so drift hits both alike; one untimed warm-up each."""
    small = workspace / "small.txt"
    toold_call = ("tools/call", {"name": "read_file", "arguments": {"file_path": small.name}})
    bare_call = ("bench/readFile", {"path": os.fspath(small)})
    cold_once(lambda: toold_server(workspace), workspace)
    cold_once(bare_server, workspace)
    toold_s: list[float] = []
    bare_s: list[float] = []
    toold_first: list[float] = []
    bare_first: list[float] = []
    for _ in range(settings.cold_runs):
        init_s, first_s = cold_once(lambda: toold_server(workspace), workspace, toold_call)
        toold_s.append(init_s)
        toold_first.append(first_s or 0.0)
        init_s, first_s = cold_once(bare_server, workspace, bare_call)
        bare_s.append(init_s)
        bare_first.append(first_s or 0.0)
    python_s = []
    for _ in range(settings.cold_runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        python_s.append(time.perf_counter() - start)
    toold_med = statistics.median(toold_s)
    bare_med = statistics.median(bare_s)
    return {
        "runs": settings.cold_runs,
        "toold_ms": [ms(s) for s in toold_s],
        "bare_ms": [ms(s) for s in bare_s],
        "toold_median_ms": ms(toold_med),
        "bare_median_ms": ms(bare_med),
        "difference_ms": ms(toold_med - bare_med),
        "toold_first_call_median_ms": ms(statistics.median(toold_first)),
        "bare_first_call_median_ms": ms(statistics.median(bare_first)),
        "python_pass_median_ms": ms(statistics.median(python_s)),
        "target_ms": ms(COLD_START_TARGET_S),
        "meets_target": toold_med <= bare_med + COLD_START_TARGET_S,
        "first_call_meets_target": statistics.median(toold_first)
        <= statistics.median(bare_first) + COLD_START_TARGET_S,
    }


def round_trips(server: Server, method: str, params: Any, calls: int, check: Any) -> dict[str, Any]:
    """Sequential and pipelined round trips of one request over one connection."""
    warmup = min(100, calls)
    for _ in range(warmup):  # imports, caches, pydantic schemas
        check(server.request(method, params))
    latencies: list[float] = []
    begin = time.perf_counter()
    for _ in range(calls):
        msg_id, data = server.request_frame(method, params)
        start = time.perf_counter()
        server.send_bytes(data)
        response = server.read_response()
        latencies.append(time.perf_counter() - start)
        check(server.result_of(response, msg_id, method))
    sequential_s = time.perf_counter() - begin

    batches = max(1, calls // PIPELINE_DEPTH)
    begin = time.perf_counter()
    for _ in range(batches):
        frames = [server.request_frame(method, params) for _ in range(PIPELINE_DEPTH)]
        server.send_bytes(b"".join(data for _, data in frames))
        pending = {msg_id for msg_id, _ in frames}
        for _ in range(PIPELINE_DEPTH):
            response = server.read_response()
            got = response.get("id")
            if not isinstance(got, int) or got not in pending:
                raise BenchError(f"{server.name}: unexpected response {response}")
            pending.discard(got)
            check(server.result_of(response, got, method))
    pipelined_s = time.perf_counter() - begin
    return {
        "warmup_calls": warmup,
        "calls": calls,
        "p50_ms": ms(percentile(latencies, 50)),
        "p99_ms": ms(percentile(latencies, 99)),
        "mean_ms": ms(statistics.fmean(latencies)),
        "max_ms": ms(max(latencies)),
        "calls_per_s": round(calls / sequential_s, 1),
        "pipelined_calls": batches * PIPELINE_DEPTH,
        "pipeline_depth": PIPELINE_DEPTH,
        "pipelined_calls_per_s": round(batches * PIPELINE_DEPTH / pipelined_s, 1),
    }


def bench_read_file(workspace: Path, small: Path, settings: Settings) -> dict[str, Any]:
    expected_text = small.read_text(encoding="utf-8")
    expected_first = "1: " + expected_text.splitlines()[0]

    def check_toold(result: Any) -> None:
        if result.get("isError") or not str(result.get("content", "")).startswith(expected_first):
            raise BenchError(f"toold read_file returned {result!r}")

    def check_bare(result: Any) -> None:
        if result.get("text") != expected_text:
            raise BenchError(f"bare readFile returned {result!r}")

    toold_params = {"name": "read_file", "arguments": {"file_path": small.name}}
    bare_params = {"path": os.fspath(small)}
    rounds: dict[str, list[dict[str, Any]]] = {"toold": [], "bare": []}
    # Each connection is a fresh server; alternate them so drift hits both alike.
    for _ in range(settings.read_connections):
        for key, make, method, params, check in (
            ("toold", lambda: toold_server(workspace), "tools/call", toold_params, check_toold),
            ("bare", bare_server, "bench/readFile", bare_params, check_bare),
        ):
            with started(make(), workspace) as server:
                stats = round_trips(server, method, params, settings.read_calls, check)
                stats["rss_after_kib"] = server.rss_kib()
            rounds[key].append(stats)
    results: dict[str, Any] = {
        "file_bytes": small.stat().st_size,
        "connections": settings.read_connections,
    }
    for key, stats_list in rounds.items():
        summary = {
            name: statistics.median(s[name] for s in stats_list)
            for name in ("p50_ms", "p99_ms", "mean_ms", "calls_per_s", "pipelined_calls_per_s")
        }
        summary["p50_ms_range"] = [
            min(s["p50_ms"] for s in stats_list),
            max(s["p50_ms"] for s in stats_list),
        ]
        for name in ("warmup_calls", "calls", "pipelined_calls", "pipeline_depth"):
            summary[name] = stats_list[0][name]
        summary["rss_after_kib"] = stats_list[-1]["rss_after_kib"]
        summary["connections"] = stats_list
        results[key] = summary
    return results


def ripgrep() -> str:
    local = Path(sys.executable).with_name("rg")
    found = os.fspath(local) if local.exists() else shutil.which("rg")
    if found is None:
        raise BenchError("ripgrep (rg) not found next to python nor on PATH")
    return found


def rg_once(rg: str, pattern: str, root: Path) -> tuple[float, int]:
    """Seconds and output lines of ``rg -n --no-ignore --hidden -e PATTERN DIR``."""
    argv = [rg, "-n", "--no-ignore", "--hidden", "-e", pattern, os.fspath(root)]
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise BenchError(f"rg failed ({proc.returncode}): {proc.stderr[-500:]!r}")
    return elapsed, proc.stdout.count(b"\n")


def toold_grep_once(server: Server, pattern: str) -> tuple[float, int]:
    """Seconds and matches of one tools/call grep round trip."""
    msg_id, data = server.request_frame(
        "tools/call", {"name": "grep", "arguments": {"pattern": pattern}}
    )
    start = time.perf_counter()
    server.send_bytes(data)
    response = server.read_response()
    elapsed = time.perf_counter() - start
    result = server.result_of(response, msg_id, "tools/call grep")
    content = result.get("content")
    if result.get("isError") or not isinstance(content, list):
        raise BenchError(f"toold grep returned {str(result)[:500]}")
    if content and content[0].startswith("Invalid regex pattern"):
        raise BenchError(content[0])
    return elapsed, len(content)


def bench_grep(root: Path, settings: Settings) -> dict[str, Any]:
    rg = ripgrep()
    files = sum(len(names) for _, _, names in os.walk(root))
    # Warm the page cache: one full pass of rg over every file, then one toold call.
    rg_once(rg, "a-pattern-that-matches-nothing-7f3a", root)
    results: dict[str, Any] = {
        "root": os.fspath(root),
        "files": files,
        "toold_cap": GREP_CAP,
        "rg_argv": "rg -n --no-ignore --hidden -e PATTERN DIR",
        "patterns": [],
    }
    with started(toold_server(root), root) as server:
        toold_grep_once(server, GREP_PATTERNS[1][1])
        for kind, pattern in GREP_PATTERNS:
            toold_s, rg_s = [], []
            toold_n = rg_n = 0
            for _ in range(settings.grep_runs):
                elapsed, toold_n = toold_grep_once(server, pattern)
                toold_s.append(elapsed)
                elapsed, rg_n = rg_once(rg, pattern, root)
                rg_s.append(elapsed)
            toold_med, rg_med = statistics.median(toold_s), statistics.median(rg_s)
            results["patterns"].append(
                {
                    "kind": kind,
                    "pattern": pattern,
                    "runs": settings.grep_runs,
                    "toold_ms": [ms(s) for s in toold_s],
                    "rg_ms": [ms(s) for s in rg_s],
                    "toold_median_ms": ms(toold_med),
                    "rg_median_ms": ms(rg_med),
                    "ratio": round(toold_med / rg_med, 2),
                    "toold_matches": toold_n,
                    "rg_lines": rg_n,
                }
            )
        results["toold_rss_after_kib"] = server.rss_kib()
    return results


# --------------------------------------------------------------------------- report


def machine_info() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    rg_version = subprocess.run(
        [ripgrep(), "--version"], capture_output=True, text=True, check=False
    ).stdout.split("\n", 1)[0]
    git = subprocess.run(
        ["git", "-C", os.fspath(REPO), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return {
        "cpu_model": cpu,
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "pygls": metadata.version("pygls"),
        "lsprotocol": metadata.version("lsprotocol"),
        "ripgrep": rg_version,
        "toold_git": git or "unknown",
    }


def table(results: dict[str, Any]) -> str:
    rows: list[tuple[str, str, str, str, str]] = [
        ("measurement", "toold", "baseline", "toold vs baseline", "note")
    ]
    cold = results["cold_start"]
    verdict = "meets" if cold["meets_target"] else "MISSES"
    rows.append(
        (
            f"cold start → initialize response (median of {cold['runs']})",
            f"{cold['toold_median_ms']:.1f} ms",
            f"{cold['bare_median_ms']:.1f} ms",
            f"{cold['difference_ms']:+.1f} ms",
            f"baseline: bare pygls; {verdict} target ≤ +{cold['target_ms']:.0f} ms; "
            f"`python -c pass` takes {cold['python_pass_median_ms']:.0f} ms",
        )
    )
    first_gap = cold["toold_first_call_median_ms"] - cold["bare_first_call_median_ms"]
    rows.append(
        (
            "cold start → first read_file result",
            f"{cold['toold_first_call_median_ms']:.1f} ms",
            f"{cold['bare_first_call_median_ms']:.1f} ms",
            f"{first_gap:+.1f} ms",
            "includes loading pydantic, the protocol models and the tools; "
            f"{'meets' if cold['first_call_meets_target'] else 'MISSES'} "
            f"target ≤ +{cold['target_ms']:.0f} ms",
        )
    )
    rf = results["read_file"]
    t, b = rf["toold"], rf["bare"]
    notes = {
        "p50_ms": f"{rf['file_bytes']} B file; baseline: bare pygls bench/readFile",
        "p99_ms": f"{t['calls']} calls per connection, median of {rf['connections']} connections",
        "calls_per_s": (
            f"toold p50 ranged {t['p50_ms_range'][0]:.3f}–{t['p50_ms_range'][1]:.3f} ms "
            "across connections"
        ),
    }
    for label, key, unit in (
        ("p50", "p50_ms", "ms"),
        ("p99", "p99_ms", "ms"),
        ("sequential", "calls_per_s", "calls/s"),
        (f"pipelined ({t['pipeline_depth']} in flight)", "pipelined_calls_per_s", "calls/s"),
    ):
        fmt = ".3f" if unit == "ms" else ".0f"
        rows.append(
            (
                f"tools/call read_file {label}",
                f"{t[key]:{fmt}} {unit}",
                f"{b[key]:{fmt}} {unit}",
                f"×{t[key] / b[key]:.2f}",
                notes.get(key, ""),
            )
        )
    grep = results["grep"]
    for p in grep["patterns"]:
        capped = " (capped)" if p["toold_matches"] >= grep["toold_cap"] else ""
        if p["kind"] == "regex":
            verdict = "meets" if p["ratio"] <= GREP_REGEX_TARGET else "MISSES"
            capped += f"; {verdict} target ≤ ×{GREP_REGEX_TARGET}"
        rows.append(
            (
                f"grep {p['kind']} `{p['pattern']}` (median of {p['runs']})",
                f"{p['toold_median_ms']:.0f} ms",
                f"{p['rg_median_ms']:.0f} ms",
                f"×{p['ratio']:.2f}",
                f"matches: toold {p['toold_matches']}{capped}, rg {p['rg_lines']} lines",
            )
        )
    rows += floor.rows(results["floor"], results["idle"])
    rows.append(
        (
            "RSS after the read_file runs",
            f"{t['rss_after_kib'] / 1024:.1f} MiB",
            f"{b['rss_after_kib'] / 1024:.1f} MiB",
            f"{(t['rss_after_kib'] - b['rss_after_kib']) / 1024:+.1f} MiB",
            f"after {t['calls'] + t['pipelined_calls'] + t['warmup_calls']} requests",
        )
    )
    rows.append(
        (
            "RSS after the grep runs",
            f"{grep['toold_rss_after_kib'] / 1024:.1f} MiB",
            "",
            "",
            "",
        )
    )
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = []
    for n, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def footnotes(results: dict[str, Any]) -> str:
    m = results["machine"]
    grep = results["grep"]
    return "\n".join(
        (
            f"machine: {m['cpu_model']}, {m['cores']} cores, Python {m['python']}, "
            f"pygls {m['pygls']}, {m['ripgrep']}, toold {m['toold_git']}",
            f"grep tree: {grep['root']} ({grep['files']} files); baseline is "
            f"`{grep['rg_argv']}` (a fresh process, output lines counted).",
            f"toold stops at {grep['toold_cap']} matches and skips __pycache__, .git, .venv, "
            "node_modules, files over 1 MB and non-UTF-8 files; rg reports every match. "
            "Both runs follow a cache-warming rg pass.",
        )
    )


SECTIONS = {
    "state": ("state", "bench_state"),
    "agents": ("agents", "bench_agents"),
    "runners": ("runners", "bench_runners"),
    "peers": ("peers", "bench_peers"),
    "engine": ("engine", "bench_engine"),
}
"""Further benchmarks, each in its own module next to this file: name → (module, function)."""


def flatten(data: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Rows ``(dotted.key, value)`` of a nested result, for the sections table."""
    if isinstance(data, dict):
        rows: list[tuple[str, str]] = []
        for key, value in data.items():
            rows += flatten(value, f"{prefix}.{key}" if prefix else str(key))
        return rows
    if isinstance(data, list):
        if len(data) > 6:
            return [(prefix, f"[{len(data)} values]")]
        return [(prefix, ", ".join(str(v) for v in data))]
    return [(prefix, str(data))]


def run_sections(names: list[str], quick: bool, results: dict[str, Any], started: float) -> None:
    """Run the named sections; print a table of each."""
    import importlib

    for name in names:
        module_name, func = SECTIONS[name]
        print(f"[{time.perf_counter() - started:5.1f} s] {name} …", file=sys.stderr, flush=True)
        results[name] = getattr(importlib.import_module(module_name), func)(quick)
        rows = flatten(results[name])
        width = max(len(k) for k, _ in rows)
        print(f"\n{name}")
        print("\n".join(f"  {k:<{width}}  {v}" for k, v in rows))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs (about a minute)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results JSON file")
    parser.add_argument(
        "--grep-root",
        type=Path,
        default=Path(sysconfig.get_paths()["purelib"]),
        help="tree for the grep benchmark (default: site-packages)",
    )
    parser.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help="further sections to run, comma-separated ('' for none; default: all)",
    )
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else FULL
    sections = [n for n in args.sections.split(",") if n]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    started_at = time.perf_counter()

    results: dict[str, Any] = {
        "mode": "quick" if args.quick else "full",
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine_info(),
    }
    with tempfile.TemporaryDirectory(prefix="toold-bench-") as tmp:
        workspace = Path(tmp).resolve()
        small = workspace / "small.txt"
        small.write_text(
            "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(20)),
            encoding="utf-8",
        )
        steps = (
            ("cold_start", lambda: bench_cold_start(workspace, settings)),
            ("read_file", lambda: bench_read_file(workspace, small, settings)),
            ("grep", lambda: bench_grep(args.grep_root.resolve(), settings)),
            (
                "floor",
                lambda: floor.bench_floor(
                    workspace, small, settings.floor_rounds, settings.floor_calls
                ),
            ),
            ("idle", lambda: floor.bench_idle(workspace, settings.idle_s)),
        )
        for key, step in steps:
            elapsed = time.perf_counter() - started_at
            print(f"[{elapsed:5.1f} s] {key} …", file=sys.stderr, flush=True)
            results[key] = step()
    print(table(results))
    print()
    print(footnotes(results))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    run_sections(sections, args.quick, results, started_at)
    results["bench_seconds"] = round(time.perf_counter() - started_at, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nresults written to {args.out} ({results['bench_seconds']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
