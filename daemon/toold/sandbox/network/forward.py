"""The forwarder inside a sandbox: its loopback proxy port, relayed to toold's proxy.

``python -m toold.sandbox.network.forward --socket PATH --port N -- COMMAND...`` listens
on 127.0.0.1:N of the sandbox's own network namespace (where nothing else is: only
``lo``), then forks: the child becomes COMMAND (the fork server, a container's worker,
python_repl's interpreter) with the listener already open, so no call can race it; this
process relays each connection to the proxy's Unix socket at PATH, byte for byte, and
exits with COMMAND's status when COMMAND ends. It judges nothing: the proxy on the host
does. Standard library only, and it keeps nothing of the protocol pipes (stdin and
stdout go to COMMAND alone).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import sys
import threading

CHUNK = 64 * 1024


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, ConnectionError):
        while data := await source.read(CHUNK):
            sink.write(data)
            await sink.drain()
        if sink.can_write_eof():
            sink.write_eof()


async def _relay(path: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        up_reader, up_writer = await asyncio.open_unix_connection(path, limit=CHUNK)
    except OSError:
        writer.close()
        return
    try:
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
    finally:
        up_writer.close()
        writer.close()


async def serve(listener: socket.socket, path: str) -> None:
    """Relay every connection ``listener`` accepts to the Unix socket at ``path``."""
    relays: set[asyncio.Task[None]] = set()  # the loop keeps only weak references

    def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.ensure_future(_relay(path, reader, writer))
        relays.add(task)
        task.add_done_callback(relays.discard)

    server = await asyncio.start_server(accepted, sock=listener, limit=CHUNK)
    async with server:
        await server.serve_forever()


def listen(port: int) -> socket.socket:
    """The loopback listener (IPv4: every client of the proxy variables uses it)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    return listener


def _wait_and_exit(pid: int) -> None:
    _, status = os.waitpid(pid, 0)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def main(argv: list[str] | None = None) -> int:
    """Entry point: listen, start COMMAND, relay until it ends."""
    parser = argparse.ArgumentParser(prog="python -m toold.sandbox.network.forward")
    parser.add_argument("--socket", required=True, help="the proxy's Unix socket")
    parser.add_argument("--port", type=int, required=True, help="loopback port to listen on")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")
    listener = listen(args.port)
    pid = os.fork()
    if pid == 0:
        listener.close()
        os.execvp(command[0], command)
    # Only COMMAND keeps the daemon's pipes: its end is what the daemon watches.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: os.kill(pid, s))
    threading.Thread(target=_wait_and_exit, args=(pid,), daemon=True).start()
    asyncio.run(serve(listener, args.socket))
    return 0


if __name__ == "__main__":
    sys.exit(main())
