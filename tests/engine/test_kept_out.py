"""A toold.toml loosening the user refused stays out at the engine's start, and every
editor attaching to the engine hears so (the engine binds before any session is there)."""

from __future__ import annotations

from pathlib import Path

from tests.engine.support import Engines
from toold.config import TooldConfig
from toold.refusals import remember_refusal

WARNING = 2  # window/showMessage's MessageType.Warning


def test_each_editor_of_the_engine_hears_the_refused_loosening_kept_out(
    engines: Engines, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "toold.toml").write_text(
        '[permissions]\nmode = "bypass"\n[execution]\ntool_runner = "local"\n',
        encoding="utf-8",
    )
    kept = TooldConfig.model_validate({"execution": {"tool_runner": "local"}})
    remember_refusal(workspace, kept)  # as a "Keep current" answered before this start
    for _ in range(2):
        editor = engines.editor(workspace)
        shown = editor.notification("window/showMessage")["params"]
        assert shown["type"] == WARNING, shown
        assert "you refused" in shown["message"], shown
        assert "default → bypass" in shown["message"], shown
    made = editor.tool("bash", origin="agent", command="touch made")
    assert made["isError"] is True and not (workspace / "made").exists()  # not bypass
