"""Wire fuzzing: seeded malformed frames against one long-running daemon per module.

Each example sends one to four frames — good ones, malformed ones (missing, negative,
absurd, lying or short Content-Length, truncated bodies, invalid UTF-8, invalid JSON,
lone surrogates, NaN, wrong member types, batches, unknown methods, duplicate ids,
responses to nothing, over-long header lines, frames over the size cap, deep nesting) —
then a probe (``tools/call read_file``). A reference model says what the daemon owes
for every decodable message (exactly one response per request id, with the allowed
error codes; nothing for notifications and responses; an error with a null id for
everything else); malformed frames owe at least one error with a null id. The probe
must be answered correctly after every example, the daemon must stay up and never
answer -32603 or log an unhandled error.

A lying Content-Length (longer than its body) leaves the daemon waiting for more bytes;
that is inherent to the framing. The example then sends a filler notification at least
as long as the missing part: its first bytes complete the body (a parse error), its rest
is junk in front of the probe's ``Content-Length:``, which the daemon skips to.

Examples: 250 (``TOOLD_FULL_HARDENING=1``: 5,000), derandomized, so CI is reproducible.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.e2e.wire import WireClient
from tests.hardening.support import exited_cleanly, next_raw, scale, start_daemon

CAP = 65_536
EXAMPLES = scale(250, 5000)
PROBE_FILE = "probe.txt"
PROBE_CONTENT = "1: the probe line"
MAX_DEPTH = 64  # the transport's limit

PARSE, INVALID, NOT_FOUND, PARAMS, INTERNAL, TOO_LARGE = (
    -32700,
    -32600,
    -32601,
    -32602,
    -32603,
    -33001,
)

# Read-only tools and made-up names only: the fuzzer must never run a shell or write.
SAFE_TOOLS = ["read_file", "glob", "grep", "todo_read", "task_list", "list_dir", "file_info"]
UNSAFE_PREFIXES: tuple[str, ...] = (
    *("bash", "write", "edit", "str_replace", "background", "python", "http", "duckduckgo"),
    *("task_", "todo_w", "subagent", "team", "file_write", "web"),
)
# Requests whose answer the model can bound; method -> allowed error codes.
METHODS: dict[str, set[int]] = {
    "tools/list": {PARAMS},
    "tools/call": {PARAMS},
    "todos/list": {PARAMS},
    "tasks/list": {PARAMS},
    "skills/list": {PARAMS},
    "jobs/list": {PARAMS},
    "jobs/get": {PARAMS, -33002},
    "initialize": {INVALID},
    "fuzz/unknown": {NOT_FOUND},
    "": {NOT_FOUND},
    "$/fuzz": {NOT_FOUND},
    "textDocument/hover": {PARAMS, NOT_FOUND},
    "workspace/symbol": {PARAMS, NOT_FOUND},
}
MUST_FAIL = {"initialize", "fuzz/unknown", "", "$/fuzz"}  # never a result


# --------------------------------------------------------------------------- the model


@dataclass
class Expect:
    """What the daemon owes for one example."""

    ids: Counter[Any] = field(default_factory=Counter)
    codes: dict[Any, set[int]] = field(default_factory=dict)
    nulls: list[int] = field(default_factory=list)
    junk: int = 0  # malformed frames: each owes at least one null-id error
    must_fail: Counter[Any] = field(default_factory=Counter)  # answers that must be errors

    def add(self, other: Expect) -> None:
        self.ids.update(other.ids)
        for key, codes in other.codes.items():
            self.codes[key] = self.codes.get(key, set()) | codes
        self.nulls += other.nulls
        self.junk += other.junk
        self.must_fail.update(other.must_fail)


def _valid_id(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def _key(msg_id: Any) -> Any:
    # JSON cannot tell 1 from 1.0 apart from its text; ids are str or int here.
    return ("s", msg_id) if isinstance(msg_id, str) else ("i", msg_id)


def model(value: Any) -> Expect:
    """What the daemon owes for a decoded JSON value (the transport's and pygls's rules)."""
    out = Expect()
    if not isinstance(value, dict):
        out.nulls.append(INVALID)  # batches and scalars
        return out
    msg_id = value.get("id")
    has_id, has_method = "id" in value, "method" in value
    reply_id = msg_id if _valid_id(msg_id) else None

    def error(code: int, with_id: Any) -> Expect:
        if with_id is None:
            out.nulls.append(code)
        else:
            out.ids[_key(with_id)] += 1
            out.codes[_key(with_id)] = out.codes.get(_key(with_id), set()) | {code}
        return out

    if value.get("jsonrpc") != "2.0":
        return error(INVALID, reply_id) if has_method or not has_id else out
    if has_method:
        if not isinstance(value["method"], str):
            return error(INVALID, reply_id)
        if has_id and not _valid_id(msg_id):
            return error(INVALID, None)
    elif not has_id:
        return error(INVALID, None)
    if _depth(value) > MAX_DEPTH:
        return error(INVALID, reply_id) if has_method or not has_id else out
    if not has_method or not has_id:
        return out  # a response to nothing, or a notification: no answer
    allowed = METHODS.get(value["method"], {NOT_FOUND, PARAMS})
    out.ids[_key(msg_id)] += 1
    out.codes[_key(msg_id)] = out.codes.get(_key(msg_id), set()) | allowed
    if value["method"] in MUST_FAIL:
        out.must_fail[_key(msg_id)] += 1
    return out


def model_body(body: bytes) -> Expect:
    """The model for raw body bytes, decoded as strictly as the daemon does."""
    try:
        text = body.decode("utf-8")
        value = json.loads(text, parse_constant=_reject)
        json.dumps(value, ensure_ascii=False).encode("utf-8")  # lone surrogates
    except (ValueError, RecursionError):
        out = Expect()
        out.nulls.append(PARSE)
        return out
    return model(value)


def _reject(constant: str) -> Any:
    raise ValueError(constant)


# --------------------------------------------------------------------------- strategies

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
ids = st.one_of(
    st.integers(min_value=-(2**64), max_value=2**64),
    st.text(max_size=12).filter(lambda s: not s.startswith("probe-")),
    st.sampled_from([7, "7", 0, -1]),  # duplicates across frames
    json_values,  # wrong types: null, float, bool, list, object
)
tool_names = st.one_of(
    st.sampled_from([*SAFE_TOOLS, "no_such_tool", "file_read"]),
    st.text(max_size=15).filter(lambda s: not s.startswith(UNSAFE_PREFIXES)),
)
tool_params = st.fixed_dictionaries(
    {"name": tool_names},
    optional={
        "arguments": st.one_of(
            st.fixed_dictionaries({"file_path": st.sampled_from([PROBE_FILE, "nope", "../x"])}),
            st.dictionaries(
                st.sampled_from(["file_path", "path", "pattern", "offset", "limit", "x"]),
                json_values,
                max_size=3,
            ),
            json_values,
        ),
        "origin": st.sampled_from(["user", "agent", "robot", 3]),
        "workDoneToken": st.one_of(st.integers(), st.text(max_size=8), json_values),
    },
)


@st.composite
def messages(draw: st.DrawFn) -> Any:
    """A JSON-RPC-ish value: mostly well-shaped, with one member of a wrong kind at times."""
    kind = draw(st.sampled_from(["request", "request", "notification", "response", "odd"]))
    if kind == "odd":
        return draw(st.one_of(json_values, st.lists(st.just({}), max_size=2)))
    msg: dict[str, Any] = {"jsonrpc": draw(st.sampled_from(["2.0"] * 6 + ["1.0", 2.0, None]))}
    if draw(st.integers(0, 9)) == 0:
        del msg["jsonrpc"]
    if kind in ("request", "notification"):
        method = draw(st.one_of(st.sampled_from(sorted(METHODS)), st.integers(), st.none()))
        msg["method"] = method
        if method == "tools/call" and draw(st.booleans()):
            msg["params"] = draw(tool_params)
        elif draw(st.booleans()):
            msg["params"] = draw(json_values)
    if kind in ("request", "response"):
        msg["id"] = draw(ids)
    if kind == "response":
        msg[draw(st.sampled_from(["result", "error"]))] = draw(json_values)
    return msg


def encode(value: Any, ascii_only: bool) -> bytes:
    return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8")


def frame(body: bytes, headers: bytes = b"") -> bytes:
    return b"%sContent-Length: %d\r\n\r\n%s" % (headers, len(body), body)


# Junk never holds ':' so it can never look like a header, nor fake a Content-Length.
junk_bytes = st.binary(min_size=1, max_size=300).map(lambda b: b.replace(b":", b";"))


@dataclass
class Frame:
    data: bytes
    expect: Expect
    filler: int = 0  # bytes the next frame must supply to complete a lying body


@st.composite
def frames(draw: st.DrawFn) -> Frame:
    """One frame, good or malformed, with what the daemon owes for it."""
    msg = draw(messages())
    body = encode(msg, draw(st.booleans()))
    junk = Expect(junk=1)
    kind = draw(
        st.sampled_from(
            [
                "good", "good", "good", "headers", "bare-lf", "random-body", "bad-utf8",
                "surrogate", "nan", "no-length", "bad-length", "lying", "short",
                "over-cap", "long-header", "deep",
            ]
        )
    )  # fmt: skip
    if kind == "good":
        return Frame(frame(body), model_body(body))
    if kind == "headers":
        extra = b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"
        name = draw(st.sampled_from([b"content-length", b"CONTENT-LENGTH", b"Content-Length"]))
        data = b"%s%s:   %d  \r\n\r\n%s" % (extra, name, len(body), body)
        return Frame(data, model_body(body))
    if kind == "bare-lf":
        return Frame(b"Content-Length: %d\n\n%s" % (len(body), body), model_body(body))
    if kind == "random-body":
        raw = draw(st.binary(max_size=200))
        return Frame(frame(raw), model_body(raw))
    if kind == "bad-utf8":
        cut = draw(st.integers(0, len(body)))
        bad = draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"]))
        raw = body[:cut] + bad + body[cut:]
        return Frame(frame(raw), Expect(nulls=[PARSE]))
    if kind == "surrogate":
        raw = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\\ud800x"}}'
        return Frame(frame(raw), Expect(nulls=[PARSE]))
    if kind == "nan":
        constant = draw(st.sampled_from([b"NaN", b"Infinity", b"-Infinity"]))
        raw = b'{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"x":%s}}' % constant
        return Frame(frame(raw), Expect(nulls=[PARSE]))
    if kind == "no-length":
        header = draw(st.sampled_from([b"", b"Content-Type: x\r\n", b"X-Length: 5\r\n"]))
        return Frame(header + b"\r\n" + draw(junk_bytes), junk)
    if kind == "bad-length":
        value = draw(
            st.sampled_from(
                [b"-5", b"abc", b"", b"12abc", b"+12", b"1.5", b"\xb2", b"\xef\xbc\x91",
                 b"0x10", b"9" * 40, b"1" * 16]
            )
        )  # fmt: skip
        return Frame(b"Content-Length: %s\r\n\r\n%s" % (value, body), junk)
    if kind == "lying":
        excess = draw(st.integers(1, 2000))
        cut = draw(st.integers(0, len(body)))
        head = b"Content-Length: %d\r\n\r\n" % (cut + excess)
        return Frame(head + body[:cut], junk, filler=excess)
    if kind == "short":
        cut = draw(st.integers(0, max(0, len(body) - 1)))
        return Frame(b"Content-Length: %d\r\n\r\n%s" % (cut, body), junk)
    if kind == "deep":
        depth = draw(st.sampled_from([MAX_DEPTH - 2, MAX_DEPTH + 1, 300, 5000]))
        notify = draw(st.booleans())
        head = b'{"jsonrpc":"2.0",%s"method":"tools/list","params":{"x":' % (
            b"" if notify else b'"id":"deep",'
        )
        raw = head + b"[" * depth + b"1" + b"]" * depth + b"}}"
        return Frame(frame(raw), model_body(raw))
    if kind == "over-cap":
        size = draw(st.integers(CAP + 1, CAP + 3000))
        return Frame(frame((body * (size // len(body) + 1))[:size]), Expect(nulls=[TOO_LARGE]))
    # long-header: a header line past the 8 KiB line limit, then a good frame
    width = draw(st.integers(8200, 20_000))
    out = Expect(nulls=[PARSE])
    out.add(model_body(body))
    return Frame(frame(body, b"X-Long: " + b"a" * width + b"\r\n"), out)


# --------------------------------------------------------------------------- the harness


class Fuzzer:
    """One daemon for the module; runs examples and checks what comes back."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.client = start_daemon(workspace, "--max-message-bytes", str(CAP))
        self.probes = itertools.count()
        self.examples = 0
        self.errors_seen: Counter[int] = Counter()

    def filler(self, size: int) -> bytes:
        """A notification frame of at least ``size`` bytes, without ':' in its padding."""
        pad = "f" * max(0, size)
        return frame(encode({"jsonrpc": "2.0", "method": "$/fuzz/filler", "params": [pad]}, True))

    def run(self, parts: list[Frame], chunk: int) -> None:
        expect = Expect()
        data = b""
        for part in parts:
            data += part.data
            if part.filler:
                data += self.filler(part.filler)
            expect.add(part.expect)
        probe_id = f"probe-{next(self.probes)}"
        params = {"name": "read_file", "arguments": {"file_path": PROBE_FILE}, "origin": "user"}
        data += frame(
            encode(
                {"jsonrpc": "2.0", "id": probe_id, "method": "tools/call", "params": params}, True
            )
        )
        for start in range(0, len(data), chunk):
            self.client.send_raw(data[start : start + chunk])
        self.collect(probe_id, expect)
        self.examples += 1

    def collect(self, probe_id: str, expect: Expect) -> None:
        owed = Counter(expect.ids)
        failed: Counter[Any] = Counter()
        nulls: list[int] = []
        probe_seen = False
        while not probe_seen or +owed:
            msg = next_raw(self.client, timeout=20)
            assert msg is not None, f"daemon closed its output: {self.client.stderr()}"
            check_shape(msg)
            if "method" in msg:
                if "id" in msg:  # a request to the client: answer it
                    self.client.send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
                continue
            error = msg.get("error")
            if error is not None:
                self.errors_seen[error["code"]] += 1
                assert error["code"] != INTERNAL, msg
            if msg["id"] == probe_id:
                assert msg.get("result", {}).get("content") == PROBE_CONTENT, msg
                probe_seen = True
            elif msg["id"] is None:
                assert error is not None, msg
                nulls.append(error["code"])
            else:
                key = _key(msg["id"])
                assert owed[key] > 0, f"unexpected response {msg}; owed {dict(owed)}"
                owed[key] -= 1
                if error is not None:
                    assert error["code"] in expect.codes[key], msg
                    failed[key] += 1
        for key, count in expect.must_fail.items():
            assert failed[key] >= count, f"{key}: {count} answers had to be errors"
        if expect.junk:
            assert len(nulls) >= len(expect.nulls) + expect.junk or len(nulls) >= 1, nulls
            assert set(nulls) <= {PARSE, INVALID, TOO_LARGE}, nulls
        else:
            assert sorted(nulls) == sorted(expect.nulls), (nulls, expect.nulls)
        assert self.client.proc.poll() is None, self.client.stderr()

    def close(self) -> None:
        assert self.client.close() == 0, self.client.stderr()
        assert "unhandled error" not in self.client.stderr(), self.client.stderr()


def check_shape(msg: Any) -> None:
    """A JSON-RPC 2.0 message as the daemon must write it."""
    assert isinstance(msg, dict) and msg.get("jsonrpc") == "2.0", msg
    if "method" in msg:
        assert isinstance(msg["method"], str), msg
        return
    assert "id" in msg and (msg["id"] is None or _valid_id(msg["id"])), msg
    assert ("result" in msg) != ("error" in msg), msg
    if "error" in msg:
        error = msg["error"]
        assert isinstance(error, dict), msg
        assert isinstance(error.get("code"), int) and isinstance(error.get("message"), str), msg
        assert "traceback" not in json.dumps(error.get("data")), msg


@pytest.fixture(scope="module")
def fuzzer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fuzzer]:
    workspace = tmp_path_factory.mktemp("fuzz") / "ws"
    workspace.mkdir()
    (workspace / PROBE_FILE).write_text("the probe line\n", encoding="utf-8")
    f = Fuzzer(workspace.resolve())
    yield f
    f.close()


@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(parts=st.lists(frames(), min_size=1, max_size=4), chunk=st.sampled_from([1 << 20, 7, 4096]))
def test_malformed_frames_get_errors_and_the_daemon_keeps_serving(
    fuzzer: Fuzzer, parts: list[Frame], chunk: int
) -> None:
    fuzzer.run(parts, chunk)


def test_the_fuzzer_covered_every_kind_of_error(fuzzer: Fuzzer) -> None:
    # Runs after the fuzz test (same module, same daemon): the examples reached each answer.
    assert fuzzer.examples >= EXAMPLES
    for code in (PARSE, INVALID, NOT_FOUND, PARAMS, TOO_LARGE):
        assert fuzzer.errors_seen[code] > 0, fuzzer.errors_seen


# --------------------------------------------------------------------------- fixed cases


def _msg(value: Any) -> bytes:
    return frame(encode(value, True))


FIXED: list[tuple[str, bytes, Expect]] = [
    # Each of these once crashed the daemon, hung it or was answered wrongly.
    ("unicode-digit-length", b"Content-Length: \xb2\r\n\r\n", Expect(nulls=[PARSE])),
    ("body-without-length", b"X-Other: 1\r\n\r\n" + encode({"a": 1}, True), Expect(junk=1)),
    ("absurd-length", b"Content-Length: 99999999999999999999\r\n\r\n{}", Expect(junk=1)),
    ("unknown-method-no-params", _msg({"jsonrpc": "2.0", "id": 31, "method": "x/y"}),
     Expect(ids=Counter({_key(31): 1}), codes={_key(31): {NOT_FOUND}})),
    ("second-initialize", _msg({"jsonrpc": "2.0", "id": 32, "method": "initialize",
                                "params": {"processId": None, "capabilities": {}}}),
     Expect(ids=Counter({_key(32): 1}), codes={_key(32): {INVALID}},
            must_fail=Counter({_key(32): 1}))),
    ("deep-json", frame(b"[" * 60_000), Expect(nulls=[PARSE])),
    ("nan", frame(b'{"jsonrpc":"2.0","id":33,"method":"tools/list","params":NaN}'),
     Expect(nulls=[PARSE])),
    ("lone-surrogate", frame(b'{"jsonrpc":"2.0","id":34,"method":"tools/call","params":'
                             b'{"name":"read_file","arguments":{"file_path":"\\udc80"}}}'),
     Expect(nulls=[PARSE])),
    ("utf-16-body", frame('{"jsonrpc":"2.0","id":35,"method":"x"}'.encode("utf-16")),
     Expect(nulls=[PARSE])),
    ("bom", frame(b"\xef\xbb\xbf" + encode({"jsonrpc": "2.0", "id": 36, "method": "x"}, True)),
     Expect(nulls=[PARSE])),
    ("cancel-with-list-id", _msg({"jsonrpc": "2.0", "method": "$/cancelRequest",
                                  "params": {"id": [1]}}), Expect()),
    ("error-response-to-nothing", _msg({"jsonrpc": "2.0", "id": 37, "error": {"code": "x"}}),
     Expect()),
]  # fmt: skip


@pytest.mark.parametrize(("name", "data", "expect"), FIXED, ids=[f[0] for f in FIXED])
def test_fixed_cases(fuzzer: Fuzzer, name: str, data: bytes, expect: Expect) -> None:
    fuzzer.run([Frame(data, expect)], 1 << 20)


def test_a_response_carrying_an_in_flight_request_id_is_ignored(fuzzer: Fuzzer) -> None:
    # pygls would hand the "result" to the handler's own future (RuntimeError).
    params = {"name": "glob", "arguments": {"pattern": "*"}, "origin": "user"}
    request = encode(
        {"jsonrpc": "2.0", "id": "twin", "method": "tools/call", "params": params}, True
    )
    twin = _msg({"jsonrpc": "2.0", "id": "twin", "result": 1})
    fuzzer.run([Frame(frame(request) + twin, Expect(ids=Counter({_key("twin"): 1})))], 1 << 20)
    assert "unhandled error" not in fuzzer.client.stderr()


def test_the_default_cap_is_64_mib_and_holds_at_the_boundary(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / PROBE_FILE).write_text("the probe line\n", encoding="utf-8")
    client = start_daemon(workspace)
    try:
        cap = 64 * 1024 * 1024
        head = b'{"jsonrpc":"2.0","method":"$/fuzz/big","params":["'
        tail = b'"]}'
        at_cap = head + b"x" * (cap - len(head) - len(tail)) + tail
        client.send_raw(frame(at_cap))  # exactly the cap: accepted (a notification: no reply)
        assert client.tool("read_file", file_path=PROBE_FILE)["content"] == PROBE_CONTENT
        client.send_raw(frame(at_cap[:-3] + b'x"]}'))  # one byte over
        error = client.next_message(lambda m: m.get("id", 0) is None)["error"]
        assert error["code"] == TOO_LARGE and str(cap) in error["message"], error
        assert client.tool("read_file", file_path=PROBE_FILE)["content"] == PROBE_CONTENT
    finally:
        assert client.close() == 0


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b'Content-Length: 100\r\n\r\n{"jsonrpc": "2.0"', id="truncated-body"),
        pytest.param(b"Content-Length: 70000\r\n\r\n" + b"x" * 100, id="over-cap-body-missing"),
        pytest.param(b"Content-Length: 12", id="inside-the-headers"),
    ],
)
def test_end_of_input_inside_a_frame_is_a_clean_exit(tmp_path: Path, data: bytes) -> None:
    # The one unrecoverable state: the client went away mid-frame. The daemon must exit
    # by itself (status 1: no shutdown came), not crash; a new daemon then serves.
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / PROBE_FILE).write_text("the probe line\n", encoding="utf-8")
    client = start_daemon(workspace, "--max-message-bytes", str(CAP))
    client.send_raw(data)
    assert client.proc.stdin is not None
    client.proc.stdin.close()
    assert exited_cleanly(client) == 1
    client.close()
    again: WireClient = start_daemon(workspace)
    try:
        assert again.tool("read_file", file_path=PROBE_FILE)["content"] == PROBE_CONTENT
    finally:
        assert again.close() == 0
