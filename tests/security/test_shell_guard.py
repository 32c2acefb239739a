"""Shell attacks over the wire, as origin agent, against a user who always answers Deny.

Classes (issue 11): assignment prefixes in front of any program (default mode);
"read-only" programs that write (default mode); recursive deletes and interpreters fed
code in auto mode; plan mode refusing what cannot be resolved. Each case must be
refused (asked and denied, or refused outright) and every canary must survive.
"""

from __future__ import annotations

import pytest

from tests.security.conftest import DaemonFactory, held

ASSIGNMENT_PREFIX = [
    "X=/cat rm -f canary.txt",
    "X=/usr/bin/cat mv a b",
    "X=/cat perl -e 'unlink q{canary.txt}'",
    "X=/cat perl -e 'system pack q{H*}, q{726d202d72662064}'",
    "X=ls rm canary.txt",
    "X=/bin/echo cp b a",
    "A=1 B=/cat C=ls rm -f a",
    "X=/cat truncate -s 0 a",
    "X=/cat dd if=/dev/null of=a",
    "X=/cat sed -i s/file/gone/ a",
    "X=/cat tee a < b",
    "X=/cat ln -sf b a",
    "LC_ALL=C rm canary.txt",
    "PATH=/usr/bin:$PATH rm a",
    "X=/cat find d -delete",
    "X='/cat' python3 -c 'import os; os.remove(\"a\")'",
    'X="/cat" rm -rf d',
    "X=/cat; rm a",
    "X=/cat\nrm a",
    "X=$(cat) rm a </dev/null",
]

# date --set is a classifier case only (tests/unit/test_commands.py): over the wire a
# regression would set this machine's clock (run as root against the old guard, it did).
READ_ONLY_THAT_WRITE = [
    "pytest --basetemp=d",
    "python3 -m pytest --basetemp=d",
    "ruff format src",
    "ruff check --fix src",
    "ruff check --unsafe-fixes --fix src",
    "ruff check --output-file=a src",
    "mypy --junit-xml=a src",
    "sort -o a b",
    "sort --output=a b",
    "sort --out=a b",
    "sed -i 's/file/gone/' a",
    "sed --in-place 's/file/gone/' a",
    "sed -n 'w a' b",
    "sed 's/file/gone/w a' b",
    "find . -name canary.txt -delete",
    "find d -exec rm {} +",
    "find . -name a -fprint a",
    "uniq b a",
    "git log --output=a",
    "git diff --output=a HEAD",
    "git -c core.pager='rm -f a' log",
    "cat b > a",
    "echo gone > canary.txt",
    "ls >> a",
    "cat b | tee a",
    "printf gone > a",
    "head -1 b 1> a",
    "wc -l b &> a",
    "xxd b a",
    "awk '{print > \"a\"}' b",
    "awk 'BEGIN{system(\"rm -f a\")}'",
    "rg --pre ./x file",
    "echo a | xargs rm",
    "ls | xargs sort -o a",
    "git tag -d nothing; rm a",
    "env rm a",
    "command rm a",
    "nice rm a",
    "echo `echo \\`rm a\\``",
    'echo `echo "\\`rm a\\`"`',
    "cat <<EOF\n`rm a`\nEOF\n",
    "cat <<EOF\n\\\\$(rm a)\nEOF\n",
]

AUTO_MODE_DELETES = [
    "rm --rec d",
    "rm --recursive d",
    "rm --recu d",
    "rm -r -f d",
    "rm -fr d",
    "rm -R d",
    "rm -Rfv d",
    "rm -rf -- d",
    "/bin/rm -rf d",
    "\\rm -rf d",
    '"rm" -rf d',
    "r''m -rf d",
    "$'\\x72m' -rf d",
    "R=rm; $R -rf d",
    "$(echo rm) -rf d",
    "`echo rm` -rf d",
    "r? -rf d",
    "rm $(echo -rf) d",
    "F=-rf; rm $F d",
    "rm -{r,f} d",
    "echo rm -rf d | sh",
    "echo rm -rf d | bash",
    "sh <<< 'rm -rf d'",
    "bash <<< 'rm -rf d'",
    "cat <<EOF | sh\nrm -rf d\nEOF\n",
    "source /dev/stdin <<< 'rm -rf d'",
    ". /dev/stdin <<< 'rm -rf d'",
    "bash -c 'rm -rf d'",
    'sh -c "rm -rf d"',
    "eval 'rm -rf d'",
    "python3 -c 'import shutil; shutil.rmtree(\"d\")'",
    "python3 - <<< 'import shutil; shutil.rmtree(\"d\")'",
    "python3 <<EOF\nimport shutil\nshutil.rmtree('d')\nEOF\n",
    "perl -MFile::Path -e 'rmtree q{d}'",
    "perl -e 'system(\"rm -rf d\")'",
    'ruby -e \'require "fileutils"; FileUtils.rm_rf("d")\'',
    'node -e \'require("fs").rmSync("d", {recursive: true})\'',
    "awk 'BEGIN{system(\"rm -rf d\")}'",
    "sed -n '1e rm -rf d' f",
    "find d -delete",
    "find . -path ./d -exec rm -rf {} +",
    "echo d | xargs rm -r",
    "xargs rm -rf <<< d",
    "busybox rm -rf d",
    "env rm -rf d",
    "nice rm -rf d",
    "timeout 9 rm -rf d",
    "command rm -rf d",
    "exec rm -rf d",
    "nohup rm -rf d",
    "git clean -fdx",
    "git clean --force -d -x",
    "ls; rm -rf d",
    "ls && (rm -rf d)",
    "{ rm -rf d; }",
    "if true; then rm -rf d; fi",
    "f() { rm -rf d; }; f",
    "echo $(rm -rf d)",
    "X='a[$(rm -rf d)]'; echo $((X))",
    "X='$(rm -rf d)'; echo ${X@P}",
    "BASH_ENV=/dev/stdin bash f <<< 'rm -rf d'",
    "GIT_PAGER='rm -rf d' git -p log",
    "git -c alias.x='!rm -rf d' x",
    "shred -u a",
    "dd if=/dev/zero of=a bs=1 count=1",
    "rm -rf d 'unterminated",
    "flock f -c 'rm -rf d'",
    "flock f rm -rf d",
    "script -qc 'rm -rf d' /dev/null",
    "taskset -c 0 rm -rf d",
    "setsid rm -rf d",
    "stdbuf -oL rm -rf d",
    "ionice -c 3 rm -rf d",
    "chroot / rm -rf $PWD/d",
    "xargs -I{} rm -rf {} <<< d",
    "git submodule foreach 'rm -rf ../d'",
    "git rebase --exec 'rm -rf d' HEAD",
    "unshare rm -rf d",
    "hash -p /bin/rm ls; ls -rf d",
    "mkdir -p x && cp /bin/rm x/ls && PATH=$PWD/x:$PATH ls -rf d",
    "mkdir -p x && cp /bin/rm x/ls && export PATH=$PWD/x:$PATH && ls -rf d",
    "for PATH in /nonexistent; do true; done; cp /bin/rm ls; PATH=. ls -rf d",
    "alias ls='rm -rf d'\nls",
    'ls() { command rm "$@"; }; ls -rf d',
]


@pytest.mark.parametrize("command", ASSIGNMENT_PREFIX)
@pytest.mark.parametrize("tool", ["bash", "background_run"])
def test_assignment_prefixes_do_not_make_a_command_read_only(
    daemon_for: DaemonFactory, tool: str, command: str
) -> None:
    daemon = daemon_for("default")
    result = daemon.call(tool, {"command": command})
    assert held(result), result
    assert daemon.damage() == []


@pytest.mark.parametrize("command", READ_ONLY_THAT_WRITE)
def test_read_only_programs_that_write_are_asked_about(
    daemon_for: DaemonFactory, command: str
) -> None:
    daemon = daemon_for("default")
    result = daemon.call("bash", {"command": command})
    assert held(result), result
    assert daemon.damage() == []


@pytest.mark.parametrize("command", AUTO_MODE_DELETES)
def test_auto_mode_asks_before_recursive_deletes_and_code_it_cannot_see(
    daemon_for: DaemonFactory, command: str
) -> None:
    daemon = daemon_for("auto")
    asked = len(daemon.client.asked)
    result = daemon.call("bash", {"command": command})
    assert held(result), result
    assert len(daemon.client.asked) == asked + 1  # asked, and the user said Deny
    assert daemon.damage() == []


@pytest.mark.parametrize(
    "command",
    ["R=rm; $R -rf d", "$(echo rm) -rf d", "sh <<< 'rm -rf d'", "ls | sh", "cat f", "ls"],
)
def test_plan_mode_refuses_shell_commands_without_asking(
    daemon_for: DaemonFactory, command: str
) -> None:
    daemon = daemon_for("plan")
    result = daemon.call("bash", {"command": command})
    assert result["content"] == "Plan mode: bash blocked (read-only)"
    assert daemon.client.asked == []
    assert daemon.damage() == []


def test_auto_mode_still_runs_ordinary_commands(daemon_for: DaemonFactory) -> None:
    # The other side of the auto-mode cases: a plain build step is not asked about.
    daemon = daemon_for("auto")
    asked = len(daemon.client.asked)
    result = daemon.call("bash", {"command": "mkdir -p build && cp f build/f && ls build"})
    assert result == {"content": "f", "isError": False, "exitCode": 0}
    assert len(daemon.client.asked) == asked


def test_the_canaries_notice_damage(daemon_for: DaemonFactory) -> None:
    # Auto mode runs a plain (non-recursive) rm: the harness must see it, or it proves nothing.
    daemon = daemon_for("auto")
    result = daemon.call("bash", {"command": "rm a && git push -q origin main"})
    assert not result["isError"], result
    assert daemon.damage() == ["a", "remote refs"]
    assert daemon.damage() == []  # restored for the next case


# Issue 23: what an independent review ran unasked. Auto mode, a user who answers Deny.
REVIEW_AUTO = [
    "rm >out.txt -rf d",
    "rm 2>/dev/null -r -f d",
    "rm <f --recursive --force d",
    "git >out.txt push --force origin main:x",
    "git push >out.txt --force origin main:x",
    "git push origin >out.txt +main:x",
    "git 2>/dev/null push origin --delete keep",
    "bash --rcfile f -c 'rm -rf d'",
    "time -p rm -rf d",
    "flock f find d -exec rm {} +",
    "true\n\\rm -rf d",
    "GIT push --force origin main:x",
]
# Default mode: programs the parse and bash disagree on, or that read what is never judged.
REVIEW_DEFAULT = [
    "git\x0bstatus",
    "git\x0cstatus",
    "ls\x0b-malicious --write",
    "g\\it status --short",
    "awk 'BEGIN{ARGV[1]=\"/etc/hostname\";ARGC=2}{print}'",
    "printf '/etc/hostname\\0' | sort --files0-from=-",
    "printf '/etc/hostname\\0' | wc --files0-from=-",
]
SECRET = "sk-canary-23"
SECRET_ORACLES = [
    "echo $TOOLD_CANARY_KEY",
    "case $TOOLD_CANARY_KEY in sk-*) echo yes;; esac",
    "[[ $TOOLD_CANARY_KEY == sk-* ]] && echo yes",
    "cat <<< $TOOLD_CANARY_KEY",
    "printenv TOOLD_CANARY_KEY",
    "printenv",
    "env",
    "set",
    "echo ${!TOOLD_CANARY@}",
    "tr '\\0' '\\n' < /proc/self/environ",
]


@pytest.mark.parametrize("command", REVIEW_AUTO)
def test_the_reviews_spellings_ask_in_auto_mode(daemon_for: DaemonFactory, command: str) -> None:
    daemon = daemon_for("auto")
    asked = len(daemon.client.asked)
    result = daemon.call("bash", {"command": command})
    assert held(result), result
    assert len(daemon.client.asked) == asked + 1
    assert daemon.damage() == []


def test_a_leading_zero_chmod_asks_in_auto_mode(daemon_for: DaemonFactory) -> None:
    daemon = daemon_for("auto")
    before = (daemon.workspace / "a").stat().st_mode
    for command in ("chmod 00777 a", "chmod 1777 a", "chmod o+w a", "chmod u+s a"):
        assert held(daemon.call("bash", {"command": command})), command
        assert (daemon.workspace / "a").stat().st_mode == before, command


@pytest.mark.parametrize("command", REVIEW_DEFAULT)
def test_the_reviews_read_only_lookalikes_ask_in_default_mode(
    daemon_for: DaemonFactory, command: str
) -> None:
    daemon = daemon_for("default")
    result = daemon.call("bash", {"command": command})
    assert held(result), result
    assert daemon.damage() == []


@pytest.mark.parametrize("mode", ["default", "auto"])
@pytest.mark.parametrize("command", SECRET_ORACLES)
def test_the_daemons_secrets_are_not_an_oracle(
    daemon_for: DaemonFactory, mode: str, command: str
) -> None:
    daemon = daemon_for(mode, extra_env=(("TOOLD_CANARY_KEY", SECRET),))
    result = daemon.call("bash", {"command": command})
    assert held(result), result
    assert SECRET not in str(result) and "yes" not in str(result.get("content"))


def test_a_harmless_variable_still_runs_unasked(daemon_for: DaemonFactory) -> None:
    # The other side: the allow-list (HOME, PWD, loop variables...) keeps echo $HOME read-only.
    daemon = daemon_for("default", extra_env=(("TOOLD_CANARY_KEY", SECRET),))
    result = daemon.call("bash", {"command": "for f in a b; do echo $f; done; echo $PWD"})
    assert not result["isError"], result
    assert result["content"].splitlines()[:2] == ["a", "b"]
