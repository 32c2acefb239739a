"""load_skill and skills/list: search order, the description rule, errors, bundled skills."""

from __future__ import annotations

from pathlib import Path

import pytest

from toold.planning.skills import BUNDLED_SKILLS, SkillLoader, describe
from toold_protocol.models import SkillsListResult

from .conftest import Call, ToolsWith


def skill(folder: Path, name: str, text: str) -> Path:
    path = folder / name / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def env_dir(tmp_path: Path) -> Path:
    return tmp_path / "env-skills"


def test_bundled_skills_are_there_and_described(workspace: Path) -> None:
    listed = {s["name"]: s for s in SkillLoader(workspace, env={}).list()}
    assert {"code-review", "debugging"} <= set(listed)
    for name in ("code-review", "debugging"):
        entry = listed[name]
        assert entry["path"] == str(BUNDLED_SKILLS / name / "SKILL.md")
        assert entry["description"] != "No description provided."
        assert not entry["description"].startswith("#")
    SkillsListResult.model_validate({"skills": list(listed.values())})


def test_search_order_env_then_workspace_then_bundled(workspace: Path, env_dir: Path) -> None:
    own = workspace / ".toold" / "skills"
    skill(env_dir, "debugging", "From the environment.")
    skill(own, "debugging", "From the workspace.")
    skill(own, "local-only", "Only here.")
    loader = SkillLoader(workspace, env={"BAREAGENT_SKILLS_DIR": str(env_dir)})
    assert loader.dirs == [env_dir, own, BUNDLED_SKILLS]
    assert loader.load("debugging") == "From the environment."
    assert loader.load("local-only") == "Only here."
    assert loader.load("code-review").startswith("# Code review")
    listed = {s["name"]: s for s in loader.list()}
    assert listed["debugging"]["path"] == str(env_dir / "debugging" / "SKILL.md")

    without_env = SkillLoader(workspace, env={})
    assert without_env.load("debugging") == "From the workspace."
    assert SkillLoader(workspace, env={"BAREAGENT_SKILLS_DIR": ""}).dirs == [own, BUNDLED_SKILLS]


def test_missing_env_folder_falls_through(workspace: Path, env_dir: Path) -> None:
    loader = SkillLoader(workspace, env={"BAREAGENT_SKILLS_DIR": str(env_dir)})
    assert loader.load("debugging").startswith("# Debugging")


@pytest.mark.parametrize(
    ("text", "description"),
    [
        ("# Title\n\n## Sub\n\nFirst real line.  \nSecond.", "First real line."),
        ("  plain start\n# later heading", "plain start"),
        ("# Only\n## Headings\n\n   \n", "No description provided."),
        ("", "No description provided."),
    ],
)
def test_description_rule(text: str, description: str) -> None:
    assert describe(text) == description


def test_list_shape_and_order(workspace: Path) -> None:
    own = workspace / ".toold" / "skills"
    path = skill(own, "zeta", "# Z\n\nLast one.")
    skill(own, "alpha", "# A")
    (own / "not-a-skill").mkdir()  # no SKILL.md
    (own / "stray.md").write_text("x", encoding="utf-8")
    listed = [s for s in SkillLoader(workspace, env={}).list() if s["name"] in {"alpha", "zeta"}]
    alpha = str(own / "alpha" / "SKILL.md")
    assert listed == [
        {"name": "alpha", "description": "No description provided.", "path": alpha},
        {"name": "zeta", "description": "Last one.", "path": str(path)},
    ]
    names_ = [s["name"] for s in SkillLoader(workspace, env={}).list()]
    assert names_ == sorted(names_)
    assert "not-a-skill" not in names_


def test_load_skill_tool_texts_and_errors(tools_with: ToolsWith, workspace: Path) -> None:
    skill(workspace / ".toold" / "skills", "mine", "\n\n# Mine\n\nDo it.\n\n")
    call = tools_with(skills=SkillLoader(workspace, env={}))

    def load(name: str) -> str:
        return call("load_skill", skill_name=name)

    assert load("mine") == "# Mine\n\nDo it."
    assert load("  mine ") == "# Mine\n\nDo it."
    with call.fails(ValueError, match=r"^skill_name must not be empty$"):
        load("   ")
    with call.fails(ValueError, match=r"^Unknown skill: nope$"):
        load("nope")
    (workspace / "secret").mkdir()
    (workspace / "secret" / "SKILL.md").write_text("leak", encoding="utf-8")
    with call.fails(ValueError, match=r"^Unknown skill: \.\./\.\./secret$"):
        load("../../secret")


def test_unbound_tool_says_unavailable(call: Call) -> None:
    assert call.failed("load_skill", skill_name="x") == "Skill loader unavailable."
