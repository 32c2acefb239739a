"""permissions/shell.py: the tree-sitter-bash parse the guard classifies."""

from __future__ import annotations

import pytest

from toold.permissions.shell import parse


def test_the_parse_finds_every_simple_command() -> None:
    script = parse("cd src && sudo rm -f x | tee log; echo $(git status) <(ls) `pwd`")
    assert [c.argv for c in script.commands] == [
        ["cd", "src"],
        ["sudo", "rm", "-f", "x"],
        ["tee", "log"],
        ["echo", None, None, None],
        ["git", "status"],
        ["ls"],
        ["pwd"],
    ]
    assert script.complete and not script.problems


@pytest.mark.parametrize(
    ("word", "value"),
    [
        ("plain", "plain"),
        ("'single quoted'", "single quoted"),
        ('"double \\"q\\""', 'double "q"'),
        ("\\r\\m", "rm"),
        ("r''m", "rm"),
        ('r""m', "rm"),
        ("-{r,f}", None),
        ("{1..3}", None),
        ("$X", None),
        ('"$X"', None),
        ("$'\\x72m'", None),
        ("{}", "{}"),
    ],
)
def test_static_word_values(word: str, value: str | None) -> None:
    assert parse(f"prog {word}").commands[0].argv[1] == value


@pytest.mark.parametrize(
    "text", ["ls 'unterminated", "ls &&", "if true; then ls", "echo $(", "ls | & rm a", "(ls"]
)
def test_an_incomplete_parse_is_a_fact(text: str) -> None:
    assert not parse(text).complete


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("echo $((1+2))", "arithmetic evaluation"),
        ("((x=1))", "arithmetic evaluation"),
        ("for ((i=0; i<3; i++)); do ls; done", "arithmetic evaluation"),
        ("echo ${a[$i]}", "arithmetic evaluation"),
        ("[[ $x -eq 1 ]]", "arithmetic evaluation"),
        ("echo ${X@P}", "parameter expansion"),
        ("echo ${X:-$(ls)}", "parameter expansion"),
        ("echo $'\\x41'", "ANSI-C quoting"),
        ("echo `echo \\`rm a\\``", "backslashes inside backticks"),
        ('echo `echo "\\`rm a\\`"`', "backslashes inside backticks"),
        ("cat <<EOF\n`rm a`\nEOF\n", "backticks in a here-document"),
    ],
)
def test_constructs_that_can_run_code_are_problems(text: str, problem: str) -> None:
    assert any(p.startswith(problem) for p in parse(text).problems)


@pytest.mark.parametrize("text", ['echo $X ${X} ${#X} $1 $? "$@"', "[[ -f x && $a == b ]]"])
def test_plain_expansions_are_not_problems(text: str) -> None:
    assert parse(text).problems == []


def test_redirections_and_their_targets() -> None:
    script = parse("cat <in 2>/dev/null >out >>log 2>&1; cat <<< s && { ls; } > grouped")
    found = [
        (r.op, r.fd, r.target.value if r.target else r.body, r.writes) for r in script.redirects
    ]
    assert found == [
        ("<", None, "in", False),
        (">", "2", "/dev/null", True),
        (">", None, "out", True),
        (">>", None, "log", True),
        (">&", "2", "1", False),
        ("<<<", None, "s", False),
        (">", None, "grouped", True),
    ]


def test_a_grammar_gap_reads_as_incomplete_not_as_a_guess() -> None:
    # tree-sitter-bash misreads a here-string after another redirection: ERROR, so the
    # guard fails closed rather than trusting a wrong tree.
    assert not parse("cat 2>&1 <<< s").complete


def test_assignments_declarations_and_loop_variables_are_commands() -> None:
    script = parse("A=1 B=$x ls; C=2; export D=3; for e in 1; do :; done")
    kinds = [(c.kind, [n for n, _ in c.assignments], c.argv) for c in script.commands]
    assert kinds == [
        ("command", ["A", "B"], ["ls"]),
        ("assignment", ["C"], []),
        ("declaration", ["D"], ["export"]),
        ("assignment", ["e"], []),
        ("command", [], [":"]),
    ]


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("rm >out -rf build", ["rm", "-rf", "build"]),
        ("rm 2>/dev/null -r -f build", ["rm", "-r", "-f", "build"]),
        ("rm <in --recursive --force build", ["rm", "--recursive", "--force", "build"]),
        ("git >out reset --hard", ["git", "reset", "--hard"]),
        ("git reset >out --hard", ["git", "reset", "--hard"]),
        ("git push origin >out +main", ["git", "push", "origin", "+main"]),
        ("rm >a -r 2>b -f x", ["rm", "-r", "-f", "x"]),
        ("cat <<EOF >out -n\nx\nEOF\n", ["cat", "-n"]),
        ("rm -rf 3>&- d", ["rm", "-rf", "d"]),
        ("cat <&- f", ["cat", "f"]),
    ],
)
def test_words_after_a_redirection_target_are_arguments(command: str, argv: list[str]) -> None:
    # tree-sitter hangs them on the redirection as more targets; bash runs them.
    script = parse(command)
    assert [c.argv for c in script.commands] == [argv]
    assert script.problems == []


def test_words_after_a_compound_commands_redirection_are_a_problem() -> None:
    assert parse("{ rm; } >out -rf d").problems


@pytest.mark.parametrize("char", ["\v", "\f", "\r", "\x00", "\x1b", "\x85", "\u2028"])
def test_control_characters_are_problems(char: str) -> None:
    # bash does not split git\vstatus; tree-sitter reads two words.
    assert parse(f"git{char}status").problems


def test_a_word_the_grammar_reads_across_a_newline_is_a_problem() -> None:
    assert parse("true\n\\rm -rf d").problems


@pytest.mark.parametrize(
    ("command", "secrets"),
    [
        ("echo $ANTHROPIC_API_KEY $HOME $1 $? ${#PATH} $LC_ALL", ["ANTHROPIC_API_KEY"]),
        ("case $KEY in a*) echo;; esac", ["KEY"]),
        ("[[ $KEY == sk-* ]]", ["KEY"]),
        ("cat <<< $KEY", ["KEY"]),
        ("cat <<EOF\n$KEY\nEOF\n", ["KEY"]),
        ("cat <<'EOF'\n$KEY\nEOF\n", []),
        ("echo '$KEY'", []),
        ("for f in a b; do echo $f; done", []),
        ("for f in a; do :; done; echo $f", ["f"]),
        ("while read -r line; do echo $line; done < f", []),
        ("while read -p P l; do echo $P; done", ["P"]),
        ("X=1; echo $X", []),
        ("X=1 echo $X", ["X"]),
        ("export X=1; echo $X", []),
        ("declare -n X=KEY; echo $X", ["X"]),
        ("f() { local X=1; }; echo $X", ["X"]),
        ("(X=1); echo $X", ["X"]),
        ("X=1; declare -n X; echo $X", ["X"]),
        ("echo $_SECRET", ["_SECRET"]),
    ],
)
def test_expansions_that_may_read_a_secret(command: str, secrets: list[str]) -> None:
    assert parse(command).secrets == secrets


@pytest.mark.parametrize(
    "command",
    [
        "echo " + "$(" * 5000 + ")" * 5000,
        "(" * 8000 + "ls" + ")" * 8000,
        "[[ " + "( " * 5000 + "a" + " )" * 5000 + " ]]",
    ],
)
def test_nesting_thousands_deep_is_incomplete_not_a_crash(command: str) -> None:
    assert not parse(command).complete


@pytest.mark.parametrize("command", ["rm 0<f -rf d", "cat 0<f", "echo {fd}>o x"])
def test_a_descriptor_the_grammar_reads_as_a_word_is_a_problem(command: str) -> None:
    # bash opens f on fd 0 (or allocates {fd}); tree-sitter passes 0 as an argument.
    assert parse(command).problems
