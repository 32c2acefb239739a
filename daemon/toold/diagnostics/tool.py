"""The ``diagnostics`` tool: the language servers' current diagnostics, read-only.

It lives beside the service rather than in toold.tools.builtin: the tools never import
a subsystem that speaks a wire protocol (tests/unit/test_layering.py), and the registry
loads it by name like every builtin module. The service is imported when the tool runs,
so a sandbox worker that rebuilds tools by name never loads the LSP client.
"""

from __future__ import annotations

from pydantic import Field

from toold.tools.annotations import READS
from toold.tools.base import Tool, ToolArguments
from toold.tools.context import failed
from toold.tools.runtime import ToolRuntime


class DiagnosticsArguments(ToolArguments):
    path: str | None = Field(
        None,
        description=(
            "A file or folder, workspace-relative; the whole workspace when omitted "
            "(at most 200 files are checked)."
        ),
    )


class DiagnosticsTool(Tool):
    name = "diagnostics"
    annotations = READS
    sandboxable = False  # the workspace's language servers live in the daemon
    description = (
        "The current errors and warnings of a file, a folder or the workspace, from the "
        "workspace's language servers (ruff, ty or pyright, typescript-language-server, "
        "bash-language-server, as configured): one 'severity path:line:col message "
        "[source code]' line each. Edits already report what they introduce."
    )
    Arguments = DiagnosticsArguments

    async def run(self, args: DiagnosticsArguments) -> str:
        """Every diagnostic found, one line each, after a count."""
        from toold.diagnostics.report import line_of
        from toold.diagnostics.step import service_for
        from toold.diagnostics.survey import survey

        runtime = self.runtime
        if not isinstance(runtime, ToolRuntime):
            return failed("diagnostics unavailable: no workspace is bound")
        if not runtime.config.diagnostics.enabled:
            return "Diagnostics are off (diagnostics.enabled = false in toold.toml)."
        try:
            found = await survey(service_for(runtime, None), args.path)
        except PermissionError as exc:
            return failed(f"Error: {exc}")
        where = args.path or "the workspace"
        if not found.checked:
            return f"No file in {where} is checked by a language server."
        head = f"{len(found.diagnostics)} diagnostics in {found.checked} files checked"
        lines = [f"{head} ({where}):" if found.diagnostics else f"{head} ({where})."]
        lines += [line_of(item) for item in found.diagnostics]
        if found.truncated:
            lines.append("(Only the first 200 files were checked: name a folder to see others.)")
        if found.pending:
            lines.append("Pending (the server has not answered yet): " + ", ".join(found.pending))
        return "\n".join(lines)


TOOLS = (DiagnosticsTool,)
