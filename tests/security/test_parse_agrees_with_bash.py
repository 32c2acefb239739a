"""The parse agrees with bash: whatever the guard lets run unasked, bash runs no program the
classifier did not see.

Each command runs under the real bash with PATH holding only logging shims (no program
does anything but write its name to a log). For every command the guard would let run
without asking — read-only in default mode, or not dangerous in auto mode — the programs
bash started must all be programs the analysis found. A grammar gap that hides a command
from tree-sitter (escaped backticks, here-document bodies...) fails here.
"""

from __future__ import annotations

import fcntl
import os
import select
import subprocess
from pathlib import Path

import pytest

from tests.security.spellings import CONTEXTS, QUOTINGS, REDIRECTIONS, join
from toold.permissions.commands import analyse

SHIMS = ["rm", "mv", "cp", "touch", "ls", "cat", "head", "wc", "grep", "sort", "git", "sh"]
CORPUS = [
    "ls; rm a",
    "ls && rm a",
    "ls | rm a",
    "ls\nrm a",
    "echo $(rm a)",
    "echo `rm a`",
    'echo "$(rm a)"',
    'echo "`rm a`"',
    "echo `echo \\`rm a\\``",
    'echo `echo "\\`rm a\\`"`',
    "echo \\`rm a\\`",
    'echo "\\`rm a\\`"',
    "cat <<EOF\n`rm a`\nEOF\n",
    "cat <<EOF\n$(rm a)\nEOF\n",
    "cat <<'EOF'\n$(rm a)\n`rm a`\nEOF\n",
    "cat <<\\EOF\n$(rm a)\nEOF\n",
    "cat <<EOF\n\\$(rm a)\nEOF\n",
    "cat <<EOF\n\\\\$(rm a)\nEOF\n",
    "cat <<EOF && rm a\nx\nEOF\n",
    "cat <<-EOF\n\tx\n\tEOF\nrm a",
    "cat < <(rm a)",
    "cat <(rm a)",
    "ls >(rm a)",
    "cat <<< $(rm a)",
    "cat <<< `rm a`",
    "echo ${x:-$(rm a)}",
    "echo $((1 + $(rm a)))",
    "x=$(rm a)",
    "x=`rm a`; ls",
    "f() { rm a; }; f",
    "ls # ; rm a",
    "ls;#x\nrm a",
    "ls \\\nrm a",
    "ls \\; rm a",
    'echo "a\\"; rm a"',
    "echo 'a'\\''; rm a'",
    "echo $'\\''; rm a",
    "ls $(:)\nrm a",
    "case a in a) rm a;; esac",
    "if ls; then rm a; fi",
    "while false; do ls; done; rm a",
    "for i in 1; do rm a; done",
    "(rm a)",
    "{ rm a; }",
    "! rm a",
    "ls & rm a",
    "ls |& rm a",
    "echo $(case x in x) rm a;; esac)",
    "echo $( (rm a) )",
    "echo $(echo x # )\nrm a)",
    "ls ${x}rm a",
    "r''m a",
    "\\rm a",
    '"rm" a',
    "g\\\nit status; rm a",
    "ls; g\\\nit status",
    "echo x # y \\\nrm a",
    "ls\rrm a",
    "{rm,a}",
    "ls; {rm,a}",
    "rm${IFS}a",
    "[r]m a",
    "/bin/r? a",
    "ls >\\\na; rm a",
    "coproc rm a",
    "echo $[1+$(rm a)]",
    "time rm a",
    "command rm a",
    "exec rm a",
    "echo a | xargs rm",
    "find . -maxdepth 0 -exec rm a ';'",
    "echo rm a | sh",
    "sh -c 'rm a'",
    "eval rm a",
    "a=rm; $a a",
    "cat a | head -1 | wc -l",
    "git log | head",
    "grep -rn x . | sort",
    "ls -la 2>/dev/null",
]


ARGV_FORMS = (["rm", "-rf", "d"], ["git", "reset", "--hard"], ["ls", "-la", "x"], ["cat", "f"])


def _generated() -> list[str]:
    """Redirections at every gap, quoting, \\v and \\f where a blank is, nested contexts."""
    lines: list[str] = []
    for words in ARGV_FORMS:
        for op in (*REDIRECTIONS, "0<f", "{fd}>out.txt", "3>&-", "2>>out.txt"):
            for gap in range(len(words) + 1):
                parts = [join(words[:gap]), op, join(words[gap:])]
                lines.append(" ".join(p for p in parts if p))
        for quote in QUOTINGS.values():
            for i, word in enumerate(words):
                lines.append(" ".join([*words[:i], quote(word), *words[i + 1 :]]))
        for char in ("\v", "\f", "\r", "\u00a0", "\\\n"):
            lines.append(words[0] + char + " ".join(words[1:]))
            lines.append(" ".join(words[:-1]) + char + words[-1])
        for context in CONTEXTS:
            if "&" not in context.replace("&&", ""):
                lines.append(context.format(f"{words[0]} >out.txt {join(words[1:])}"))
    return lines


GENERATED = _generated()


@pytest.fixture(scope="module")
def bash_with_shims(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("shims")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for name in SHIMS:
        shim = bin_dir / name
        shim.write_text(
            '#!/bin/bash\necho "${0##*/}" >> "$SHIM_LOG"\n'
            # One write per line: two shims of a pipeline append at once.
            'line=$(printf "%s\\x1f" "${0##*/}" "$@")\n'
            'printf "%s\\n" "$line" >> "$SHIM_LOG.argv"\n',
            encoding="utf-8",
        )
        shim.chmod(0o755)
    (root / "f").write_text("f\n", encoding="utf-8")
    return root, bin_dir


def _ran(root: Path, bin_dir: Path, command: str) -> set[str]:
    return {argv[0] for argv in _argvs(root, bin_dir, command)}


def _argvs(root: Path, bin_dir: Path, command: str) -> list[tuple[str, ...]]:
    """The argv of every shim bash started for ``command``, program name first."""
    log = root / "log"
    log.write_text("", encoding="utf-8")
    (root / "log.argv").write_text("", encoding="utf-8")
    env = {"PATH": os.fspath(bin_dir), "SHIM_LOG": os.fspath(log)}
    # Every process bash starts inherits this pipe's write end, even one whose stdout and
    # stderr go to files (cat <(rm &>out -rf d)) and that outlives bash: its EOF says
    # that the last of them has exited and logged.
    done, low = os.pipe()
    alive = fcntl.fcntl(low, fcntl.F_DUPFD, 20)  # above the descriptors the lines use (3>&-)
    os.close(low)
    try:
        subprocess.run(
            ["/bin/bash", "-c", command],
            env=env,
            cwd=root,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            check=False,
            pass_fds=(alive,),
        )
        os.close(alive)
        alive = -1
        ready, _, _ = select.select([done], [], [], 10)
        assert ready and os.read(done, 1) == b"", f"a process of {command!r} outlived 10 s"
    finally:
        os.close(done)
        if alive >= 0:
            os.close(alive)
    lines = (root / "log.argv").read_text(encoding="utf-8").splitlines()
    return [tuple(line.split("\x1f")[:-1]) for line in lines if line]


def _seen_argvs(command: str) -> list[tuple[str, ...]] | None:
    """The argv of each shim program the analysis found (None: not statically known)."""
    out = []
    for r in analyse(command).commands:
        for layer in r.layers:
            if layer.program in SHIMS and layer.via is None:
                if any(a is None for a in layer.args):
                    return None
                out.append((layer.program, *(str(a) for a in layer.args)))
    return out


@pytest.mark.parametrize("command", CORPUS)
def test_what_runs_unasked_is_what_the_parse_saw(
    bash_with_shims: tuple[Path, Path], command: str
) -> None:
    analysis = analyse(command)
    runs_unasked = analysis.read_only or analysis.danger is None
    ran = _ran(*bash_with_shims, command)
    seen = {layer.program for r in analysis.commands for layer in r.layers}
    if runs_unasked:
        assert ran <= seen, (ran, seen)


def test_the_shims_log_what_bash_runs(bash_with_shims: tuple[Path, Path]) -> None:
    assert _ran(*bash_with_shims, "echo `echo \\`rm a\\``") == {"rm"}
    assert _ran(*bash_with_shims, "ls | head") == {"ls", "head"}


@pytest.mark.parametrize("command", GENERATED)
def test_generated_lines_run_only_what_the_parse_saw(
    bash_with_shims: tuple[Path, Path], command: str
) -> None:
    analysis = analyse(command)
    ran = _ran(*bash_with_shims, command)
    seen = {layer.program for r in analysis.commands for layer in r.layers}
    if analysis.read_only or analysis.danger is None:
        assert ran <= seen, (ran, seen)


def test_bash_runs_the_argv_the_parse_found(bash_with_shims: tuple[Path, Path]) -> None:
    # Where the analysis is complete and knows every word, bash's argv is the same: the
    # words after a redirection (rm >out -rf d) are arguments, wherever it stands.
    compared = []
    differ = []
    for command in GENERATED:
        analysis = analyse(command)
        seen = _seen_argvs(command)
        if not analysis.script.complete or analysis.script.problems or seen is None:
            assert not analysis.read_only
            continue
        compared.append(command)
        ran = _argvs(*bash_with_shims, command)
        if sorted(ran) != sorted(seen):
            differ.append((command, ran, seen))
    print(f"\nargv compared with bash: {len(compared)} of {len(GENERATED)} lines")
    assert len(compared) > len(GENERATED) // 2
    assert differ == []
