"""Reports of a CI run: one console line per step, and a JUnit XML file."""

from __future__ import annotations

import os
import re
import socket
import tempfile
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from toold.ci.runner import RunOutcome, StepResult, first_line, text_of

SUITE = "toold"
# Characters XML 1.0 cannot carry at all (tool output may hold any of them).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


class ConsoleReporter:
    """``✓ id  tool  0.12s  first line`` per step, flushed as it happens (CI logs stream).

    A failed step's whole content also goes to ``details`` (stderr), indented, so a
    CI log shows why a command failed while stdout keeps one line per step.
    """

    def __init__(self, stream: TextIO, details: TextIO | None = None) -> None:
        self.stream = stream
        self.details = details
        try:
            "✓✗↳".encode(stream.encoding or "ascii")
            self.marks = {"passed": "✓", "failed": "✗", "skipped": "-", "rescued": "↳"}
        except (LookupError, UnicodeEncodeError):
            self.marks = {"passed": "+", "failed": "x", "skipped": "-", "rescued": ">"}

    def _line(self, depth: int, text: str) -> None:
        print(("  " * depth + text).rstrip(), file=self.stream, flush=True)

    def finished(self, result: StepResult) -> None:
        """One line for a step that ran or was skipped."""
        mark = self.marks[result.status]
        if result.status == "skipped":
            line = f"{mark} {result.label}  {result.step.action}  {result.reason}"
            self._line(result.depth, line)
            return
        detail = result.reason if result.reason else first_line(text_of(result.content))
        took = f"{result.duration:.2f}s"
        self._line(result.depth, f"{mark} {result.label}  {result.step.action}  {took}  {detail}")
        if result.status == "failed" and result.answered and self.details is not None:
            indent = "  " * (result.depth + 2)
            for line in text_of(result.content).splitlines():
                print((indent + line).rstrip(), file=self.details)
            self.details.flush()

    def rescued(self, result: StepResult) -> None:
        """The line saying a failed step was rescued by its fallback."""
        self._line(result.depth + 1, f"{self.marks['rescued']} {result.label} rescued by fallback")

    def summary(self, outcome: RunOutcome) -> None:
        """The closing line: counts by status and the total time."""
        counts = {s: 0 for s in ("passed", "rescued", "failed", "skipped")}
        for result in outcome.results:
            counts[result.status] += 1
        parts = [f"{n} {status}" for status, n in counts.items() if n]
        verdict = "ok" if outcome.ok else "FAILED"
        self._line(0, f"{verdict}: {', '.join(parts)} in {outcome.duration:.2f}s")


def _clean(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def junit_tree(outcome: RunOutcome) -> ET.ElementTree:
    """The JUnit XML document: one testsuite "toold", one testcase per step that was reached."""
    failures = sum(r.status == "failed" for r in outcome.results)
    skipped = sum(r.status == "skipped" for r in outcome.results)
    counts = {
        "tests": str(len(outcome.results)),
        "failures": str(failures),
        "errors": "0",
        "skipped": str(skipped),
        "time": f"{outcome.duration:.3f}",
    }
    root = ET.Element("testsuites", {"name": SUITE, **counts})
    suite = ET.SubElement(
        root,
        "testsuite",
        {
            "name": SUITE,
            **counts,
            "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S"),
            "hostname": socket.gethostname(),
        },
    )
    for result in outcome.results:
        case = ET.SubElement(
            suite,
            "testcase",
            {
                "classname": f"{SUITE}.{result.step.action}",
                "name": _clean(result.label),
                "time": f"{result.duration:.3f}",
            },
        )
        output = _clean(text_of(result.content)) if result.answered else ""
        if result.status == "failed":
            failure = ET.SubElement(case, "failure", {"message": _clean(result.reason or "")})
            failure.text = output
        elif result.status == "skipped":
            ET.SubElement(case, "skipped", {"message": _clean(result.reason or "")})
        elif result.status == "rescued":
            out = ET.SubElement(case, "system-out")
            out.text = _clean(f"failed ({result.reason}), rescued by its fallback\n") + output
        elif output:
            ET.SubElement(case, "system-out").text = output
    ET.indent(root)
    return ET.ElementTree(root)


def write_junit(outcome: RunOutcome, path: Path) -> None:
    """Write the JUnit report atomically (temp file + rename), creating parent folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)  # mkstemp's 0600 would hide the report from other CI users
        with os.fdopen(fd, "wb") as handle:
            junit_tree(outcome).write(handle, encoding="utf-8", xml_declaration=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
