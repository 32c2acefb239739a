"""The equivalence class of a host's spellings: every one is judged as the host it reaches.

Generated spellings of a canary address (127.0.0.1 in decimal, hex, octal, short forms,
IPv4-mapped, NAT64 and IPv4-compatible IPv6, the unspecified address) and of names (case,
a final dot, IDNA and punycode, look-alikes) are judged by the policy, then a sample is
sent through the real proxy from inside bwrap and docker, with the canary counting every
connection that reaches it.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from tests.network.conftest import Hosts, probe
from toold.config import NetworkPolicy
from toold.sandbox.network.policy import NetworkRules

CANARY = [
    "127.0.0.1", "127.1", "127.0.1", "0x7f.0.0.1", "0x7f.1", "0x7f000001", "0X7F000001",
    "2130706433", "0177.0.0.1", "0177.1", "017700000001", "127.000.000.001", "127.0.0.1.",
    "::ffff:127.0.0.1", "[::ffff:127.0.0.1]", "::ffff:7f00:1", "[::FFFF:7F00:1]",
    "0:0:0:0:0:ffff:7f00:1", "64:ff9b::7f00:1", "::127.0.0.1",
]  # fmt: skip
"""Spellings of 127.0.0.1."""
LOOPBACK = [*CANARY, "[::1]", "::1", "0:0:0:0:0:0:0:1", "0.0.0.0", "0", "::",
            "127.255.255.254", "localhost", "LOCALHOST.", "LocalHost"]  # fmt: skip
METADATA = ["169.254.169.254", "0xa9fea9fe", "2852039166", "0251.0376.0251.0376",
            "::ffff:169.254.169.254", "[::ffff:a9fe:a9fe]", "169.254.43518"]  # fmt: skip


def _case_forms(name: str) -> list[str]:
    """Every upper/lower spelling of the first letters, with and without a final dot."""
    head, rest = name[:3], name[3:]
    forms = {
        "".join(c.upper() if up else c for c, up in zip(head, mask, strict=True)) + rest
        for mask in itertools.product([False, True], repeat=len(head))
    }
    return sorted(forms | {f"{form}." for form in forms} | {name.upper()})


def judge(policy: dict[str, Any], host: str, method: str = "GET") -> tuple[bool, str]:
    """The policy's verdict on ``host`` (names resolve through the test hosts)."""
    rules = NetworkRules(NetworkPolicy.model_validate(policy))
    decision = asyncio.run(rules.judge(host, 80, method))
    return decision.allowed, decision.reason


pytestmark = pytest.mark.usefixtures("test_names")


@pytest.mark.parametrize("host", LOOPBACK + METADATA)
def test_no_spelling_of_an_internal_address_passes_a_name_list(host: str) -> None:
    allowed, reason = judge({"allow": ["pypi.test", "*.test"]}, host)
    assert not allowed and reason.startswith("toold: "), reason


@pytest.mark.parametrize("host", METADATA)
def test_a_denied_network_holds_for_every_spelling_even_when_allowed(host: str) -> None:
    policy = {"allow": ["169.254.169.254", "0.0.0.0/0"], "deny": ["169.254.0.0/16"]}
    allowed, reason = judge(policy, host)
    assert not allowed and "denied by execution.network.deny 169.254.0.0/16" in reason, reason


@pytest.mark.parametrize("host", [*CANARY, "[::1]", "::1", "0:0:0:0:0:0:0:1"])
def test_an_address_entry_allows_every_spelling_of_it(host: str) -> None:
    """The equivalence class cuts both ways: explicit 127.0.0.1 and ::1 entries."""
    allowed, reason = judge({"allow": ["127.0.0.1", "::1"]}, host)
    assert allowed, reason


@pytest.mark.parametrize("host", _case_forms("both.test"))
def test_a_denied_name_holds_for_every_case_and_final_dot(host: str) -> None:
    allowed, reason = judge({"allow": ["both.test", "*.test"], "deny": ["Both.Test."]}, host)
    assert not allowed and "denied by execution.network.deny both.test" in reason, reason


@pytest.mark.parametrize(
    "host", ["bücher.test", "BÜCHER.test", "xn--bcher-kva.test", "XN--BCHER-KVA.TEST."]
)
def test_idna_spellings_are_one_name(host: str) -> None:
    assert judge({"allow": ["Bücher.Test"]}, host)[0]
    allowed, reason = judge({"allow": ["bücher.test"], "deny": ["xn--bcher-kva.test"]}, host)
    assert not allowed and "deny" in reason, reason


@pytest.mark.parametrize(
    "host", ["pypi.tеst", "pypi.test.canary.test", "xpypi.test", "pypi.tes", "pypi.test@x"]
)
def test_look_alikes_are_other_names(host: str) -> None:
    """A Cyrillic 'е', a suffix, a prefix, a prefix of the name: none is pypi.test."""
    assert not judge({"allow": ["pypi.test"]}, host)[0]


def test_a_wildcard_names_subdomains_only_and_never_an_internal_address() -> None:
    policy = {"allow": ["*.wild.test"]}
    assert "not in execution.network.allow" in judge(policy, "wild.test")[1]
    allowed, reason = judge(policy, "FILES.Wild.Test.")
    assert not allowed and "a loopback address" in reason, reason
    assert judge({"allow": ["files.wild.test"]}, "FILES.Wild.Test.")[0]


SAMPLE = ["2130706433", "0x7f.1", "[::ffff:7f00:1]", "127.1", "LOCALHOST", "canary.test",
          "CANARY.TEST.", "0.0.0.0", "[::1]", "both.test"]  # fmt: skip


def test_spellings_sent_through_the_proxy_never_reach_the_canary(
    runner_kind: str, workspace: Any, hosts: Hosts
) -> None:
    port = hosts.canary.getsockname()[1]
    policy = {"allow": ["pypi.test", "*.test", "both.test"], "deny": ["both.test"]}
    plan: list[list[Any]] = []
    for index, host in enumerate(SAMPLE):
        plan.append([f"connect{index}", "proxy", f"CONNECT {host}:{port} HTTP/1.1"])
        plan.append([f"get{index}", "proxy", f"GET http://{host}:{port}/ HTTP/1.1"])
    tricks = [f"http://pypi.test@canary.test:{port}/", f"http://canary.test:{port}#@pypi.test/"]
    for index, url in enumerate(tricks):
        plan.append([f"trick{index}", "proxy", f"GET {url} HTTP/1.1"])
    got = probe(runner_kind, workspace, policy, plan)
    refused = {name: line for name, line in got.items() if " 403 toold: " in line}
    assert refused == got, {k: v for k, v in got.items() if k not in refused}
    assert hosts.canary_hits == []
