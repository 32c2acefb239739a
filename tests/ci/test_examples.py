"""The CI examples of daemon/docs/ci.md are the files in tests/ci/examples, and they run as shown.

(The piped framed session, examples/session.py, runs in tests/e2e/test_piped_session.py.)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parent / "examples"
CI_DOC = Path(__file__).parents[2] / "daemon" / "docs" / "ci.md"


def toold_run(example: str, workspace: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "toold",
            "run",
            str(EXAMPLES / example),
            "--workspace",
            str(workspace),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("name", ["session.py", "checks.toml", "replay.jsonl", "replay.out"])
def test_the_ci_doc_shows_each_example_as_it_is(name: str) -> None:
    text = (EXAMPLES / name).read_text(encoding="utf-8")
    assert text in CI_DOC.read_text(encoding="utf-8"), f"ci.md does not show {name} as it is"


def test_the_toml_example_passes(tmp_path: Path) -> None:
    done = toold_run("checks.toml", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith("ok: 5 passed in ")
    assert (tmp_path / "build.log").read_text() == "built\n"


def test_the_jsonl_example_prints_what_the_ci_doc_shows(tmp_path: Path) -> None:
    done = toold_run("replay.jsonl", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (EXAMPLES / "replay.out").read_text(encoding="utf-8")
