"""initialize's params read without lsprotocol (toold.initialize_params) decode to what
lsprotocol's converter gives, and anything the converter would coerce or refuse goes to it."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toold.initialize_params import (
    InitializeParams,
    UndecodableParams,
    _decoded,
    _plain,
    read_initialize,
)

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
"""Any JSON value."""
ODD = st.sampled_from([None, True, 0, 1.5, "12", "", [], {}, [1], {"a": 1}])
"""Values of the wrong type for most fields (the converter coerces some, refuses others)."""


def params(odd: bool) -> st.SearchStrategy[dict[str, Any]]:
    """initialize's params: each field of its own kind, or (``odd``) sometimes not, with
    keys outside the spec."""

    def maybe(value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(value, ODD) if odd else value

    def extra(fields: dict[str, Any]) -> dict[str, Any]:
        return {**fields, "other": JSON} if odd else fields

    window = st.fixed_dictionaries(
        {},
        optional=extra(
            {
                "workDoneProgress": maybe(st.booleans()),
                "showMessage": maybe(
                    st.fixed_dictionaries(
                        {},
                        optional={
                            "messageActionItem": maybe(
                                st.fixed_dictionaries(
                                    {},
                                    optional={"additionalPropertiesSupport": maybe(st.booleans())},
                                )
                            )
                        },
                    )
                ),
                "showDocument": maybe(st.fixed_dictionaries({"support": maybe(st.booleans())})),
            }
        ),
    )
    capabilities = st.fixed_dictionaries(
        {},
        optional={"window": maybe(window), "experimental": JSON}
        | ({"general": st.just({}), "textDocument": st.just({})} if odd else {}),
    )
    folder = st.fixed_dictionaries(
        {"uri": maybe(st.text(max_size=10)), "name": maybe(st.text(max_size=5))},
        optional=extra({}),
    )
    fields = {
        "processId": maybe(st.none() | st.integers(min_value=-(2**40), max_value=2**40)),
        "clientInfo": maybe(
            st.fixed_dictionaries(
                {"name": maybe(st.text(max_size=5))},
                optional=extra({"version": maybe(st.text(max_size=5))}),
            )
        ),
        "locale": maybe(st.text(max_size=5)),
        "rootPath": maybe(st.none() | st.text(max_size=10)),
        "rootUri": maybe(st.none() | st.text(max_size=10)),
        "initializationOptions": JSON,
        "trace": maybe(st.sampled_from(["off", "messages", "verbose"])),
        "workDoneToken": maybe(st.integers() | st.text(max_size=5)),
        "workspaceFolders": maybe(st.none() | st.lists(folder, max_size=2)),
    }
    return st.fixed_dictionaries({"capabilities": maybe(capabilities)}, optional=extra(fields))


@settings(
    max_examples=150,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(params(odd=False))
def test_plain_params_are_read_as_lsprotocol_decodes_them(raw: Any) -> None:
    plain = _plain(raw)
    assert plain is not None, raw
    assert _decoded(raw) == plain


@settings(
    max_examples=200,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(params(odd=True))
def test_any_params_read_without_lsprotocol_decode_as_lsprotocol_decodes_them(raw: Any) -> None:
    plain = _plain(raw)
    if plain is None:
        return  # the converter decides, as before
    assert _decoded(raw) == plain


@pytest.mark.parametrize(
    "raw",
    [
        {"processId": "12", "capabilities": {}},  # coerced to 12 by the converter
        {"processId": True, "capabilities": {}},
        {"rootUri": 5, "capabilities": {}},  # coerced to "5"
        {"clientInfo": {"name": 1}, "capabilities": {}},
        {"capabilities": {"window": {"workDoneProgress": "yes"}}},
        {"capabilities": {"textDocument": {}}},  # an editor's: the converter checks them
        {"capabilities": {}, "extra": 1},
    ],
)
def test_anything_but_plain_values_goes_to_the_converter(raw: dict[str, Any]) -> None:
    assert _plain(raw) is None
    assert read_initialize(raw) == _decoded(raw)


@pytest.mark.parametrize(
    "raw",
    [
        {},  # no capabilities
        {"processId": "not-a-pid", "capabilities": {}},
        {"capabilities": {}, "trace": "loud"},
        {"capabilities": {}, "trace": {"a": 1}},
        {"capabilities": {}, "workspaceFolders": [{"uri": "file:///x"}]},  # no name
        {"capabilities": {"window": 1}},
        [1],
    ],
)
def test_what_the_converter_refuses_is_refused(raw: Any) -> None:
    assert _plain(raw) is None
    with pytest.raises(UndecodableParams):
        read_initialize(raw)


def test_a_plain_initialize_reads_its_fields() -> None:
    capabilities: dict[str, Any] = {"window": {"showMessage": {}}, "experimental": {"toold": {}}}
    raw = {
        "processId": 42,
        "clientInfo": {"name": "toold-cli", "version": "1"},
        "rootUri": "file:///r",
        "workspaceFolders": [{"uri": "file:///w", "name": "w"}],
        "capabilities": capabilities,
        "initializationOptions": {"workspace": "/x"},
    }
    assert read_initialize(raw) == InitializeParams(
        capabilities=capabilities,
        process_id=42,
        client_name="toold-cli",
        initialization_options={"workspace": "/x"},
        first_folder="file:///w",
        root_uri="file:///r",
    )


def test_a_session_answers_a_plain_initialize_without_lsprotocol() -> None:
    """The engine's hot path: lsprotocol and cattrs stay unloaded (15 MiB, ~250 ms)."""
    probe = (
        "import sys, asyncio, toold.server\n"
        "session = toold.server.create_server()\n"
        "answer = session._initialize({'processId': None, 'capabilities': {}})\n"
        "assert answer['serverInfo']['name'] == 'toold', answer\n"
        "session.editor.show_warning('w')\n"
        "print(sorted(m for m in ('lsprotocol.types', 'cattrs') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]", done.stderr
