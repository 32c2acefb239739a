"""An edit's result carries the diagnostics it introduced or fixed, from a real ruff server."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.diagnostics.conftest import MakeEdits
from toold.diagnostics.servers import find_program


def test_an_unused_import_is_reported_and_its_fix_reported_gone(edits_with: MakeEdits) -> None:
    edits = edits_with()

    async def body() -> None:
        clean = await edits.call("write_file", file_path="app.py", content="x = 1\n")
        assert clean.diagnostics is not None and not clean.diagnostics.new
        assert clean.content == "Wrote 6 characters to app.py"  # nothing to say: no text
        added = await edits.call(
            "edit_file", file_path="app.py", old_text="x = 1\n", new_text="import os\nx = 1\n"
        )
        assert added.diagnostics is not None
        [new] = added.diagnostics.new
        assert (new.path, new.line, new.column, new.code, new.severity) == (
            "app.py",
            1,
            8,
            "F401",
            "warning",
        )
        assert new.source == "Ruff" and "`os` imported but unused" in new.message
        assert "Diagnostics introduced by this change (1):" in added.content
        assert "warning app.py:1:8 `os` imported but unused" in added.content
        fixed = await edits.call("str_replace", path="app.py", old="import os\n", new="")
        assert fixed.diagnostics is not None and not fixed.diagnostics.new
        assert [d.code for d in fixed.diagnostics.fixed] == ["F401"]
        assert "Diagnostics fixed by this change (1):" in fixed.content

    asyncio.run(body())


def test_a_syntax_error_is_an_error_at_its_place(edits_with: MakeEdits) -> None:
    edits = edits_with()

    async def body() -> None:
        broken = await edits.call("write_file", file_path="pkg/m.py", content="def f(:\n    pass\n")
        assert broken.diagnostics is not None
        errors = [d for d in broken.diagnostics.new if d.severity == "error"]
        assert errors and errors[0].path == "pkg/m.py" and errors[0].line == 1
        assert "error pkg/m.py:1:" in broken.content

    asyncio.run(body())


def test_diagnostics_already_there_are_counted_not_repeated(
    edits_with: MakeEdits, tmp_path: Path
) -> None:
    edits = edits_with()
    # Written outside toold: the service has never seen it, so the text before the call
    # is checked too.
    (edits.root / "old.py").write_text("import os\nimport re\n")

    async def body() -> None:
        outcome = await edits.call(
            "edit_file",
            file_path="old.py",
            old_text="import re\n",
            new_text="import re\nimport sys\n",
        )
        delta = outcome.diagnostics
        assert delta is not None
        assert [(d.line, d.code) for d in delta.new] == [(3, "F401")]
        assert "`sys`" in delta.new[0].message
        assert delta.unchanged == 2 and not delta.fixed
        assert "(2 diagnostics already there before this change.)" in outcome.content
        assert "`os`" not in outcome.content

    asyncio.run(body())


def test_lines_moved_by_an_edit_do_not_make_old_diagnostics_new(edits_with: MakeEdits) -> None:
    edits = edits_with()

    async def body() -> None:
        await edits.call("write_file", file_path="a.py", content="import os\n")
        moved = await edits.call(
            "edit_file",
            file_path="a.py",
            old_text="import os\n",
            new_text='"""Doc."""\n\nimport os\n',
        )
        assert moved.diagnostics is not None
        assert not moved.diagnostics.new and moved.diagnostics.unchanged == 1

    asyncio.run(body())


def test_off_means_no_server_and_no_field(edits_with: MakeEdits) -> None:
    edits = edits_with({"diagnostics": {"enabled": False}})

    async def body() -> None:
        outcome = await edits.call("write_file", file_path="a.py", content="import os\n")
        assert outcome.diagnostics is None and edits.service.running() == {}

    asyncio.run(body())


def test_a_type_error_comes_from_ty_beside_ruff(edits_with: MakeEdits) -> None:
    assert find_program("ty"), "ty is not installed: pip install -e '.[dev]'"
    edits = edits_with()

    async def body() -> None:
        await edits.call("write_file", file_path="t.py", content="x: int = 1\n")
        outcome = await edits.call(
            "edit_file", file_path="t.py", old_text="x: int = 1\n", new_text='x: int = "a"\n'
        )
        assert outcome.diagnostics is not None
        assert [(d.source, d.code, d.line) for d in outcome.diagnostics.new] == [
            ("ty", "invalid-assignment", 1)
        ]
        assert set(edits.service.running()) == {"ruff", "ty"}

    asyncio.run(body())
