"""Command line: ``toold serve``, ``tools``, ``call``, ``run``, ``mcp``, ``acp``, ``daemon``,
``jobs``, ``checkpoints``, ``undo``: what each command does (its arguments are
toold.cli_parser's).

``serve``, ``tools``, ``call``, ``run``, ``jobs``, ``acp`` and ``mcp`` (stdio or HTTP) attach
to the workspace's engine (toold.engine), starting one when none runs; ``--no-daemon``
(or ``TOOLD_NO_DAEMON=1``) keeps a private, short-lived daemon instead.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toold.cli_parser import build_parser
from toold.client import NO_DAEMON_ENV, no_daemon_requested, shown_message
from toold.terminal import visible
from toold_protocol.errors import INVALID_PARAMS

if TYPE_CHECKING:
    import logging

EXIT_TOOL_FAILED = 1
EXIT_USAGE = 2
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE
"""What a shell reports for a command killed by SIGPIPE (``toold tools | head``)."""


def _private(args: argparse.Namespace) -> bool:
    return bool(args.no_daemon) or no_daemon_requested()


def _not_an_expected_rpc_error(record: logging.LogRecord) -> bool:
    """Drop pygls's tracebacks for errors that are ordinary answers (unknown tool, bad params,
    an agent without an API key, an unknown job)."""
    from toold_protocol import errors

    exc = record.exc_info[1] if record.exc_info else None
    return getattr(exc, "code", None) not in (
        errors.INVALID_REQUEST,
        errors.METHOD_NOT_FOUND,
        errors.INVALID_PARAMS,
        errors.NOT_FOUND,
    )


def _printable_record(record: logging.LogRecord) -> bool:
    """A log line for the terminal: its message with control characters escaped (it can
    carry the workspace's words: see toold.terminal)."""
    record.msg, record.args = visible(record.getMessage()), None
    return True


def _configure_logging(level: str, log_file: Path | None) -> None:
    import logging  # here: the attaching commands never log, and skip its import

    terminal = logging.StreamHandler(sys.stderr)
    terminal.addFilter(_printable_record)
    handlers: list[logging.Handler] = [terminal]
    if log_file is not None:
        handlers.append(logging.FileHandler(log_file, encoding="utf-8"))
    for handler in handlers:
        handler.addFilter(_not_an_expected_rpc_error)
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
    )
    # pygls logs every message body at INFO ("Sending data: ..."): tool output, file
    # contents, secrets. Only an explicit debug level shows the wire.
    if logging.getLogger().level > logging.DEBUG:
        logging.getLogger("pygls").setLevel(max(logging.WARNING, logging.getLogger().level))


def _serve(args: argparse.Namespace) -> int:
    from toold.engine.hardening import harden

    _configure_logging(args.log_level, args.log_file)
    # The relay holds the editor's pipes, a private daemon runs tools: both out of reach.
    inside = harden(runs_tools=_private(args))
    if not _private(args):
        from toold.engine.relay import relay

        return relay(
            args.workspace.resolve() if args.workspace else None,
            client_process_id=args.client_process_id,
            max_message_bytes=args.max_message_bytes,
        )
    from toold.server import create_server
    from toold.transport import run

    workspace = args.workspace.resolve() if args.workspace else None
    if workspace is not None and not workspace.is_dir():
        print(f"toold: workspace {workspace} is not a folder", file=sys.stderr)
        return EXIT_USAGE
    server = create_server(
        workspace,
        max_message_bytes=args.max_message_bytes,
        client_process_id=args.client_process_id,
        from_tool=inside is not None,  # started by a tool call (``call --no-daemon`` there)
    )
    return run(server)


def _print_content(content: Any) -> None:
    """Text as it is; a list one item a line (grep, glob); anything else as JSON."""
    if isinstance(content, str):
        print(content)
    elif isinstance(content, list):
        for item in content:
            print(item if isinstance(item, str) else json.dumps(item, ensure_ascii=False))
    else:
        print(json.dumps(content, indent=2, ensure_ascii=False))


def _tools(args: argparse.Namespace) -> int:
    from toold.client import RpcError, connect

    try:
        with connect(args.workspace, private=_private(args)) as client:
            result = client.request("tools/list", {"format": args.format or "native"})
    except RpcError as exc:
        print(f"toold: {exc.message}", file=sys.stderr)
        return EXIT_USAGE
    if args.json or args.format:
        print(json.dumps(result["tools"], indent=2, ensure_ascii=False))
        return 0
    width = max(len(t["name"]) for t in result["tools"])
    for t in result["tools"]:
        summary = t["description"].split(". ")[0].rstrip(".")
        marker = " (deferred)" if t.get("deferred") else ""
        print(f"{t['name']:<{width}}  {summary}{marker}")
    return 0


def _print_shown(notifications: list[dict[str, Any]], warnings: bool) -> None:
    """What the daemon showed the user (toold.client.shown_message), on stderr."""
    for message in notifications:
        if (text := shown_message(message, warnings)) is not None:
            print(text, file=sys.stderr)


def _call(args: argparse.Namespace) -> int:
    from toold.client import RpcError, connect

    raw = sys.stdin.read() if args.arguments == "-" else args.arguments
    try:
        arguments = json.loads(raw or "{}")
    except json.JSONDecodeError as exc:
        print(f"toold: arguments are not valid JSON: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not isinstance(arguments, dict):
        print(
            'toold: arguments must be a JSON object, e.g. \'{"pattern": "TODO"}\'', file=sys.stderr
        )
        return EXIT_USAGE
    params = {"name": args.name, "arguments": arguments, "origin": "user"}
    try:
        with connect(args.workspace, private=_private(args)) as client:
            try:
                result = client.request("tools/call", params)
            except RpcError as exc:
                if exc.code != INVALID_PARAMS or not exc.message.startswith("Unknown tool"):
                    raise
                from toold.ci.catalogue import Catalogue

                tools = client.request("tools/list", {"format": "native"})["tools"]
                hint = Catalogue(tools).suggestion(args.name)
                print(f"toold: {exc.message}; {hint}see `toold tools`", file=sys.stderr)
                return EXIT_USAGE
            finally:
                _print_shown(client.notifications, warnings=not _private(args))
    except RpcError as exc:
        print(f"toold: {exc.message}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    elif not result["isError"]:
        _print_content(result["content"])
    failed = result["isError"] or bool(result.get("exitCode"))
    if failed:
        reason = result["content"] if isinstance(result["content"], str) else "tool failed"
        first_line = reason.splitlines()[0] if reason else "no output"
        print(f"toold: {args.name} failed: {first_line}", file=sys.stderr)
    return EXIT_TOOL_FAILED if failed else 0


def _run(args: argparse.Namespace) -> int:
    from toold.ci.report import ConsoleReporter, write_junit
    from toold.ci.runner import run_in_daemon
    from toold.ci.script import ScriptError, load_script
    from toold.client import RpcError

    if not args.workspace.is_dir():
        print(f"toold: workspace {args.workspace} is not a folder", file=sys.stderr)
        return EXIT_USAGE
    if args.no_daemon:
        os.environ[NO_DAEMON_ENV] = "1"  # the `toold serve` it starts serves privately
    jsonl = args.script.lower().endswith(".jsonl")
    # A replay prints JSON lines on stdout: its report goes to stderr.
    reporter = ConsoleReporter(sys.stderr if jsonl else sys.stdout, details=sys.stderr)
    try:
        if jsonl:
            from toold.ci.replay import load_replay, replay

            outcome = replay(load_replay(args.script), args.workspace, sys.stdout, reporter)
        else:
            script = load_script(args.script)
            outcome = run_in_daemon(script, args.workspace, reporter, source=args.script)
    except ScriptError as exc:
        print(f"toold: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (RpcError, OSError) as exc:
        print(f"toold: the daemon could not run the script: {exc}", file=sys.stderr)
        return EXIT_USAGE
    reporter.summary(outcome)
    if args.junit is not None:
        try:
            write_junit(outcome, args.junit)
        except OSError as exc:
            print(f"toold: cannot write the JUnit report {args.junit}: {exc}", file=sys.stderr)
            return EXIT_USAGE
    return 0 if outcome.ok else EXIT_TOOL_FAILED


def _mcp(args: argparse.Namespace) -> int:
    from toold.engine.hardening import harden

    http_only = (
        args.host,
        args.port,
        args.token_file,
        args.no_token or None,
        args.allow_host or None,
    )
    if not args.http and any(flag is not None for flag in http_only):
        print(
            "toold: --host, --port, --token-file, --no-token and --allow-host need --http",
            file=sys.stderr,
        )
        return EXIT_USAGE
    in_process = _private(args)
    if in_process and not args.no_daemon and "mcp" in sys.argv[1:]:
        # Said on the command line, where an engine judging its peers reads whether this
        # process runs tools (toold.engine.hardening.runs_tools): ours then do.
        os.execv(sys.executable, [sys.executable, "-m", "toold", *sys.argv[1:], "--no-daemon"])
    _configure_logging(args.log_level, args.log_file)
    # Through the engine, tools run there: this process only hands its stdio (or socket) over.
    inside = harden(runs_tools=in_process)
    workspace = args.workspace.resolve()
    if not workspace.is_dir():
        print(f"toold: workspace {workspace} is not a folder", file=sys.stderr)
        return EXIT_USAGE
    if args.http:
        from toold.bridge.http_listener import HttpUsageError, http_options

        try:  # before anything starts: the token leaves the environment engines inherit
            options = http_options(
                args.host or "127.0.0.1",
                args.port or 0,
                args.token_file,
                args.no_token,
                args.allow_host,
                workspace,
            )
        except HttpUsageError as exc:
            print(f"toold: {exc}", file=sys.stderr)
            return EXIT_USAGE
    if not in_process:
        # The engine judges the client by its ancestry; one that knows it runs inside a
        # tool call (TOOLD_TOOL_CALL, a sandbox's pid namespace) says so too.
        if args.http:
            from toold.bridge.http_listener import serve_mcp_http_in_engine

            return serve_mcp_http_in_engine(workspace, options, from_tool=inside is not None)
        from toold.engine.relay import hand_over

        return hand_over(workspace, "mcp", {"client": "toold mcp", "fromTool": inside is not None})
    try:
        from toold.bridge.mcp_server import serve_mcp
    except ImportError as exc:
        print(
            f"toold: the MCP bridge needs the mcp package ({exc}): pip install mcp", file=sys.stderr
        )
        return EXIT_USAGE
    if args.http:
        from toold.bridge.mcp_http import serve_mcp_http

        return serve_mcp_http(workspace, options, from_tool=inside is not None)
    return serve_mcp(workspace, from_tool=inside is not None)


def _daemon(args: argparse.Namespace) -> int:
    from toold.engine.commands import daemon_command

    return daemon_command(args.action, args.workspace, args.json, args.all, args.if_idle)


def _jobs(args: argparse.Namespace) -> int:
    from toold.client import RpcError, connect
    from toold.engine.commands import jobs_command

    if args.wait and (len(args.wait) != 2 or args.wait[0] != "wait"):
        print("toold: usage: toold jobs [--json] | toold jobs wait ID", file=sys.stderr)
        return EXIT_USAGE
    try:
        with connect(args.workspace, private=_private(args)) as client:
            return jobs_command(client, args.wait[1] if args.wait else None, args.json)
    except RpcError as exc:
        print(f"toold: {exc.message}", file=sys.stderr)
        return EXIT_USAGE


def _checkpoints(args: argparse.Namespace) -> int:
    from toold.client import RpcError, connect
    from toold.undo import checkpoints_command, undo_command

    if (
        args.command == "checkpoints"
        and args.diff
        and (len(args.diff) != 2 or args.diff[0] != "diff")
    ):
        print(
            "toold: usage: toold checkpoints [--json] | toold checkpoints diff ID", file=sys.stderr
        )
        return EXIT_USAGE
    try:
        with connect(args.workspace, private=_private(args)) as client:
            if args.command == "undo":
                return undo_command(client, args.id, args.force, args.json)
            return checkpoints_command(client, args.diff[1] if args.diff else None, args.json)
    except RpcError as exc:
        print(f"toold: {exc.message}", file=sys.stderr)
        return 1


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``toold`` console script and ``python -m toold``.

    A reader that stops early (``toold call grep ... | head -1``) ends the command
    quietly, as it ends Unix tools (see "Note on SIGPIPE" in Python's signal docs).
    """
    try:
        code = _dispatch(argv)
        sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at /dev/null so that is quiet too.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    return code


def _dispatch(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "tools":
        return _tools(args)
    if args.command == "call":
        return _call(args)
    if args.command == "run":
        return _run(args)
    if args.command == "mcp":
        return _mcp(args)
    if args.command == "acp":
        from toold.engine.hardening import harden

        if _private(args) and not args.no_daemon and "acp" in sys.argv[1:]:
            # Said on the command line, where an engine judging its peers reads whether
            # this process runs tools (toold.engine.hardening.runs_tools): ours then do.
            argv = [sys.executable, "-m", "toold", *sys.argv[1:], "--no-daemon"]
            os.execv(sys.executable, argv)
        _configure_logging(args.log_level, None)
        # Through the engines, tools run there: this process only relays (no subreaper).
        inside = harden(runs_tools=_private(args))
        from toold.acp.agent import serve_acp  # the ACP SDK loads only for this command

        workspace = args.workspace.resolve() if args.workspace else None
        return serve_acp(
            workspace,
            private=_private(args),
            from_tool=inside is not None,
            protocol=args.protocol,
        )
    if args.command == "daemon":
        return _daemon(args)
    if args.command == "jobs":
        return _jobs(args)
    if args.command in ("checkpoints", "undo"):
        return _checkpoints(args)
    build_parser().print_help()
    return EXIT_USAGE
