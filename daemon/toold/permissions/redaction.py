"""Secrets out of what toold writes down: the audit log, job records and logs, spill files.

Two layers. detect-secrets' regex plugins (AWS, GitHub, GitLab, Slack, Stripe, JWT,
OpenAI, npm, PyPI, SendGrid, Twilio, private keys, ...) are a maintained catalogue of
token shapes (detectors.py runs them); they are imported on first need (about 0.15 s)
and run only on strings a cheap prefilter lets through. toold's own rules add what a
shape cannot show: values after secret-looking names (``DB_PASS=``, ``"apiKey": ...``,
``export TOKEN=``), Authorization headers of any scheme, URL userinfo,
``--password``-style arguments, ``-pX`` for mysql-like programs, ``curl -u user:pass``,
whole private-key blocks, and token prefixes the catalogue lacks (``github_pat_``,
``AIza``, ``hf_``, ``sk-ant-``...). Flags are found at any word boundary and in any
quoting (``"--token" "x"``, ``["--password", "x"]``, ``\\"--secret=x\\"``). The values
of the daemon's own secret variables (ANTHROPIC_API_KEY...) are redacted wherever they
appear literally. StreamRedactor does the same for text written in pieces (a job's log,
a spill file).

Left readable on purpose: names that only resemble secrets (``max_tokens``,
``keyboard``), file paths, 40-hex git hashes and UUIDs (no entropy detector runs: it
cannot tell a hash from a key, and hashes are what logs are for).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from typing import Any

from toold.permissions.detectors import detected

REDACTED = "[REDACTED]"

# Words of a name (camelCase, -, _ and . split) that make its value a secret;
# "max_tokens", "keyboard", "passenger" stay readable.
_SECRET_WORDS = frozenset(
    {"key", "apikey", "token", "secret", "secrets", "pass", "passwd", "password", "pwd"}
    | {"passphrase", "credential", "credentials", "auth", "authorization", "cookie"}
    | {"sessionid", "privatekey", "accesskey", "secretkey", "apitoken", "authtoken", "dsn"}
    | {"sig", "signature"}
)
_SECRET_SUFFIXES = ("password", "passwd", "secret", "token", "apikey", "privatekey")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NON_WORD = re.compile(r"[^A-Za-z0-9]+")

# A quoted value (also with escaped quotes, as inside a shell string), else a bare word.
_VALUE = (
    r"""(?:\\"(?:[^"\\\n]|\\[^"])*\\"|\\'[^'\n]*?\\'"""
    r"""|"(?:[^"\\\n]|\\.)*"|'[^'\n]*'|[^\s"',;&|)}\]]+)"""
)
# NAME=value, NAME: value, "NAME": "value", export NAME=value, --name=value. The value
# is only looked at (a lookahead): a name that is no secret consumes nothing after its
# separator, so "url=https://x?token=..." still reaches the token. A name starts where
# a word or a flag (--name=) does: not again at each of its characters.
_ASSIGNMENT = re.compile(
    r"""(?:(?<![\w.-])|(?<=(?<![\w.-])-)|(?<=(?<![\w.-])--))"""
    r"""(?P<name>[A-Za-z0-9_.][A-Za-z0-9_.-]{0,127})(?P<q>\\?["']?)(?P<sep>\s*[:=]\s*)(?!//)(?=(?P<value>"""
    + _VALUE
    + "))"
)
_PRIVATE_KEY = re.compile(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY"
    r"( BLOCK)?-----|\Z)",
    re.DOTALL,
)
_AUTH_HEADER = re.compile(
    r"(?i)\b(?P<head>(?:proxy-)?authorization\s*[:=]\s*[\"']?(?:[A-Za-z-]+\s+)?)"
    r"(?P<value>[^\s\"',]+)"
)
_SCHEME_CREDENTIALS = re.compile(
    r"(?i)\b(?P<head>(?:bearer|basic|token|digest)\s+)"
    r"(?P<value>[A-Za-z0-9._~+/=-]{8,})"
)
_USERINFO = re.compile(
    r"(?i)\b(?P<head>[a-z][a-z0-9+.-]{0,63}://[^\s/:@\"']*:)(?P<value>[^\s/@\"']+)(?=@)"
)
_TOKEN_USERINFO = re.compile(
    r"(?i)\b(?P<head>[a-z][a-z0-9+.-]{0,63}://)(?P<value>[^\s/:@\"']{16,})(?=@)"
)
# Where a command-line argument can start: a shell word's boundary, or a list item
# (``["--password", "x"]`` in a script). An argument may sit inside quotes, escaped
# ones too (a command in a JSON string).
_ARG_START = r"""(?:^|(?<=[\s;&|(){}\[\],`'"]))(?:\\?["'])?"""
_ARG_END = r"""(?:\\?["'])?"""
# A shell word: bare characters, quoted parts and escapes glued together, so
# ``--password ab"cd ef"`` loses all of ``abcd ef``; the branches start on different
# characters, so the match never backtracks across them.
_WORD = (
    r"""(?:\\"(?:[^"\\\n]|\\[^"])*\\"|\\'[^'\n]*?\\'|"(?:[^"\\\n]|\\.)*"|'[^'\n]*'"""
    r"""|[^\s"'`;|&()<>\\]+|\\.)+"""
)
_FLAG_NAME = (
    r"(?:password|passwd|pass|pwd|passphrase|passin|passout|token|secret|api[-_]?key"
    r"|access[-_]?key|secret[-_]?key|private[-_]?key|client[-_]?secret|credentials?"
    r"|(?:src|dest|new)?(?:store|key)pass)"
)
# --password X, --password=X, "--db-password" "X", -storepass X (keytool); the
# prefix is bounded, so a long run of name characters is not rescanned from each start.
_FLAG = re.compile(
    r"(?i)(?P<head>"
    + _ARG_START
    + r"--?(?:[a-z0-9_-]{0,64}[-_])?"
    + _FLAG_NAME
    + r"(?:=|"
    + _ARG_END
    + r"(?:\s*,\s*|\s+)))(?P<value>"
    + _WORD
    + ")"
)
# One item of an argument list that makes the next item a secret.
_BARE_FLAG = re.compile(r"(?i)--?(?:[a-z0-9_-]{0,64}[-_])?" + _FLAG_NAME)
_USER_FLAG = re.compile(
    r"(?P<head>"
    + _ARG_START
    + r"(?:-u|--user)(?:=|"
    + _ARG_END
    + r"""(?:\s*,\s*|\s*))\\?["']?[^\s:"'\\]+:)(?P<value>[^\s"'\\]+)"""
)
_MYSQL_LIKE = re.compile(r"(?i)\b(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump|mysqlsh)\b")
_ATTACHED_P = re.compile(r"(?P<head>" + _ARG_START + r"-p)(?P<value>" + _WORD + ")")
_NEXT_ARG_PROGRAMS = re.compile(
    r"(?P<head>\b(?:sshpass\s+-p|redis-cli\b[^\n|;&]*?\s-a|docker\s+login\b[^\n|;&]*?\s-p"
    r"|(?:machine|login)\s+\S+\s+(?:login\s+\S+\s+)?password|smbclient\b[^\n|;&]*?\s-U\s*"
    r"[^\s%]+%)\s*)(?P<value>[^\s\"']+|\"[^\"]*\"|'[^']*')"
)
# Distinctive prefixes match anywhere (a secret glued to other text); short generic
# ones (sk-, hf_, npm_) only at a word start, so "task-runner-config" stays.
_TOKEN_SHAPES = re.compile(
    r"(?:github_pat_[A-Za-z0-9_]{20,}|AIza[0-9A-Za-z_-]{30,}|sk-(?:ant|proj)-[A-Za-z0-9_-]{12,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}|glpat-[A-Za-z0-9_-]{16,}|ya29\.[A-Za-z0-9_-]{20,}"
    r"|(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}"
    r"|https://hooks\.slack\.com/services/[A-Za-z0-9/]+"
    r"|https://discord(?:app)?\.com/api/webhooks/[0-9]+/[A-Za-z0-9_-]+)"
    r"|\b(?:gh[pousr]_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{16,}|hf_[A-Za-z0-9]{20,}"
    r"|shp(?:at|ss|ca|pa)_[a-fA-F0-9]{20,}|dop_v1_[a-f0-9]{40,}|npm_[A-Za-z0-9]{30,}"
    r"|pypi-[A-Za-z0-9_-]{30,}|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)"
)
# One of these is in every match of _TOKEN_SHAPES.
_SHAPE_LITERALS = (
    "github_pat_", "AIza", "sk-", "xox", "glpat-", "ya29.", "AKIA", "ASIA", "ABIA", "ACCA",
    "_live_", "_test_", "hooks.slack.com", "discord", "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
    "hf_", "shp", "dop_v1_", "npm_", "pypi-", "SG.", "eyJ",
)  # fmt: skip
_DIGIT = re.compile(r"\d")
# Every string any rule or plugin could match contains one of these (lower-cased), or a
# run of 16+ token characters: anything else is returned as it is, at once.
_HINTS = (
    "key", "token", "secret", "pass", "pwd", "auth", "cred", "cookie", "session", "bearer",
    "basic", "private", "://", "-p", "-u", "--user", "-a", "dsn", "sk-", "_live_", "_test_",
    "xox", "eyj", "aiza", "akia", "asia", "hf_", "ya29", "sg.", "%",
)  # fmt: skip
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_+/=.-]{16,}")
# What each rule needs to match at all (lower-cased): every secret name (is_secret_name)
# and flag (_FLAG_NAME) holds one of _NAME_HINTS.
_NAME_HINTS = (
    "key", "token", "secret", "pass", "pwd", "cred", "auth", "cookie", "session", "dsn", "sig",
)  # fmt: skip
_HEADED_RULES = (
    (_AUTH_HEADER, ("authorization",)),
    (_SCHEME_CREDENTIALS, ("bearer", "basic", "token", "digest")),
    (_USERINFO, ("://",)),
    (_TOKEN_USERINFO, ("://",)),
)
_NEXT_ARG_HINTS = ("sshpass", "redis-cli", "docker", "password", "smbclient")


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether a value named ``name`` is a secret (DB_PASS, apiKey, X-Auth-Token, ...)."""
    words = _NON_WORD.sub("_", _CAMEL.sub("_", name)).lower().split("_")
    return any(w in _SECRET_WORDS or w.endswith(_SECRET_SUFFIXES) for w in words if w)


def is_secret_variable(name: str, value: str) -> bool:
    """Whether an environment variable holds a secret: a secret's name (ANTHROPIC_API_KEY,
    GITHUB_TOKEN, DB_PASSWORD...) and a value that is not a path (SSH_AUTH_SOCK names a
    socket, which ssh and git need)."""
    return is_secret_name(name) and not value.startswith(("/", "~"))


def redact(value: Any, key: str = "", text: Callable[[str], str] | None = None) -> Any:
    """A copy of ``value`` with values under secret names and secrets in strings replaced
    (each string by ``text``: redact_text, or the audit's excerpt of a long one)."""
    shown = redact_text if text is None else text
    if key and is_secret_name(key):
        return REDACTED
    if isinstance(value, dict):
        return {k: redact(v, str(k), shown) for k, v in value.items()}
    if isinstance(value, list):
        return _redact_list(value, shown)
    if isinstance(value, str):
        return shown(value)
    return value


def _redact_list(items: list[Any], text: Callable[[str], str]) -> list[Any]:
    """An argument list (``["mysql", "-u", "root", "--password", "x"]``) item by item,
    with the item after a secret flag, ``-u user:pass`` and mysql's ``-pX`` redacted."""
    mysql = any(isinstance(v, str) and _MYSQL_LIKE.search(v) for v in items)
    shown: list[Any] = []
    after = ""
    for item in items:
        if not isinstance(item, str):
            shown.append(redact(item, text=text))
        elif _BARE_FLAG.fullmatch(after):
            shown.append(REDACTED)
        elif after in ("-u", "--user") and ":" in item:
            user, _, password = item.partition(":")
            shown.append(item if password.isdigit() else f"{user}:{REDACTED}")
        elif mysql and item.startswith("-p") and len(item) > 2:
            shown.append("-p" + REDACTED)
        else:
            shown.append(text(item))
        after = item if isinstance(item, str) else ""
    return shown


def redact_text(text: str) -> str:
    """``text`` with every secret it holds replaced by [REDACTED]."""
    for secret in _environment_secrets():
        if secret in text:
            text = text.replace(secret, REDACTED)
    low = text.lower()
    # The one regex first: where a token run exists (most code, any base64) the 30
    # substring scans for a hint would decide nothing.
    if not _TOKEN_RUN.search(text) and not any(hint in low for hint in _HINTS):
        return text
    # Each rule runs only where the words it needs occur (a job's log is mostly without).
    named = any(word in low for word in _NAME_HINTS)
    if "private key" in low:
        text = _PRIVATE_KEY.sub(REDACTED, text)
    for pattern, needs in _HEADED_RULES:
        if any(word in low for word in needs):
            text = pattern.sub(_keep_head, text)
    if named:
        text = _FLAG.sub(_keep_head, text)
    if "-u" in low:
        text = _USER_FLAG.sub(_user_password, text)
    if any(word in low for word in _NEXT_ARG_HINTS):
        text = _NEXT_ARG_PROGRAMS.sub(_keep_head, text)
    if _MYSQL_LIKE.search(text):
        text = _ATTACHED_P.sub(_keep_head, text)
    if named:
        text = _redact_assignments(text)
    if any(literal in text for literal in _SHAPE_LITERALS):
        text = _TOKEN_SHAPES.sub(REDACTED, text)
    if any(_DIGIT.search(run.group()) for run in _TOKEN_RUN.finditer(text)):
        # The catalogue's shapes are long random runs; a random run of 16+ characters
        # without a digit is rare, and paths and words (no digit) skip ~25 plugins.
        for start, end in reversed(detected(text, REDACTED)):
            text = text[:start] + REDACTED + text[end:]
    return text


@functools.cache
def _environment_secrets() -> tuple[str, ...]:
    """Values of this process's secret variables (ANTHROPIC_API_KEY, GITHUB_TOKEN...),
    longest first: each is redacted wherever it appears literally, whatever its shape.
    Paths (SSH_AUTH_SOCK) and short values (``1``, ``true``) are not secrets."""
    values = {
        value
        for name, value in os.environ.items()
        if is_secret_name(name) and len(value) >= _ENV_MIN and not value.startswith(("/", "~"))
    }
    return tuple(sorted(values, key=len, reverse=True))


_ENV_MIN = 8


def reload_environment() -> None:
    """Read the secret variables again (after the process's environment changed)."""
    _environment_secrets.cache_clear()


_KEY_BEGIN = re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----")
_KEY_END = re.compile(r"-----END[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----")


class StreamRedactor:
    """Redacts text that arrives in pieces (a job's log, a spill file), whole lines at a
    time: a secret split across two writes is redacted once its line is complete, and
    the lines of a private key stay redacted until its END line (64 KiB at most).

    A line longer than ``limit`` without a newline goes out in pieces, cut after a blank
    (secrets hold none) at least 512 characters before its end, so memory stays bounded.
    """

    def __init__(self, limit: int = 65536) -> None:
        self._limit = limit
        self._pending = ""
        self._in_key = False
        self._key_chars = 0

    def feed(self, text: str) -> str:
        """The redacted text of the complete lines that ``text`` ends (maybe "")."""
        text = self._pending + text
        cut = text.rfind("\n") + 1
        if cut == 0 and len(text) > self._limit:
            # The last _CARRY characters wait: a flag and its value stay together.
            keep = len(text) - _CARRY
            cut = max(text.rfind(" ", 0, keep), text.rfind("\t", 0, keep)) + 1 or keep
        done, self._pending = text[:cut], text[cut:]
        return self._redacted(done) if done else ""

    def flush(self) -> str:
        """The redacted rest (the last line, which had no newline)."""
        rest, self._pending = self._pending, ""
        return self._redacted(rest) if rest else ""

    def _redacted(self, block: str) -> str:
        if self._in_key:  # the BEGIN line's [REDACTED] stands for the whole key
            end = _KEY_END.search(block)
            self._key_chars += len(block) if end is None else end.end()
            if end is None and self._key_chars <= _MAX_KEY_CHARS:
                return ""
            # After its END; or 64 KiB without one: no key after all, lines show again.
            block = "" if end is None else block[end.end() :]
            self._in_key = False
        begins = list(_KEY_BEGIN.finditer(block))
        self._in_key = bool(begins) and _KEY_END.search(block, begins[-1].end()) is None
        self._key_chars = 0
        return redact_text(block)


_MAX_KEY_CHARS = 65536
_CARRY = 512


def _done(found: re.Match[str]) -> bool:
    """Whether the value found is (or starts with) an earlier rule's [REDACTED]."""
    return found.string.startswith(REDACTED, found.start("value"))


def _keep_head(found: re.Match[str]) -> str:
    return found.group(0) if _done(found) else found.group("head") + REDACTED


def _user_password(found: re.Match[str]) -> str:
    """``-u user:password`` (curl, wget); ``-u 1000:1000`` (a uid:gid) stays."""
    return found.group(0) if found.group("value").isdigit() else _keep_head(found)


def _redact_assignments(text: str) -> str:
    parts: list[str] = []
    position = 0
    for found in _ASSIGNMENT.finditer(text):
        if found.start() < position or not _secret_value(found):
            continue
        start, end = found.span("value")
        value = found.group("value")
        quote = next((m for m in _QUOTES if _quoted(value, m)), "")
        parts += [text[position:start], f"{quote}{REDACTED}{quote}"]
        position = end
    parts.append(text[position:])
    return "".join(parts)


_QUOTES = ('\\"', "\\'", '"', "'")


def _quoted(value: str, mark: str) -> bool:
    return len(value) >= 2 * len(mark) and value.startswith(mark) and value.endswith(mark)


def _secret_value(found: re.Match[str]) -> bool:
    """Whether the assignment found names a secret whose value is not redacted yet."""
    value = found.group("value")
    if not is_secret_name(found.group("name")) or _done(found) or not value.strip("\"'\\"):
        return False
    # "Authorization: Basic [REDACTED]": the scheme stays, its credentials are redacted.
    return not found.string.startswith(" " + REDACTED, found.end("value"))
