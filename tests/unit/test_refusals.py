"""What the user refused outlives the daemon, outside the workspace, and fails closed."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from toold.config import TooldConfig
from toold.config_loading import load_config
from toold.refusals import forget_refusal, hold_refused, remember_refusal
from toold.user_state import UserStateError, secret_key

STRICT = '[permissions]\nmode = "default"\ndeny = ["bash(prefix:rm *)"]\n'
LOOSE = '[permissions]\nmode = "bypass"\nallow = ["bash"]\n[limits]\nmax_file_size = 4096\n'


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "user-state"
    monkeypatch.setenv("TOOLD_STATE_DIR", str(folder))
    return folder


@pytest.fixture
def root(workspace: Path) -> Path:
    return workspace.resolve()


def refuse(root: Path) -> TooldConfig:
    """The user kept STRICT over LOOSE; toold.toml is LOOSE on disk."""
    (root / "toold.toml").write_text(STRICT)
    kept = load_config(root)
    (root / "toold.toml").write_text(LOOSE)
    remember_refusal(root, kept)
    return kept


def test_the_refused_content_is_held_back_at_start_and_the_rest_applies(root: Path) -> None:
    refuse(root)
    config, message = hold_refused(root, load_config(root), None)
    assert config.permissions.mode == "default"
    assert config.permissions.allow == [] and config.permissions.deny == ["bash(prefix:rm *)"]
    assert config.limits.max_file_size == 4096  # not a loosening: applies
    assert message is not None and "permissions.mode default → bypass" in message


def test_other_content_other_workspaces_and_an_applied_refusal_are_not_held(
    root: Path, tmp_path: Path
) -> None:
    refuse(root)
    other = tmp_path / "other"
    other.mkdir()
    (other / "toold.toml").write_text(LOOSE)  # the same bytes, another workspace
    assert hold_refused(other, load_config(other), None)[1] is None
    (root / "toold.toml").write_text(LOOSE + "# edited\n")
    assert hold_refused(root, load_config(root), None)[1] is None
    (root / "toold.toml").write_text(LOOSE)
    forget_refusal(root)
    assert hold_refused(root, load_config(root), None)[1] is None


def test_the_editors_own_settings_still_choose(root: Path) -> None:
    refuse(root)
    overrides = {"permissions": {"mode": "bypass"}}
    config, message = hold_refused(root, load_config(root, overrides), overrides)
    assert config.permissions.mode == "bypass" and config.permissions.allow == []
    assert message is not None and "new allow rule bash" in message


def test_a_damaged_record_fails_closed(root: Path, state_dir: Path) -> None:
    refuse(root)
    [record] = (state_dir / "refused-config").glob("*.json")
    assert record.stat().st_mode & 0o777 == 0o600
    record.write_text("{not json")
    config, message = hold_refused(root, load_config(root), None)
    assert config.permissions.mode == "default" and config.permissions.allow == []
    assert message is not None and "cannot be used" in message and str(record) in message


def test_a_symlinked_record_is_never_followed(root: Path, state_dir: Path, tmp_path: Path) -> None:
    refuse(root)
    [record] = (state_dir / "refused-config").glob("*.json")
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("canary")
    record.unlink()
    record.symlink_to(elsewhere)
    config, message = hold_refused(root, load_config(root), None)
    assert config.permissions.mode == "default" and message is not None
    assert elsewhere.read_text() == "canary"


def test_the_key_is_made_once_even_by_racing_processes(state_dir: Path) -> None:
    keys: list[bytes] = []
    threads = [threading.Thread(target=lambda: keys.append(secret_key("k.key"))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(keys)) == 1 and len(keys[0]) == 32
    assert (state_dir / "k.key").stat().st_mode & 0o777 == 0o600
    assert state_dir.stat().st_mode & 0o777 == 0o700
    assert sorted(os.listdir(state_dir)) == ["k.key"]  # no temp file left


def test_a_key_that_is_a_symlink_or_not_a_key_is_refused(state_dir: Path, tmp_path: Path) -> None:
    secret_key("a.key")
    planted = tmp_path / "planted"
    planted.write_bytes(b"x" * 32)
    (state_dir / "b.key").symlink_to(planted)
    with pytest.raises(UserStateError, match=r"b\.key"):
        secret_key("b.key")
    (state_dir / "c.key").write_bytes(b"short")
    with pytest.raises(UserStateError, match="not a toold key"):
        secret_key("c.key")
