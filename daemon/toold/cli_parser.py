"""The ``toold`` command line's arguments: the argparse parser of every subcommand, with
its flags and help texts, and ``--no-daemon`` (or ``TOOLD_NO_DAEMON=1``). What each
command does is toold.cli's.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from toold import __version__
from toold.client import NO_DAEMON_ENV


def _no_daemon_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-daemon",
        action="store_true",
        help=f"a private, short-lived daemon, not the workspace's engine (${NO_DAEMON_ENV}=1)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``toold`` parser: every subcommand with its flags and help texts."""
    parser = argparse.ArgumentParser(
        prog="toold",
        description="A per-workspace JSON-RPC daemon serving an AI agent's tools.",
    )
    parser.add_argument("--version", action="version", version=f"toold {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = sub.add_parser("serve", help="serve JSON-RPC (LSP framing) on stdin/stdout")
    serve.add_argument("--workspace", type=Path, help="workspace root (default: from initialize)")
    serve.add_argument("--log-file", type=Path, help="also log to this file")
    serve.add_argument("--log-level", default="warning", help="debug, info, warning, error")
    serve.add_argument("--max-message-bytes", type=int, help="largest accepted frame")
    # The LSP launch convention: vscode-languageclient appends --stdio (TransportKind.stdio),
    # and --clientProcessId=N for Node module servers.
    serve.add_argument(
        "--stdio", action="store_true", help="talk over stdin/stdout (the only transport)"
    )
    serve.add_argument(
        "--clientProcessId",
        dest="client_process_id",
        type=int,
        metavar="PID",
        help="exit when this process dies (like initialize's processId)",
    )
    _no_daemon_flag(serve)

    tools = sub.add_parser("tools", help="list the tools")
    tools.add_argument("--format", choices=["native", "anthropic", "openai"])
    tools.add_argument("--workspace", type=Path, default=Path.cwd())
    tools.add_argument("--json", action="store_true", help="print the JSON list")
    _no_daemon_flag(tools)

    call = sub.add_parser("call", help="call one tool and print its result")
    call.add_argument("name", help="tool name or alias")
    call.add_argument("arguments", nargs="?", default="{}", help="JSON object, or - for stdin")
    call.add_argument("--workspace", type=Path, default=Path.cwd())
    call.add_argument("--json", action="store_true", help="print the whole result as JSON")
    _no_daemon_flag(call)

    run = sub.add_parser("run", help="run a CI script (or replay JSON-RPC lines) through a daemon")
    run.add_argument(
        "script",
        help="a .json or .toml script, - for JSON on stdin, or a .jsonl file of JSON-RPC messages",
    )
    run.add_argument("--workspace", type=Path, default=Path.cwd())
    run.add_argument("--junit", type=Path, metavar="FILE", help="also write a JUnit XML report")
    _no_daemon_flag(run)

    daemon = sub.add_parser(
        "daemon", help="start, stop or describe the workspace's engine; list or stop them all"
    )
    daemon.add_argument("action", choices=["start", "stop", "status", "list"])
    daemon.add_argument("--workspace", type=Path, default=Path.cwd())
    daemon.add_argument("--json", action="store_true", help="print JSON")
    daemon.add_argument(
        "--all", action="store_true", help="with stop: every engine of this user (CI jobs' end)"
    )
    daemon.add_argument(
        "--if-idle",
        action="store_true",
        help="with stop: only if no session, job or teammate keeps it busy (nothing cancelled)",
    )

    jobs = sub.add_parser("jobs", help="list background jobs, or wait for one: jobs wait ID")
    jobs.add_argument("wait", nargs="*", metavar="wait ID", help="wait for job ID to end")
    jobs.add_argument("--workspace", type=Path, default=Path.cwd())
    jobs.add_argument("--json", action="store_true", help="print JSON")
    _no_daemon_flag(jobs)

    checkpoints = sub.add_parser(
        "checkpoints", help="list what tool calls changed, or show one: checkpoints diff ID"
    )
    checkpoints.add_argument("diff", nargs="*", metavar="diff ID", help="show ID's diff to now")
    checkpoints.add_argument("--workspace", type=Path, default=Path.cwd())
    checkpoints.add_argument("--json", action="store_true", help="print JSON")
    _no_daemon_flag(checkpoints)

    undo = sub.add_parser("undo", help="put files back as they were before a tool call")
    undo.add_argument("id", nargs="?", help="the checkpoint (default: the last call)")
    undo.add_argument("--force", action="store_true", help="even over changes made since")
    undo.add_argument("--workspace", type=Path, default=Path.cwd())
    undo.add_argument("--json", action="store_true", help="print JSON")
    _no_daemon_flag(undo)

    mcp = sub.add_parser(
        "mcp", help="serve the tools over the Model Context Protocol on stdio (or --http)"
    )
    mcp.add_argument("--workspace", type=Path, default=Path.cwd())
    mcp.add_argument("--log-file", type=Path, help="also log to this file")
    mcp.add_argument("--log-level", default="warning", help="debug, info, warning, error")
    mcp.add_argument("--http", action="store_true", help="serve Streamable HTTP, not stdio")
    mcp.add_argument("--host", help="with --http: the address to bind (default 127.0.0.1)")
    mcp.add_argument("--port", type=int, help="with --http: the port (default 0: any free)")
    mcp.add_argument("--token-file", type=Path, help="with --http: the bearer token's file")
    mcp.add_argument(
        "--no-token", action="store_true", help="with --http on loopback: no bearer token"
    )
    mcp.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="with --http: a name clients reach a non-loopback host by (Host, Origin)",
    )
    _no_daemon_flag(mcp)
    acp = sub.add_parser("acp", help="serve an AI coding agent over the Agent Client Protocol")
    acp.add_argument("--workspace", type=Path, help="bind this folder, not each session's cwd")
    acp.add_argument("--log-level", default="warning", help="debug, info, warning, error")
    acp.add_argument(
        "--protocol",
        type=int,
        choices=(1, 2),
        default=1,
        help="the highest ACP version offered: 2 serves the v2 preview to a client that asks",
    )
    _no_daemon_flag(acp)
    return parser
