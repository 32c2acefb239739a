"""python_repl's worker: one long-lived interpreter answering JSON lines.

toold starts it as ``python -u _repl_worker.py`` in the workspace, in a new session,
and writes one request per line on its stdin: ``{"id", "code", "max_output",
"allowed_modules"}``. It answers ``{"ready": true}`` once, then one ``{"id", "output"}``
line per request on its stdout. Standard library only: it must start fast and must not
import toold.

The protocol pipes are moved to private descriptors at start. Descriptors 1 and 2 then
point at an unlinked temporary file, so output from C code or child processes
(``os.system``) is collected too, and cannot corrupt the protocol.
"""

from __future__ import annotations

import builtins
import io
import json
import linecache
import os
import sys
import tempfile
import threading
import time
import traceback
from typing import Any

STDERR_MARK = "\n[stderr]\n"
_THIS_FILE = os.path.abspath(__file__)


class Capture(io.TextIOBase):
    """A text stream that keeps the first ``limit`` characters and counts the rest."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.parts: list[str] = []
        self.kept = 0
        self.dropped = 0
        self.tail_space = 0
        """Length of the whitespace run the whole stream ends with (kept or not)."""

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        room = max(self.limit - self.kept, 0)
        piece = text[:room]
        if piece:
            self.parts.append(piece)
            self.kept += len(piece)
        self.dropped += len(text) - len(piece)
        stripped = text.rstrip()
        if stripped:
            self.tail_space = len(text) - len(stripped)
        else:
            self.tail_space += len(text)
        return len(text)

    def getvalue(self) -> str:
        return "".join(self.parts)


class Interpreter:
    """The snippets' namespace and the import policy applied to them."""

    def __init__(self, raw_fd: int) -> None:
        self.raw_fd = raw_fd
        self.allowed: frozenset[str] | None = None
        self.calls = 0
        self.failed = False
        """Whether the last snippet raised (its text is then ``Error: ...``)."""
        snippet_builtins = dict(vars(builtins))
        snippet_builtins["__import__"] = self._guarded_import
        self.namespace: dict[str, Any] = {
            "__name__": "__main__",
            "__doc__": None,
            "__builtins__": snippet_builtins,
        }

    def _guarded_import(
        self,
        name: str,
        globals: Any = None,
        locals: Any = None,
        fromlist: Any = (),
        level: int = 0,
    ) -> Any:
        # Only imports written in snippets come here: modules importing their own
        # dependencies use the real builtins.
        if self.allowed is not None and level == 0:
            top = name.partition(".")[0]
            if top not in self.allowed:
                allowed = ", ".join(sorted(self.allowed)) or "none"
                raise ImportError(
                    f"import of '{name}' is not allowed "
                    f"(python_repl.allowed_modules permits: {allowed})"
                )
        return builtins.__import__(name, globals, locals, fromlist, level)

    def _raw_output(self, limit: int) -> tuple[str, int]:
        """What descriptors 1 and 2 received during the call: (text read, bytes left unread)."""
        for stream in (sys.__stdout__, sys.__stderr__):
            if stream is not None:
                stream.flush()
        size = os.fstat(self.raw_fd).st_size
        if not size:
            return "", 0
        data = os.pread(self.raw_fd, min(size, 4 * limit), 0)
        os.ftruncate(self.raw_fd, 0)
        return data.decode("utf-8", "replace"), size - len(data)

    def execute(self, code: str, limit: int, allowed: list[str] | None) -> str:
        """Run one snippet: eval if it is an expression, else exec. Jianmu's result text."""
        self.calls += 1
        self.allowed = None if allowed is None else frozenset(allowed)
        filename = f"<python_repl-{self.calls}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        # A margin past the limit keeps the count exact when only trailing space is cut.
        out, err = Capture(limit + 1024), Capture(limit + 1024)
        value: Any = None
        error: BaseException | None = None
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        try:
            expression = _compile_expression(code, filename)
            if expression is not None:
                value = eval(expression, self.namespace)
            else:
                exec(compile(code, filename, "exec"), self.namespace)
        except BaseException as exc:  # the worker survives SystemExit and KeyboardInterrupt
            error = exc
        finally:
            sys.stdout, sys.stderr = saved
        raw, unread = self._raw_output(limit)
        out.write(raw)
        out.dropped += unread
        self.failed = error is not None
        if error is None:
            text, total = _result_text(value, out, err)
        else:
            text = _error_text(error, out, err)
            total = len(text) + out.dropped + err.dropped
        return _truncate(text, total, limit)


def _compile_expression(code: str, filename: str) -> Any:
    """The code compiled as an expression, or None when it is statements (Jianmu's eval
    first, exec on SyntaxError; only compiling, so nothing ever runs twice)."""
    try:
        return compile(code, filename, "eval")
    except SyntaxError:
        return None


def _error_text(error: BaseException, out: Capture, err: Capture) -> str:
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == _THIS_FILE:
        tb = tb.tb_next
    trace = "".join(traceback.format_exception(type(error), error, tb))
    text = f"Error: {type(error).__name__}: {error}\n{trace}"
    if out.kept:
        text += f"\n[stdout]\n{out.getvalue()}"
    if err.kept:
        text += f"{STDERR_MARK}{err.getvalue()}"
    return text


def _result_text(value: Any, out: Capture, err: Capture) -> tuple[str, int]:
    """Jianmu's text (stdout, the expression's value, stderr after a marker; stripped) and
    the length it would have had with nothing dropped."""
    result = out.getvalue()
    last: Capture | None = out
    if value is not None:
        result += str(value)
        last = None
    stderr = err.getvalue()
    if stderr:
        result = f"{result}{STDERR_MARK}{stderr}" if result else stderr
        last = err
    lead = len(result) - len(result.lstrip())
    if last is not None and last.dropped:
        trail = last.tail_space
    else:
        trail = len(result) - len(result.rstrip())
    return result.strip(), len(result) + out.dropped + err.dropped - lead - trail


def _truncate(text: str, total: int, limit: int) -> str:
    """Jianmu's cap: ``limit`` characters, then how long the whole output was."""
    total = max(total, len(text))
    if total > limit:
        return f"{text[:limit]}\n... (truncated, {total} chars total)"
    return text or "(No output)"


def _watch_parent(parent: int) -> None:
    # The daemon normally kills this process group; if it died without doing so,
    # stop even while a snippet is still running.
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def main() -> None:
    """Serve requests until stdin closes."""
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    fd, path = tempfile.mkstemp(prefix="toold-repl-")
    os.close(fd)
    raw_fd = os.open(path, os.O_RDWR | os.O_APPEND)
    os.unlink(path)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(raw_fd, 1)
    os.dup2(raw_fd, 2)
    for stream in (sys.stdout, sys.stderr):  # what a snippet prints is read back as UTF-8
        stream.reconfigure(encoding="utf-8")  # type: ignore[union-attr]
    # Started with -P, so neither this file's folder nor the workspace leads sys.path.
    # Snippets may import the workspace's modules (the cwd), but only after the standard
    # library and installed packages: a workspace logging.py or token.py never replaces
    # the real one, for the worker or for the modules a snippet imports.
    sys.path.append("")
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    interpreter = Interpreter(raw_fd)

    def reply(message: dict[str, Any]) -> None:
        replies.write(json.dumps(message).encode("utf-8") + b"\n")
        replies.flush()

    reply({"ready": True, "pid": os.getpid()})
    for line in requests:
        request = json.loads(line)
        output = interpreter.execute(
            request["code"], int(request["max_output"]), request.get("allowed_modules")
        )
        reply({"id": request["id"], "output": output, "error": interpreter.failed})


if __name__ == "__main__":
    main()
