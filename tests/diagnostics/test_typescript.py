"""A real typescript-language-server (with typescript from npm) under the default runner
(bwrap where it works, as here and in CI): an edit that breaks a type gets the error in
its result, and the edit that fixes it reports it fixed."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.diagnostics.conftest import Edits
from tests.diagnostics.typescript import install_into
from toold.config import TooldConfig
from toold.sandbox.runners import make_runner

TYPED = 'export function greet(name: string): string {\n  return "hi " + name;\n}\n'
CALL = 'import { greet } from "./greet";\n\nexport const shown: string = greet("bo");\n'
BROKEN = 'import { greet } from "./greet";\n\nexport const shown: number = greet("bo");\n'


def test_a_type_error_is_reported_and_its_fix_clears_it(tmp_path: Path) -> None:
    root = (tmp_path / "ws").resolve()
    root.mkdir()
    program = install_into(root)
    (root / "tsconfig.json").write_text('{"compilerOptions": {"strict": true, "noEmit": true}}\n')
    (root / "greet.ts").write_text(TYPED)
    config = TooldConfig.model_validate(
        {
            # The server's first start (tsserver loading the project) may take seconds on a
            # loaded machine; the budget is an upper bound, never a wait.
            "diagnostics": {
                "wait_ms": 60_000,
                "servers": {"typescript": {"command": [str(program), "--stdio"]}},
            }
        }
    )
    runner = make_runner(config, root)  # the default runner: bwrap here
    edits = Edits(root, config, runner)

    async def main() -> None:
        try:
            first = CALL.replace('"bo"', '"ann"')
            clean = await edits.call("write_file", file_path="main.ts", content=first)
            assert clean.diagnostics is not None and clean.diagnostics.new == []
            [server] = edits.service.running().values()
            assert "bwrap" in " ".join(server.argv)  # sandboxed, as the default runner is
            # An edit that keeps the file clean is answered too (the server pushes nothing
            # then: toold pulls through tsserver), not left pending (after 30 s here).
            still = await edits.call(
                "edit_file", file_path="main.ts", old_text="ann", new_text="bo"
            )
            assert still.diagnostics is not None
            assert (still.diagnostics.new, still.diagnostics.pending) == ([], [])

            broke = await edits.call(
                "edit_file", file_path="main.ts", old_text=CALL, new_text=BROKEN
            )
            assert broke.diagnostics is not None
            [error] = broke.diagnostics.new
            assert (error.path, error.line, error.severity) == ("main.ts", 3, "error")
            assert error.code == "2322" and error.source == "typescript"
            assert "'string' is not assignable to type 'number'" in error.message
            assert isinstance(broke.content, str)
            assert "error main.ts:3:14 Type 'string' is not assignable" in broke.content

            fixed = await edits.call(
                "edit_file", file_path="main.ts", old_text=BROKEN, new_text=CALL
            )
            assert fixed.diagnostics is not None
            assert fixed.diagnostics.new == [] and fixed.diagnostics.fixed == [error]
            assert "Diagnostics fixed by this change (1):" in str(fixed.content)
        finally:
            await edits.service.aclose()
            await runner.close()

    asyncio.run(main())
