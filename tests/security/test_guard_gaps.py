"""The review's gaps (issue 11, second round), by class: the classifier, then over the wire.

1. Default mode: reads outside the workspace and of the daemon's environment ask.
2. Auto mode: the danger detector knows process killers, power, service stops, deleting
   syncs and archivers, crontab, editors fed commands, git commands that discard work,
   recursive ownership changes, disk tools, and writes or links outside the workspace.
3. Auto mode: a command that may write files and has a word only known at run time (a
   substitution, an expansion, a glob that could match toold.toml) asks.

Commands that would damage this machine if the guard regressed (kill -1, shutdown,
systemctl, crontab -r, writes to /etc...) are classifier cases only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.security.conftest import DaemonFactory, GuardedDaemon, held
from toold.permissions.guard import PermissionGuard


def _decide(mode: str, command: str) -> tuple[str, str]:
    decision = PermissionGuard.from_config(mode, [], []).decide("bash", {"command": command})
    return decision.action, decision.reason


def _refused_for_good(command: str) -> bool:
    """Auto mode asks, and "Always allow" may never answer (a danger or self-escalation)."""
    decision = PermissionGuard.from_config("auto", [], []).decide("bash", {"command": command})
    return decision.action == "ask" and not decision.approvable


READS_OUTSIDE = [
    "cat ~/.ssh/id_rsa",
    "head -c 10 /etc/shadow",
    "ls /root",
    "grep -r key ~/.aws",
    "cd /etc && cat shadow",
    "git -C /tmp log",
    "cat $HOME/.netrc",
    'cat "${HOME}/.netrc"',
    "cat ${X}",
    "grep --file=/etc/shadow x",
    "grep -f/etc/shadow x",
    "grep -f /etc/shadow x",
    "sed -n p /etc/passwd",
    "sed -e p /etc/passwd",
    "awk '{print}' /etc/passwd",
    "cat a/../../x",
    "cat ./../x",
    "ls ..",
    "cat < /etc/shadow",
    "tr a b < ~/.ssh/id_rsa",
    "echo $(</etc/shadow)",
    "cd",
    "cd ~",
    "cd -",
    "cd .. && cat x",
    'for f in /etc/*; do cat "$f"; done',
    "f=/etc/passwd; for f in a; do cat $f; done",
    "ls /etc/*",
    "cat /e*/shadow",
    "find / -name id_rsa",
    "tail -f /var/log/syslog",
    "git diff --no-index /etc/passwd f",
    "git log -- ../x",
    "date -r ~/.ssh/id_rsa",
    "date --reference=/etc/shadow",
    "stat /etc/shadow",
    "[ -f ~/.ssh/id_rsa ] && echo yes",
    "diff <(cat /etc/shadow) f",
    "cat /proc/self/environ",
    "wc -c $(ls /etc)",
    "find . -name '*.py' | xargs cat",
    "echo /etc/shadow | xargs cat",
    "grep -- -x /etc/passwd",
    "rg --files /root",
    "git config --list",
    "git config --get-regexp .",
    "echo ~/.ssh/*",
    "xargs -a /etc/shadow echo",
]
ENVIRONMENT = [
    "env",
    "printenv",
    "printenv OPENAI_API_KEY",
    "set",
    "declare -p",
    "export -p",
    "compgen -v",
    "echo $OPENAI_API_KEY",
    'echo "key: ${ANTHROPIC_API_KEY}"',
    "printf '%s' \"$AWS_SECRET_ACCESS_KEY\"",
    "echo $(echo $KEY)",
    "cat <<< $KEY",
    "cat <<EOF\n$KEY\nEOF\n",
    "ps e",
    "ps auxe",
    "jq -n env",
    "jq -n '$ENV.KEY'",
    "awk 'BEGIN{print ENVIRON[\"KEY\"]}'",
    "[[ $KEY == a* ]] && echo yes",
]
STILL_READ_ONLY = [
    "echo /etc/passwd",
    "echo $HOME",
    "echo $?",
    "seq 1 5",
    "date +%s",
    "expr 1 + 2",
    "which python3",
    "basename /a/b/c",
    "cat a/../b",
    "cd src && ls",
    "ls src/*.py",
    "grep /api/ src",
    "grep -rn '/v1/' .",
    "sed -n '/start/,/end/p' f",
    "awk '/x/ {print}' f",
    'for f in src/*.py; do wc -l "$f"; done',
    'echo "$(git rev-parse HEAD)"',
    "diff <(sort a) <(sort b)",
    "ps aux",
    "git log origin/main..HEAD",
    "cat <<< 'literal $KEY'",
    "ls 2>/dev/null",
]


@pytest.mark.parametrize("command", READS_OUTSIDE + ENVIRONMENT)
def test_default_mode_asks_before_reading_outside_or_the_environment(command: str) -> None:
    assert _decide("default", command)[0] == "ask", command


@pytest.mark.parametrize("command", STILL_READ_ONLY)
def test_reads_inside_and_words_that_are_not_paths_stay_read_only(command: str) -> None:
    assert _decide("default", command) == ("allow", "read-only command")


DANGEROUS_IN_AUTO = [
    # Programs the guard has no table for may write wherever an argument points.
    "pytest --basetemp=/etc",
    "pytest --basetemp /etc",
    "python -m pytest --basetemp=../other",
    "pytest --junitxml=/outside/x.xml",
    "mypy --junit-xml=/tmp/x src",
    "ruff check --output-file=/etc/x",
    "docker run -v /:/h alpine true",
    "tar -C / -xf x.tar",
    "make -C ~/other install",
    "python3 tool.py --out=~/.bashrc",
    # A wrapper's own words: the directory it runs its command in.
    "env -C / rm -f etc/x",
    "env --chdir=/etc rm -f x",
    "sudo -D /etc rm -f x",
    "kill -9 -1",
    "kill -1",
    "kill -KILL -1",
    "kill -s 9 -1",
    "kill -- -1",
    "kill -TERM 0",
    "busybox kill -9 -1",
    "pkill python",
    "killall node",
    "shutdown -h now",
    "sudo reboot",
    "halt",
    "/sbin/poweroff",
    "init 0",
    "init 6",
    "systemctl stop nginx",
    "systemctl -H host stop nginx",
    "systemctl disable x",
    "systemctl mask x",
    "systemctl kill x",
    "systemctl poweroff",
    "systemctl reboot",
    "systemctl isolate rescue.target",
    "service nginx stop",
    "rsync -a --delete a/ b/",
    "rsync -a --delete-before a/ b/",
    "rsync -a --delete-after a/ b/",
    "rsync -a --delete-during a/ b/",
    "rsync -a --delete-excluded a/ b/",
    "rsync -a --del a/ b/",
    "rsync --remove-source-files a b",
    "tar --remove-files -cf x.tar d",
    "zip -m x.zip a",
    "zip -rm x.zip d",
    "zip --move x.zip a",
    "crontab -r",
    "crontab evil.cron",
    "vim -c ':!rm -rf d' f",
    "vi '+!rm -rf d' f",
    "nvim --cmd '!rm -rf d' f",
    "nvim -S evil.vim",
    "vim -s keys.txt f",
    "ex f",
    "ed f",
    "emacs --eval '(shell-command \"rm -rf d\")'",
    "emacs --batch -l evil.el",
    "less '+!rm -rf d' f",
    "vim -Nu evil.vim f",
    "emacsclient -e '(shell-command \"rm -rf d\")'",
    "echo 'rm -rf d' | at now",
    "git checkout-index -a -f",
    "git rm -rf .",
    "mke2fs /dev/sdb",
    "mount /dev/sdb /mnt",
    "umount /",
    "swapoff -a",
    "iptables -F",
    "ip link set eth0 down",
    "userdel someone",
    "passwd -d root",
    "hostnamectl set-hostname x",
    "timedatectl set-time 2020-01-01",
    "date -s 2020-01-01",
    "date --set=2020-01-01",
    "sysctl -w kernel.x=1",
    "modprobe -r x",
    "chattr +i f",
    "setfacl -R -m u:x:rwx d",
    "git clone https://example.invalid/r /tmp/r",
    "pip install --target /tmp/t x",
    "pip install --user x",
    "npm install -g x",
    "xargs -a list rm -rf",
    "git checkout -- f",
    "git checkout .",
    "git checkout HEAD~1 -- src",
    "git checkout -f main",
    "git restore f",
    "git restore --worktree --staged f",
    "git branch -D topic",
    "git branch --delete --force topic",
    "git stash drop",
    "git stash clear",
    "git reflog expire --expire=now --all",
    "git gc --prune=now",
    "git filter-branch --tree-filter x HEAD",
    "git update-ref -d refs/heads/main",
    "git -C . checkout -- f",
    "chown -R nobody d",
    "chgrp -R users d",
    "chmod -R 644 d",
    "chmod --recursive u+x d",
    "find . -execdir rm -rf {} \\;",
    "find . -ok rm -rf {} \\;",
    "find . -okdir rm -r {} \\;",
    "truncate -s 0 f",
    "shred f",
    "wipefs -a /dev/sda",
    "mkswap /dev/sda2",
    "fdisk /dev/sda",
    "parted /dev/sda rm 1",
    "sfdisk /dev/sda < layout",
    "echo x > /etc/hosts",
    "echo x >> ~/.bashrc",
    "echo key >> ~/.ssh/authorized_keys",
    "cat img > /dev/sda",
    "ls 2> /tmp/err",
    "exec 3>/etc/x",
    "cp x /etc/",
    "cp x ~/.bashrc",
    "cp x ~/.bash*",
    "cp -t /etc x",
    "cp --target-directory=/etc x",
    "mv x /tmp/",
    "mv /etc/x .",
    "tee ~/.profile",
    "tee -a /etc/x",
    "ln -s /etc/passwd x",
    "ln -sf ~/.ssh/id_rsa key",
    "ln ../outside x",
    "dd if=a of=/dev/sda",
    "install x /usr/local/bin/x",
    "sed -i s/a/b/ /etc/hosts",
    "sed -i -e s/a/b/ ~/.bashrc",
    "touch ~/.x",
    "curl -o ~/.bashrc http://example.invalid/x",
]
ESCALATION_SPELLED_AT_RUN_TIME = [
    'cp x "$(echo toold).toml"',
    "cp x \"$(printf 'tool%s.toml' d)\"",
    "cp x $(echo toold.toml)",
    "cp x `echo toold.toml`",
    'cp x "${NAME}"',
    "cp x toold.tom?",
    "cp x toold*",
    'cp x tool""d.toml',
    "cp x .tool?/audit.jsonl",
    "cp x tool{d.toml,}",
    "cp x t[o]old.toml",
    "cp x *.toml",
    "mv x $F",
    'sed -i s/a/b/ "$F"',
    'for f in *; do cp x "$f"; done',
    "printf 'tool%s.toml' d | xargs cp x",
    "find . -newer x -exec cp y {} \\;",
]
AUTO_STILL_RUNS = [
    "npm install",
    "pip install -e .",
    "make",
    "make -j4 test",
    "pytest -k foo",
    "python -m pytest -q",
    'git commit -m "msg"',
    "git checkout main",
    "git checkout -b topic origin/topic",
    "git restore --staged f",
    "git stash pop",
    "cp src/*.py build/",
    "mkdir -p build && cp f build/f",
    "echo $(date) > log.txt",
    "ln -s a b",
    "kill 12345",
    "kill -9 12345",
    "crontab -l",
    "vim f",
    "vim -R -d a b",
    "git rm --cached -r build",
    "git clone https://example.invalid/r vendor/r",
    "ip addr",
    "sysctl -a",
    "npm install --save-dev x",
    "rsync -a src/ build/",
    "tar -czf out.tgz src",
    "zip -r out.zip src",
    "find . -name '*.py' -exec wc -l {} +",
]


@pytest.mark.parametrize("command", DANGEROUS_IN_AUTO)
def test_auto_mode_asks_before_these_dangerous_commands(command: str) -> None:
    assert _refused_for_good(command), _decide("auto", command)


@pytest.mark.parametrize("command", ESCALATION_SPELLED_AT_RUN_TIME)
def test_auto_mode_asks_when_a_run_time_word_could_spell_toold_toml(command: str) -> None:
    assert _refused_for_good(command), _decide("auto", command)


@pytest.mark.parametrize("command", AUTO_STILL_RUNS)
def test_auto_mode_still_runs_ordinary_commands(command: str) -> None:
    assert _decide("auto", command) == ("allow", "auto mode")


# Over the wire: a user who answers Deny; nothing may leak, change or be created.

SECRET = "outside-canary-7f3a"
KEY = "sk-canary-env-91c2"
"""Held in TOOLD_CANARY_VALUE, a name that is not a secret's: commands inherit it, so the
guard is the only wall between it and the model (a secret-named variable never reaches
them at all: tests/engine/test_impersonation.py)."""


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A HOME outside the workspace holding a secret and a .bashrc."""
    root = tmp_path_factory.mktemp("outside-home")
    (root / ".ssh").mkdir()
    (root / ".ssh" / "id_rsa").write_text(SECRET)
    (root / ".bashrc").write_text("# canary\n")
    return root


def _daemon(daemon_for: DaemonFactory, mode: str, home: Path) -> GuardedDaemon:
    return daemon_for(mode, extra_env=(("HOME", str(home)), ("TOOLD_CANARY_VALUE", KEY)))


def _at(command: str, home: Path) -> str:
    return command.replace("{home}", str(home))


WIRE_READS = [
    "cat ~/.ssh/id_rsa",
    "cat $HOME/.ssh/id_rsa",
    "head -c 100 {home}/.ssh/id_rsa",
    "grep -r canary {home}",
    "ls {home}/.ssh",
    "cd {home} && cat .ssh/id_rsa",
    "cat < {home}/.ssh/id_rsa",
    "base64 {home}/.ssh/id_rsa",
    "env",
    "printenv",
    "printenv TOOLD_CANARY_VALUE",
    "echo $TOOLD_CANARY_VALUE",
    "cat <<< $TOOLD_CANARY_VALUE",
    "awk 'BEGIN{print ENVIRON[\"TOOLD_CANARY_VALUE\"]}'",
    "jq -n env",
    "ps eww",
]


@pytest.mark.parametrize("command", WIRE_READS)
def test_default_mode_reads_of_secrets_are_asked_and_leak_nothing(
    daemon_for: DaemonFactory, home: Path, command: str
) -> None:
    daemon = _daemon(daemon_for, "default", home)
    asked = len(daemon.client.asked)
    result = daemon.call("bash", {"command": _at(command, home)})
    assert held(result), result
    assert len(daemon.client.asked) == asked + 1
    assert SECRET not in str(result) and KEY not in str(result)


WIRE_AUTO = [
    "echo pwned >> ~/.bashrc",
    "echo pwned > {home}/.bashrc",
    "cp a {home}/.bashrc",
    "tee {home}/.bashrc < a",
    "ln -s {home}/.ssh/id_rsa key",
    "sed -i s/canary/pwned/ ~/.bashrc",
    "truncate -s 0 a",
    "tar --remove-files -cf x.tar canary.txt",
    "zip -qm x.zip canary.txt",
    "find d -execdir rm -rf {} +",
    "nvim --headless -c '!rm a' -c 'qa!'",
    'cp b "$(echo toold).toml"',
    "cp b \"$(printf 'tool%s.toml' d)\"",
    "cp b toold.tom?",
    "cp b toold*",
    'cp b tool""d.toml',
    "cp b .tool?/keep.txt",
]


@pytest.mark.parametrize("command", WIRE_AUTO)
def test_auto_mode_asks_before_damage_outside_and_self_escalation(
    daemon_for: DaemonFactory, home: Path, command: str
) -> None:
    daemon = _daemon(daemon_for, "auto", home)
    asked = len(daemon.client.asked)
    result = daemon.call("bash", {"command": _at(command, home)})
    assert held(result), result
    assert len(daemon.client.asked) == asked + 1
    assert daemon.damage() == []
    assert (home / ".bashrc").read_text() == "# canary\n"
    assert not (daemon.workspace / "key").exists()


def test_auto_mode_runs_a_plain_commit_and_copy_unasked(
    daemon_for: DaemonFactory, home: Path
) -> None:
    daemon = _daemon(daemon_for, "auto", home)
    asked = len(daemon.client.asked)
    command = 'git commit -q --allow-empty -m "msg" && mkdir -p out && cp src/*.py out/'
    result = daemon.call("bash", {"command": command})
    assert not result.get("isError"), result
    assert (daemon.workspace / "out" / "main.py").exists()
    assert len(daemon.client.asked) == asked


def test_the_harness_sees_a_leak_and_a_write_outside(daemon_for: DaemonFactory, home: Path) -> None:
    # In bypass mode the same commands run: HOME and the key reach the shell, or the cases
    # above would prove nothing.
    daemon = _daemon(daemon_for, "bypass", home)
    out = daemon.call("bash", {"command": "cat ~/.ssh/id_rsa; printenv TOOLD_CANARY_VALUE"})
    assert SECRET in str(out) and KEY in str(out)
    daemon.call("bash", {"command": "echo pwned >> ~/.bashrc"})
    assert (home / ".bashrc").read_text() == "# canary\npwned\n"
    (home / ".bashrc").write_text("# canary\n")
