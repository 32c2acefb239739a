"""Shell parsing for the guard: a command line as the simple commands bash will run.

The parser is tree-sitter with the tree-sitter-bash grammar (the approach Codex CLI
takes). It is error-tolerant and marks what it could not parse with ERROR and MISSING
nodes, so "the parse is incomplete" is a fact the guard can act on (it fails closed)
instead of a guess; bashlex raises on much of real bash and says less about why.

Every ``command`` node anywhere in the tree is a simple command — inside pipelines,
lists, subshells, functions, loops, ``$( )``, backticks, ``<( )`` and heredoc bodies —
so nothing hides from the classifier by nesting. A word's static value is computed
only where bash would give it one without running anything: plain words, quotes,
escapes. Expansions, substitutions, ``$'..'`` and brace expansion have no static
value (None), nor has an unquoted glob (it expands to file names, and a file named
``-o`` becomes an option); arithmetic evaluation and ``${..}`` operators (which can run code
through array subscripts or ``@P``) are recorded as problems.

Where the grammar and bash may disagree, the parse says so. tree-sitter reads the words
after a redirection's target (``rm >out -rf d``) as more targets: they are the command's
arguments, as bash runs them, wherever the redirection stands. It splits words on
vertical tabs and form feeds, which bash does not: a control character other than tab
and newline is a problem. Every expansion of a variable is recorded (``Script.secrets``
names those that may read the daemon's environment, such as an API key).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

_PLAIN_EXPANSION = re.compile(r"^\$\{#?(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])\}$")
_ESCAPE_IN_DOUBLE = re.compile(r"\\([$`\"\\\n])")
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_JOINED_LINES = re.compile(r"(?<![\s\\])\\\n(?=\S)")
_UNQUOTED_GLOB = re.compile(r"(?<!\\)[*?\[]")
_ARITHMETIC_TESTS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-v"})
_ARITHMETIC = frozenset({"arithmetic_expansion", "c_style_for_statement", "subscript"})
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff]")
_EXPANDED_NAME = re.compile(r"^\$\{?[#!]?([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!_-])")
HARMLESS_VARIABLES = frozenset(
    {"HOME", "PWD", "OLDPWD", "USER", "LOGNAME", "SHELL", "PATH", "TERM", "LANG", "LANGUAGE"}
    | {"TMPDIR", "HOSTNAME", "IFS", "RANDOM", "LINENO", "SECONDS", "BASHPID", "PPID", "UID"}
    | {"EUID", "BASH_VERSION", "COLUMNS", "LINES", "TZ", "VIRTUAL_ENV", "OSTYPE", "HOSTTYPE"}
    | {"CI", "GOPATH", "GOROOT", "JAVA_HOME", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "NODE_ENV"}
)
"""Variables that hold no secret (``LC_*``, positional and special parameters too)."""
_CLOSES = frozenset({">&-", "<&-"})
_DESCRIPTOR_WORD = re.compile(r"^(?:[0-9]+|\{[A-Za-z_][A-Za-z0-9_]*\})$")
_ESCAPED = re.compile(r"\\.", re.DOTALL)
_BARE_SPACE = re.compile(r"\s")
MAX_DEPTH = 300
"""How deep the syntax tree may nest (``$( $( ... ) )``, subshells) before it is not judged."""
_REDIRECTS = ("file_redirect", "herestring_redirect", "heredoc_redirect")
_SCOPES = frozenset({"program", "list", "compound_statement", "redirected_statement"})


@dataclass(frozen=True)
class Word:
    """One word as written and its static value (None when bash computes it at run time)."""

    text: str
    value: str | None


@dataclass(frozen=True)
class Redirect:
    """A redirection: its operator, file descriptor, target and (heredoc/here-string) body."""

    op: str
    fd: str | None
    target: Word | None
    body: str | None = None

    @property
    def writes(self) -> bool:
        """Whether it opens a file for writing (fd duplications such as 2>&1 do not)."""
        if self.op in ("<", "<<", "<<-", "<<<", "<&", "<&-", ">&-"):
            return False
        if self.op in (">&", "<&") and self.target is not None:
            return not (self.target.value or "").rstrip("-").isdigit()
        return True


@dataclass
class SimpleCommand:
    """A simple command: assignments, then words (the program first), then redirections."""

    text: str
    words: list[Word] = field(default_factory=list)
    assignments: list[tuple[str, Word]] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    kind: Literal["command", "declaration", "assignment", "test"] = "command"

    @property
    def argv(self) -> list[str | None]:
        """The static value of each word (None where it cannot be known)."""
        return [w.value for w in self.words]


@dataclass
class Script:
    """A parsed command line."""

    text: str
    commands: list[SimpleCommand] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    complete: bool = True
    """False when the parser found ERROR or MISSING nodes (a syntax error)."""
    problems: list[str] = field(default_factory=list)
    """Constructs whose effect cannot be known without running them."""
    loops: list[tuple[str, list[Word]]] = field(default_factory=list)
    """Each ``for NAME in WORDS`` loop: the variable and the words it takes."""
    secrets: list[str] = field(default_factory=list)
    """Variables expanded that are neither harmless nor set by the command before (``$KEY``)."""


@cache
def _parser() -> Parser:
    # Imported on first use: the daemon's start must not pay for the grammar.
    import tree_sitter_bash
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_bash.language()))


def parse(text: str) -> Script:
    """The command line as simple commands, redirections and problems."""
    script = Script(text)
    tree = _parser().parse(text.encode("utf-8", "surrogatepass"))
    try:
        _walk(tree.root_node, script)
    except RecursionError:  # a [[ ]] test nested thousands deep: judged, never guessed
        return Script(text, complete=False, problems=[f"nesting deeper than {MAX_DEPTH}"])
    if _JOINED_LINES.search(text):
        # bash joins g\<newline>it into git; the grammar reads two words.
        script.problems.append("a line continuation inside a word")
    control = _CONTROL.search(text)
    if control:
        # tree-sitter splits words on \v and \f; bash does not (git\vstatus is one word).
        script.problems.append(f"a control character ({ord(control.group()):#04x})")
    script.secrets = _secrets(tree.root_node)
    return script


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogatepass")


def _unescape(match: re.Match[str]) -> str:
    return "" if match.group(1) == "\n" else match.group(1)


def word_value(node: Node) -> str | None:
    """The static value of a word-like node, or None when bash computes it."""
    kind, text = node.type, _text(node)
    if kind == "word":
        if _UNQUOTED_GLOB.search(text):
            return None  # expands to file names, which may even look like options
        return _ESCAPE.sub(_unescape, text)
    if kind in ("number", "variable_name", "file_descriptor", "heredoc_start", "test_operator"):
        return text
    if kind == "raw_string":
        return text[1:-1]
    if kind == "string":
        parts = []
        for child in node.named_children:
            if child.type != "string_content":
                return None
            parts.append(_ESCAPE_IN_DOUBLE.sub(_unescape, _text(child)))
        return "".join(parts)
    if kind == "concatenation":
        values = [word_value(c) for c in node.children]
        if any(v is None for v in values) or _is_brace_expansion(node):
            return None
        return "".join(v for v in values if v is not None)
    return None


def _is_brace_expansion(node: Node) -> bool:
    words = [(c.type, _text(c)) for c in node.children]
    opened = False
    for kind, text in words:
        if kind == "word" and text == "{":
            opened = True
        elif opened and ("," in text or ".." in text):
            return True
    return False


def _word(node: Node) -> Word:
    return Word(_text(node), word_value(node))


def _redirect(node: Node) -> Redirect:
    fd = next((_text(c) for c in node.children if c.type == "file_descriptor"), None)
    op = next((_text(c) for c in node.children if not c.is_named), "")
    if node.type == "herestring_redirect":
        body = node.named_children[-1] if node.named_children else None
        return Redirect("<<<", fd, None, None if body is None else _text(body))
    if node.type == "heredoc_redirect":
        body = next((c for c in node.named_children if c.type == "heredoc_body"), None)
        return Redirect(op or "<<", fd, None, "" if body is None else _text(body))
    target = node.child_by_field_name("destination")
    if op in _CLOSES:
        return Redirect(op, fd, None)
    return Redirect(op, fd, None if target is None else _word(target))


def _redirect_words(node: Node) -> list[Node]:
    """Words the grammar hung on a redirection that bash gives the command as arguments.

    tree-sitter reads ``rm >out -rf d`` as a redirection to ``out -rf d``; bash opens
    ``out`` and runs ``rm -rf d``. A here-document's words (``cat <<EOF -n``) likewise.
    """
    if node.type == "file_redirect":
        # 3>&- closes fd 3 and has no target: tree-sitter takes the next word as one.
        closes = any(_text(c) in _CLOSES for c in node.children if not c.is_named)
        return node.children_by_field_name("destination")[0 if closes else 1 :]
    if node.type == "heredoc_redirect":
        words = list(node.children_by_field_name("argument"))
        for inner in node.children_by_field_name("redirect"):
            words += _redirect_words(inner)
        return words
    return []


def _command(node: Node) -> SimpleCommand:
    cmd = SimpleCommand(_text(node))
    for child in node.children:
        if child.type == "variable_assignment":
            cmd.assignments.append(_assignment(child))
        elif child.type == "command_name":
            cmd.words.append(
                _word(child.named_children[0]) if child.named_children else _word(child)
            )
        elif child.type in _REDIRECTS:
            cmd.redirects.append(_redirect(child))
            cmd.words += [_word(w) for w in _redirect_words(child)]
        elif child.is_named and child.type != "comment":
            cmd.words.append(_word(child))
    return cmd


def _assignment(node: Node) -> tuple[str, Word]:
    name = node.child_by_field_name("name")
    value = node.child_by_field_name("value")
    return (
        "" if name is None else _text(name),
        Word("", "") if value is None else _word(value),
    )


def _declaration(node: Node) -> SimpleCommand:
    cmd = SimpleCommand(_text(node), kind="declaration")
    keyword = node.children[0] if node.children else None
    if keyword is not None:
        cmd.words.append(Word(_text(keyword), _text(keyword)))
    for child in node.named_children:
        if child.type == "variable_assignment":
            cmd.assignments.append(_assignment(child))
        else:
            cmd.words.append(_word(child))
    return cmd


def _redirected(node: Node, script: Script, depth: int) -> None:
    """A statement with redirections: their stray words are its arguments (bash's argv)."""
    extra = [w for c in node.children_by_field_name("redirect") for w in _redirect_words(c)]
    start = len(script.commands)
    for child in node.children:
        _walk(child, script, depth + 1)
    if not extra:
        return
    body = node.child_by_field_name("body")
    if body is not None and body.type == "command" and start < len(script.commands):
        script.commands[start].words += [_word(w) for w in extra]
    else:
        shown = _text(extra[0])[:40]
        script.problems.append(f"words after the redirection of a compound command {shown!r}")


def _walk(node: Node, script: Script, depth: int = 0) -> None:
    kind = node.type
    if depth > MAX_DEPTH:
        # $($($(...))) thousands deep: Python's stack is not the limit of what is judged.
        script.complete = False
        if not any(p.startswith("nesting deeper") for p in script.problems):
            script.problems.append(f"nesting deeper than {MAX_DEPTH}")
        return
    if kind == "redirected_statement":
        _redirected(node, script, depth)
        return
    if node.is_missing or kind == "ERROR":
        script.complete = False
    if kind == "command":
        script.commands.append(_command(node))
    elif kind in ("declaration_command", "unset_command"):
        script.commands.append(_declaration(node))
    elif (
        kind == "variable_assignment"
        and node.parent is not None
        and node.parent.type
        not in (
            "command",
            "declaration_command",
        )
    ):
        script.commands.append(
            SimpleCommand(_text(node), assignments=[_assignment(node)], kind="assignment")
        )
    elif kind in ("for_statement", "select_statement"):
        variable = node.child_by_field_name("variable")
        if variable is not None:
            assigned = (_text(variable), Word("", None))
            items = [_word(c) for c in node.children_by_field_name("value")]
            script.loops.append((_text(variable), items))
            script.commands.append(
                SimpleCommand(_text(node), assignments=[assigned], kind="assignment")
            )
    elif kind == "test_command":
        words = [Word("[[", "[[")] + [_word(c) for c in _leaves(node)]
        if any(w.value in _ARITHMETIC_TESTS for w in words):
            script.problems.append(f"arithmetic evaluation {_text(node)[:40]!r}")
        script.commands.append(SimpleCommand(_text(node), words=words, kind="test"))
    elif kind in _REDIRECTS:
        if _descriptor_read_as_word(node):
            # bash reads 0<f and {fd}>f as redirections; tree-sitter makes 0 an argument.
            script.problems.append(f"a descriptor read as a word before {_text(node)[:40]!r}")
        script.redirects.append(_redirect(node))
        if kind == "heredoc_redirect" and _expanding_heredoc_with_backticks(node):
            # bash runs `...` in an unquoted here-document; the grammar reads it as text.
            script.problems.append("backticks in a here-document")
    elif kind in _ARITHMETIC or (kind == "compound_statement" and _text(node).startswith("((")):
        script.problems.append(f"arithmetic evaluation {_text(node)[:40]!r}")
    elif kind == "expansion" and not _PLAIN_EXPANSION.match(_text(node)):
        script.problems.append(f"parameter expansion {_text(node)[:40]!r}")
    elif kind == "command_substitution" and _text(node).startswith("`") and "\\" in _text(node):
        # Inside backticks bash unescapes \` \$ \\ and parses again: `echo \`rm a\``
        # runs rm. The grammar reads one level only, so this is not known statically.
        script.problems.append(f"backslashes inside backticks {_text(node)[:40]!r}")
    elif kind == "word" and _BARE_SPACE.search(_ESCAPED.sub("", _text(node))):
        # bash never reads unquoted blanks into a word: tree-sitter joined two (true\n\rm).
        script.problems.append(
            f"a word the grammar and bash split differently {_text(node)[:40]!r}"
        )
    elif kind == "ansi_c_string":
        script.problems.append(f"ANSI-C quoting {_text(node)[:40]!r}")
    for child in node.children:
        _walk(child, script, depth + 1)


def _descriptor_read_as_word(redirect: Node) -> bool:
    """Whether the word right before a redirection (no blank between) is an fd to bash."""
    prev = redirect.prev_sibling
    while prev is not None and prev.type in ("command", "redirected_statement") and prev.children:
        prev = prev.children[-1]
    return (
        prev is not None
        and prev.end_byte == redirect.start_byte
        and bool(_DESCRIPTOR_WORD.match(_text(prev)))
    )


def _expanding_heredoc_with_backticks(node: Node) -> bool:
    start = next((_text(c) for c in node.children if c.type == "heredoc_start"), "")
    body = next((_text(c) for c in node.children if c.type == "heredoc_body"), "")
    return not any(q in start for q in "'\"\\") and "`" in body


def _leaves(node: Node) -> list[Node]:
    """The operand and operator words of a ``[[ ]]`` test, in order."""
    out: list[Node] = []
    for child in node.named_children:
        if child.type in ("binary_expression", "unary_expression", "parenthesized_expression"):
            out.extend(_leaves(child))
        else:
            out.append(child)
    return out


def harmless(name: str) -> bool:
    """Whether expanding ``name`` reads no secret: listed, locale, positional or special."""
    special = name.isdigit() or (len(name) == 1 and name in "@*#?$!_-")
    return special or name in HARMLESS_VARIABLES or name.startswith("LC_")


def _secrets(root: Node) -> list[str]:
    """Names expanded that may hold a secret: not harmless, not set by the command first.

    A variable counts as set by the command inside the ``for`` loop that sets it, inside
    a ``while``/``until`` whose condition ``read``s it, and after a plain assignment at
    the top level (not in a subshell, a function or a pipeline, not a prefix).
    A nameref (``declare -n``) can make any name read any variable: then nothing counts.
    """
    expansions: list[tuple[str, int]] = []
    scopes: list[tuple[str, int, int]] = []  # name, from byte, to byte
    namerefs = False
    stack = [root]
    while stack:
        node = stack.pop()
        kind = node.type
        if kind in ("simple_expansion", "expansion"):
            found = _EXPANDED_NAME.match(_text(node))
            expansions.append((found.group(1) if found else "?", node.start_byte))
        elif kind in ("for_statement", "select_statement"):
            variable = node.child_by_field_name("variable")
            body = node.child_by_field_name("body")
            if variable is not None and body is not None:
                scopes.append((_text(variable), body.start_byte, body.end_byte))
        elif kind == "while_statement":
            scopes += _read_scopes(node)
        elif kind == "variable_assignment" and _top_level(node):
            name = node.child_by_field_name("name")
            if name is not None:
                scopes.append((_text(name), node.end_byte, root.end_byte))
        elif kind == "declaration_command":
            namerefs = namerefs or any(
                c.type == "word" and _text(c).startswith("-") and "n" in _text(c)
                for c in node.children
            )
        stack.extend(reversed(node.children))
    ranges: dict[str, list[tuple[int, int]]] = {}
    for scoped, start, end in scopes:
        ranges.setdefault(scoped, []).append((start, end))
    out: list[str] = []
    for expanded, at in expansions:
        if harmless(expanded) or expanded in out:
            continue
        if namerefs or not any(a <= at < b for a, b in ranges.get(expanded, ())):
            out.append(expanded)
    return out


def _read_scopes(loop: Node) -> list[tuple[str, int, int]]:
    condition = loop.child_by_field_name("condition")
    body = loop.child_by_field_name("body")
    if condition is None or body is None or condition.type != "command":
        return []
    words = [_text(c) for c in condition.children if c.type in ("command_name", "word")]
    if words[:1] != ["read"]:
        return []
    names: list[str] = []
    valued = False
    for word in words[1:]:
        if valued:
            valued = False
        elif word.startswith("-"):
            valued = word[-1] in "adinNptu"  # -p PROMPT, -d DELIM...: a value, not a name
        elif word.isidentifier():
            names.append(word)
    return [(name, body.start_byte, body.end_byte) for name in names]


def _top_level(node: Node) -> bool:
    """Whether an assignment runs in the shell itself: not a prefix, subshell or function."""
    parent = node.parent
    if parent is not None and parent.type == "declaration_command":
        parent = parent.parent  # export X=1 sets X as X=1 does (declare -n: see namerefs)
    if parent is None:
        return False
    while parent is not None:
        if parent.type not in _SCOPES:
            return False
        parent = parent.parent
    return True
