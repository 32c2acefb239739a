"""detect-secrets' plugins run as span finders, for redaction.py's ``redact_text``.

``detected`` runs the catalogue (imported on first need, about 0.15 s) and returns the
spans it finds, joined. Plugins that cannot tell a secret from a hash or an address are
skipped; the slow ones that match only after a keyword (``password=``...) run only on
windows around the keywords they could match, and a few others only where the text holds
what their patterns need. A span holding the caller's mark (a secret already replaced)
is never found again.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections.abc import Callable, Iterator
from typing import Any

# detect-secrets' plugins that cannot tell a secret from a hash or an address.
_SKIPPED_PLUGINS = frozenset({"Base64 High Entropy String", "Hex High Entropy String"})
_SKIPPED_PLUGINS |= {"Public IP (ipv4)"}


Finder = Callable[[str, str], Iterator[tuple[int, int]]]
"""Spans a plugin finds in a text, none holding the mark (the second argument)."""
# Plugins that match only after a keyword (password=, cloudant_key:, ...): the slow ones
# (the keyword detector alone took 100 ms of 64 KiB of log lines), run only on windows
# around the keywords they could match (_keyword_windows).
_KEYWORD_PLUGINS = frozenset({"Secret Keyword", "Cloudant Credentials", "IBM Cloud IAM Key"})
_KEYWORD_PLUGINS |= {"IBM COS HMAC Credentials", "SoftLayer Credentials"}
_KEYWORDS = ("key", "pw", "pass", "token", "secret", "contrase", "://")
# A keyword where those plugins could match: followed on its line, after its name, by
# what their patterns need next (an assignment, a call, a quote or a blank: ``key =``,
# ``password: "``, ``"pwd", "x"``, ``cloudant_key  x``), or after ``==`` / ``!=`` (``"x"
# == password``), or a URL's ``://``. A keyword inside base64 or a word is none of these.
_KEYWORD = re.compile(
    r"(?i)(?:key|pw|pass|token|secret|contrase)\w{0,64}[^\n]{0,56}?[ \t:=(\"'`]"
    r"|=[ \t]*\w{0,64}?(?:key|pw|pass|token|secret|contrase)|://"
)
# What the slowest of the other plugins need to match at all (their patterns are
# case-sensitive): without it, their scan is skipped.
_PLUGIN_NEEDS = {
    "Mailchimp Access Key": ("-us",),
    "Artifactory Credentials": ("AKC", "AP"),
    "Telegram Bot Token": (":",),
}


def detected(text: str, redacted: str) -> list[tuple[int, int]]:
    """Spans of ``text`` that detect-secrets' plugins find, overlapping ones joined, in
    order; none holds ``redacted`` (the mark of a secret already replaced)."""
    return _merged(_detected(text, redacted))


def _merged(spans: Iterator[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping spans joined, in order."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _detected(text: str, redacted: str) -> Iterator[tuple[int, int]]:
    """Spans detect-secrets' plugins find in ``text`` (not already redacted)."""
    shapes, keyworded = _plugins()
    for finder in shapes:
        yield from finder(text, redacted)
    windows = _keyword_windows(text)
    if not windows:
        return
    # The windows joined, each after a newline as in ``text``; spans are mapped back.
    joined = "\n".join(text[start:end] for start, end in windows)
    starts = list(itertools.accumulate((end - start + 1 for start, end in windows), initial=0))

    def where(offset: int) -> int:
        index = bisect.bisect_right(starts, offset) - 1
        return windows[index][0] + offset - starts[index]

    for finder in keyworded:
        for start, end in finder(joined, redacted):
            yield where(start), where(end - 1) + 1


# How far from a keyword the keyword plugins look: a name's prefix (``cloudant_``) or a
# value compared before it (``"x" == password``), and the value after it. Their patterns
# run to the end of the line from every keyword (on a 100 KiB line of base64 or minified
# code, 100 ms and more); bounded windows keep the cost linear. A longer value under a
# secret name is still redacted whole by toold's own rule (redaction.py's _ASSIGNMENT).
_BEFORE = 256
_AFTER = 1024


def _keyword_windows(text: str) -> list[tuple[int, int]]:
    """Spans of ``text`` around the keywords its plugins could match, within their lines
    (_BEFORE characters before each, _AFTER after), overlapping ones joined: together
    never longer than the text, and only as long as it where keywords are dense."""
    windows: list[tuple[int, int]] = []
    low = text.lower()
    if not any(word in low for word in _KEYWORDS):
        return windows
    for found in _KEYWORD.finditer(text):
        at = found.start()
        start = text.rfind("\n", max(0, at - _BEFORE), at) + 1 or max(0, at - _BEFORE)
        newline = text.find("\n", at, at + _AFTER)
        end = min(len(text), at + _AFTER) if newline < 0 else newline
        if windows and start <= windows[-1][1]:
            windows[-1] = (windows[-1][0], max(end, windows[-1][1]))
        else:
            windows.append((start, end))
    return windows


@functools.cache
def _plugins() -> tuple[tuple[Finder, ...], tuple[Finder, ...]]:
    """detect-secrets' plugins: those that match a token's shape, those after a keyword."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector

    shapes: list[Finder] = []
    keyworded: list[Finder] = []
    plugins: dict[str, Any] = dict(get_mapping_from_secret_type_to_class())
    for secret_type, plugin in plugins.items():
        if secret_type in _SKIPPED_PLUGINS:
            continue
        instance = plugin()
        kind = keyworded if secret_type in _KEYWORD_PLUGINS else shapes
        finder: Finder
        if isinstance(instance, RegexBasedDetector):
            finder = functools.partial(_regex_spans, tuple(instance.denylist))
        else:
            finder = functools.partial(_value_spans, instance.analyze_string)
        if secret_type in _PLUGIN_NEEDS:
            finder = functools.partial(_gated, _PLUGIN_NEEDS[secret_type], finder)
        kind.append(finder)
    return tuple(shapes), tuple(keyworded)


def _gated(
    needs: tuple[str, ...], finder: Finder, text: str, redacted: str
) -> Iterator[tuple[int, int]]:
    if any(need in text for need in needs):
        yield from finder(text, redacted)


def _regex_spans(
    patterns: tuple[re.Pattern[str], ...], text: str, redacted: str
) -> Iterator[tuple[int, int]]:
    for pattern in patterns:
        for found in pattern.finditer(text):
            # The last group when it is the secret itself (basic auth's password), else all.
            group = found.lastindex or 0
            if group and len(found.group(group) or "") < 8:
                group = 0
            start, end = found.span(group)
            if redacted not in text[start:end]:
                yield start, end


def _value_spans(
    analyze: Callable[[str], Iterator[str]], text: str, redacted: str
) -> Iterator[tuple[int, int]]:
    for value in set(analyze(text)):
        if len(value) >= 4 and redacted not in value:
            start = text.find(value)
            while start != -1:
                yield start, start + len(value)
                start = text.find(value, start + len(value))
