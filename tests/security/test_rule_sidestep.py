"""Deny rules that cannot be sidestepped: shell rules match each command as it will run,
file rules match the normalised path the tool will use.

Shell: ``allow bash(prefix:git*)`` with ``deny bash(prefix:git push*)``, in default and in
auto mode; the remote must keep its refs. Files: deny rules on ``.env`` and ``secrets``
for read_file, grep, glob, list_dir; the secrets must never come back in a result.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.security.conftest import DaemonFactory, GuardedDaemon, held

GIT_RULES = {"allow": ("bash(prefix:git*)",), "deny": ("bash(prefix:git push*)",)}
PUSHES = [
    "git push origin main",
    "git -c core.quotepath=off push origin main",
    "git --no-pager push origin main",
    "git -C . push origin main",
    "git --git-dir=.git push origin main",
    "git --git-dir .git push origin main",
    "git --work-tree=. push origin main",
    "git --exec-path=/usr/lib/git-core push origin main",
    "git --namespace=x push origin main",
    "git -P push origin main",
    "git --paginate push origin main",
    "git --no-replace-objects --literal-pathspecs push origin main",
    "git  push   origin main",
    "git\tpush origin main",
    '"git" push origin main',
    "git 'push' origin main",
    "git pu''sh origin main",
    'g"i"t push origin main',
    "/usr/bin/git push origin main",
    "\\git push origin main",
    "GIT_DIR=.git git push origin main",
    "env git push origin main",
    "command git push origin main",
    "nice git push origin main",
    "timeout 30 git push origin main",
    "exec git push origin main",
    "git status; git push origin main",
    "git status && git push origin main",
    "git status\ngit push origin main",
    "echo $(git push origin main)",
    "true | git push origin main",
    "(git push origin main)",
    "{ git push origin main; }",
    "if true; then git push origin main; fi",
    "echo push origin main | xargs git",
    "G=git; $G push origin main",
    "$(echo git) push origin main",
    "git $(echo push) origin main",
    "P=push; git $P origin main",
    "sh -c 'git push origin main'",
    'bash -c "git push origin main"',
    "eval git push origin main",
    "sh <<< 'git push origin main'",
    "find . -maxdepth 0 -exec git push origin main ';'",
    "git -c alias.p=push p origin main",
    "$'git' push origin main",
]


@pytest.mark.parametrize("command", PUSHES)
@pytest.mark.parametrize("mode", ["default", "auto"])
def test_a_deny_rule_on_git_push_holds(daemon_for: DaemonFactory, mode: str, command: str) -> None:
    daemon = daemon_for(mode, **GIT_RULES)
    result = daemon.call("bash", {"command": command})
    assert held(result), result
    assert daemon.damage() == []


def test_the_allow_rule_still_allows_other_git_commands(daemon_for: DaemonFactory) -> None:
    daemon = daemon_for("default", **GIT_RULES)
    asked = len(daemon.client.asked)
    result = daemon.call("bash", {"command": "git -C . rev-parse --abbrev-ref HEAD"})
    assert result == {"content": "main", "isError": False, "exitCode": 0}
    assert len(daemon.client.asked) == asked


FILE_RULES = {
    "deny": (
        "read_file(prefix:.env*)",
        "read_file(prefix:secrets*)",
        "grep(prefix:secrets*)",
        "grep(prefix:.env*)",
        "glob(prefix:secrets*)",
        "list_dir(prefix:secrets*)",
        "grep_search(prefix:secrets*)",
        "file_info(prefix:.env*)",
    )
}
SECRETS = ("canary-secret", "secret key", "API_TOKEN", "key.txt")
FILE_ATTACKS: list[tuple[str, dict[str, Any]]] = [
    ("read_file", {"file_path": ".env"}),
    ("read_file", {"file_path": "./.env"}),
    ("read_file", {"file_path": ".//.env"}),
    ("read_file", {"file_path": "a/../.env"}),
    ("read_file", {"file_path": "src/../.env"}),
    ("read_file", {"file_path": "./src/./../.env"}),
    ("read_file", {"file_path": "d/sub/../../.env"}),
    ("read_file", {"path": ".env"}),
    ("read_file", {"path": "./.env"}),
    ("read_file", {"file_path": "", "path": ".env"}),
    ("read_file", {"file_path": "a", "path": ".env"}),
    ("read_file", {"file_path": ".env", "path": ".env"}),
    ("read_file", {"file_path": None, "path": ".env"}),
    ("read_file", {"file_path": "./secrets/key.txt"}),
    ("read_file", {"file_path": "d/../secrets/key.txt"}),
    ("read_file", {"path": "secrets//key.txt"}),
    ("grep", {"pattern": "secret", "path": "./secrets"}),
    ("grep", {"pattern": "secret", "path": "secrets/"}),
    ("grep", {"pattern": "secret", "path": "d/../secrets"}),
    ("grep", {"pattern": "secret"}),
    ("grep", {"pattern": "secret", "path": "."}),
    ("grep", {"pattern": "TOKEN", "path": "./.env"}),
    ("grep", {"pattern": "TOKEN", "path": "./"}),
    ("glob", {"pattern": "*", "path": "./secrets"}),
    ("glob", {"pattern": "secrets/*"}),
    ("glob", {"pattern": "**/*.txt", "path": "."}),
    ("list_dir", {"path": "./secrets"}),
    ("list_dir", {"path": "secrets/."}),
    ("grep_search", {"pattern": "secret", "path": "./secrets"}),
    ("file_info", {"path": "./.env"}),
]


def _leaks(result: dict[str, Any]) -> list[str]:
    text = str(result)
    return [s for s in SECRETS if s in text]


@pytest.mark.parametrize(("tool", "args"), FILE_ATTACKS)
def test_file_deny_rules_match_the_path_the_tool_uses(
    daemon_for: DaemonFactory, tool: str, args: dict[str, Any]
) -> None:
    daemon: GuardedDaemon = daemon_for("default", **FILE_RULES)
    result = daemon.call(tool, args)
    assert held(result), result
    assert _leaks(result) == []


def test_files_outside_the_rules_are_still_read(daemon_for: DaemonFactory) -> None:
    daemon = daemon_for("default", **FILE_RULES)
    result = daemon.call("read_file", {"file_path": "./a"})
    assert result == {"content": "1: file a", "isError": False}
