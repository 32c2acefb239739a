"""``initialize``'s params as a session reads them: decoded as lsprotocol decodes them,
without loading lsprotocol when the params are plain.

A session reads few fields: ``processId``, ``clientInfo.name``,
``initializationOptions``, the workspace (``workspaceFolders``, ``rootUri``,
``rootPath``) and, of the capabilities, ``window.showMessage`` and ``experimental``.
lsprotocol's types module costs a process about 250 ms of CPU at import (a thousand
attrs classes) and 15 MiB, a fresh engine's largest single cost. So params made only
of keys of the spec, each holding a value of its declared type exactly (``plain``), are
read here with the standard library; lsprotocol's converter would decode them to the
same values (tests/unit/test_initialize_params.py checks it against lsprotocol on
generated params). Anything else (a key outside the spec, a value the converter would
coerce or refuse, an editor's whole ``textDocument`` capabilities) is decoded by
lsprotocol's converter as before: the same values, and the same refusals.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cattrs import Converter

PARAMS = frozenset(
    {
        "processId",
        "clientInfo",
        "locale",
        "rootPath",
        "rootUri",
        "capabilities",
        "initializationOptions",
        "trace",
        "workDoneToken",
        "workspaceFolders",
    }
)
"""InitializeParams' keys (LSP 3.17)."""
TRACE = frozenset({"off", "messages", "verbose"})


@dataclass(frozen=True)
class InitializeParams:
    """The fields of ``initialize``'s params a session uses."""

    capabilities: dict[str, Any]
    """The client's capabilities as sent (decoded: every key of the spec has its type)."""
    process_id: int | None = None
    client_name: str = ""
    initialization_options: Any = None
    first_folder: str | None = None
    """The first workspace folder's URI."""
    root_uri: str | None = None
    root_path: str | None = None


class UndecodableParams(ValueError):
    """The params do not decode as InitializeParams (answered -32602)."""


@functools.cache
def converter() -> Converter:
    """lsprotocol's converter, built once per process (about 30 ms), on first use."""
    from lsprotocol.converters import get_converter

    return get_converter()


def read_initialize(raw: Any) -> InitializeParams:
    """The session's fields of ``raw``; UndecodableParams when lsprotocol refuses it."""
    plain = _plain(raw)
    return plain if plain is not None else _decoded(raw)


def _decoded(raw: Any) -> InitializeParams:
    """Decoded by lsprotocol's converter (what every initialize went through before)."""
    from lsprotocol import types

    try:
        params = converter().structure(raw, types.InitializeParams)
    except Exception as exc:
        raise UndecodableParams(str(exc)) from exc
    folders = params.workspace_folders
    capabilities = raw.get("capabilities")
    return InitializeParams(
        # As sent: the fields read of it (window.showMessage, experimental) decode to
        # the values sent once the converter accepted the whole.
        capabilities=capabilities if isinstance(capabilities, dict) else {},
        process_id=params.process_id,
        client_name=params.client_info.name if params.client_info else "",
        initialization_options=params.initialization_options,
        first_folder=folders[0].uri if folders else None,
        root_uri=params.root_uri,
        root_path=params.root_path,
    )


def _plain(raw: Any) -> InitializeParams | None:
    """``raw`` read without lsprotocol; None unless every key is the spec's and every
    value has its declared type exactly (the converter coerces ``"12"`` to 12, say)."""
    if not isinstance(raw, dict) or not raw.keys() <= PARAMS:
        return None
    capabilities = raw.get("capabilities")
    if not isinstance(capabilities, dict) or not _plain_capabilities(capabilities):
        return None
    process_id, client = raw.get("processId"), raw.get("clientInfo")
    if not (process_id is None or _is_int(process_id)):
        return None
    if client is not None and not _plain_client(client):
        return None
    if not all(_str_or_none(raw.get(key)) for key in ("locale", "rootPath", "rootUri")):
        return None
    trace = raw.get("trace", "off")
    if not (isinstance(trace, str) and trace in TRACE):
        return None
    token = raw.get("workDoneToken")
    if token is not None and not (_is_int(token) or isinstance(token, str)):
        return None
    folders = raw.get("workspaceFolders")
    if folders is not None and not (
        isinstance(folders, list) and all(_plain_folder(f) for f in folders)
    ):
        return None
    return InitializeParams(
        capabilities=capabilities,
        process_id=process_id,
        client_name=client["name"] if client is not None else "",
        initialization_options=raw.get("initializationOptions"),
        first_folder=folders[0]["uri"] if folders else None,
        root_uri=raw.get("rootUri"),
        root_path=raw.get("rootPath"),
    )


def _plain_capabilities(capabilities: dict[str, Any]) -> bool:
    """Only ``window`` (its three keys, exactly typed) and ``experimental`` (any JSON)."""
    if not capabilities.keys() <= {"window", "experimental"}:
        return False
    window = capabilities.get("window")
    if window is None:
        return True
    if not isinstance(window, dict) or not window.keys() <= {
        "workDoneProgress",
        "showMessage",
        "showDocument",
    }:
        return False
    if not _bool_or_none(window.get("workDoneProgress")):
        return False
    show = window.get("showMessage")
    if show is not None:
        if not isinstance(show, dict) or not show.keys() <= {"messageActionItem"}:
            return False
        item = show.get("messageActionItem")
        if item is not None and not (
            isinstance(item, dict)
            and item.keys() <= {"additionalPropertiesSupport"}
            and _bool_or_none(item.get("additionalPropertiesSupport"))
        ):
            return False
    document = window.get("showDocument")
    return document is None or (
        isinstance(document, dict)
        and document.keys() == {"support"}
        and isinstance(document["support"], bool)
    )


def _plain_client(client: Any) -> bool:
    return (
        isinstance(client, dict)
        and "name" in client
        and client.keys() <= {"name", "version"}
        and isinstance(client["name"], str)
        and _str_or_none(client.get("version"))
    )


def _plain_folder(folder: Any) -> bool:
    return (
        isinstance(folder, dict)
        and folder.keys() == {"uri", "name"}
        and isinstance(folder["uri"], str)
        and isinstance(folder["name"], str)
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _str_or_none(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _bool_or_none(value: Any) -> bool:
    return value is None or isinstance(value, bool)
