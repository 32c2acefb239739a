"""Which configuration changes loosen toold's protections, and the configuration without them.

Anything can edit toold.toml, an agent's shell command included, so a reload from the
file may not switch the guard off by itself. ``hold_back`` splits a new configuration
against the current one: every change that loosens a protection listed in LOOSENING is
held back (its current value kept), everything else — tightening and unrelated
changes — goes through. The daemon applies the result at once and asks the user about
the held changes (see WorkspaceState.reload_config).

The user's answer outlives the daemon: a toold.toml whose loosening the user kept out
(Keep current, or no answer) is held back the same way at the next start, against the
configuration the user kept (see toold.refusals).

What counts as loosening, key by key:

- ``permissions.mode`` less strict than the live mode (plan > default > auto > bypass);
- ``permissions.allow``: a rule added; ``permissions.deny`` and ``permissions.forbid``: a rule
  removed;
- ``execution.tool_runner`` weaker (docker > bwrap > auto > subprocess > local);
  ``execution.network``: switched to true, or from false to a table; within a table, an
  ``allow`` entry added, a ``deny`` entry removed, ``methods`` read → all (a narrowing
  part of the same change applies at once); ``execution.env_passthrough``: a name added;
- ``http.allow_hosts`` and ``files.allowed_extensions`` (empty means any): emptied or
  an entry added; ``http.deny_hosts``: an entry removed; ``http.block_private`` off;
- ``python_repl.allowed_modules`` (none means any): removed or a module added;
- ``agent.base_url`` and ``agent.api_key_env``, changed at all: they decide where the
  API key is sent;
- ``hooks.pre_tool_use`` changed at all (a hook runs a command on calls and can allow
  them; removing one removes a policy), ``hooks.post_tool_use``: a hook added.

Limits, timeouts, sizes, the Docker image and resource limits are not permissions
and apply at once.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from toold.config import TooldConfig

MODE_STRICTNESS = {"bypass": 0, "auto": 1, "default": 2, "plan": 3}
RUNNER_STRENGTH = {"local": 0, "subprocess": 1, "auto": 2, "bwrap": 3, "docker": 4}

Check = Callable[[Any, Any], tuple[Any, list[str]]]
"""(current value, new value) → (value to apply now, descriptions of what is held)."""


def _shown(value: Any) -> str:
    if value is None or value == []:
        return "(none)"
    return str(value)


def _ranked(order: dict[str, int]) -> Check:
    def check(old: Any, new: Any) -> tuple[Any, list[str]]:
        if order[new] < order[old]:
            return old, [f"{old} → {new}"]
        return new, []

    return check


def _added_rules(old: list[str], new: list[str]) -> tuple[list[str], list[str]]:
    added = [rule for rule in new if rule not in old]
    return [rule for rule in new if rule in old], [f"new allow rule {rule}" for rule in added]


def _removed_rules(kind: str) -> Check:
    def check(old: list[str], new: list[str]) -> tuple[list[str], list[str]]:
        removed = [rule for rule in old if rule not in new]
        return [*new, *removed], [f"{kind} rule {rule} removed" for rule in removed]

    return check


def _added(old: list[str], new: list[str]) -> tuple[list[str], list[str]]:
    added = [item for item in new if item not in old]
    return [item for item in new if item in old], [f"adds {item}" for item in added]


def _removed(old: list[str], new: list[str]) -> tuple[list[str], list[str]]:
    removed = [item for item in old if item not in new]
    return [*new, *removed], [f"removes {item}" for item in removed]


def _only_list(old: list[str] | None, new: list[str] | None) -> tuple[Any, list[str]]:
    """A list where "empty" (or None) means "anything": emptying or adding loosens."""
    if not old:
        return new, []  # anything was allowed: any list narrows it
    if not new:
        return old, [f"{_shown(old)} → {_shown(new)} (anything)"]
    kept = [item for item in new if item in old]
    added = [f"adds {item}" for item in new if item not in old]
    return (kept or old), added


def _turned_on(old: bool, new: bool) -> tuple[bool, list[str]]:
    return (old, ["off → on"]) if new and not old else (new, [])


def _network(old: Any, new: Any) -> tuple[Any, list[str]]:
    """execution.network: false < a table < true; within tables, entry by entry."""
    if old is True or new is False:
        return new, []  # from the whole network, or to none: narrower whatever it is
    if new is True:
        return old, [f"{'off' if old is False else 'allow-list'} → on (the whole network)"]
    if old is False:
        return old, [f"off → allow {', '.join(new['allow']) or '(nothing)'}"]
    allow, added = _added(old["allow"], new["allow"])
    deny, removed = _removed(old["deny"], new["deny"])
    held = [f"{text} to allow" for text in added] + [f"{text} from deny" for text in removed]
    methods = new["methods"]
    if old["methods"] == "read" and methods == "all":
        methods = "read"
        held.append("methods read → all")
    return {"allow": allow, "deny": deny, "methods": methods}, held


def _turned_off(old: bool, new: bool) -> tuple[bool, list[str]]:
    return (old, ["on → off"]) if old and not new else (new, [])


def _hook(item: dict[str, Any]) -> str:
    return f"{item['command']!r} for {item['matcher'] or 'every tool'!r}"


def _hooks_added(old: list[Any], new: list[Any]) -> tuple[list[Any], list[str]]:
    """A new or changed hook runs a command on calls (and a pre hook can allow them)."""
    added = [item for item in new if item not in old]
    return [item for item in new if item in old], [f"adds {_hook(item)}" for item in added]


def _hooks_changed(old: list[Any], new: list[Any]) -> tuple[list[Any], list[str]]:
    """Pre hooks also guard: removing one (a policy that blocked calls) loosens too."""
    if new == old:
        return new, []
    added = [f"adds {_hook(item)}" for item in new if item not in old]
    removed = [f"removes {_hook(item)}" for item in old if item not in new]
    return old, ["; ".join(added + removed)]


def _changed(old: Any, new: Any) -> tuple[Any, list[str]]:
    return (old, [f"{_shown(old)} → {_shown(new)}"]) if new != old else (new, [])


LOOSENING: dict[str, Check] = {
    "permissions.allow": _added_rules,
    "permissions.deny": _removed_rules("deny"),
    "permissions.forbid": _removed_rules("forbid"),
    "execution.tool_runner": _ranked(RUNNER_STRENGTH),
    "execution.network": _network,
    "execution.env_passthrough": _added,
    "http.allow_hosts": _only_list,
    "http.deny_hosts": _removed,
    "http.block_private": _turned_off,
    "files.allowed_extensions": _only_list,
    "python_repl.allowed_modules": _only_list,
    "agent.base_url": _changed,
    "agent.api_key_env": _changed,
    "hooks.pre_tool_use": _hooks_changed,
    "hooks.post_tool_use": _hooks_added,
}
"""Every key whose change can loosen a protection (permissions.mode is handled apart:
it is compared with the live mode)."""


def hold_back(
    current: TooldConfig, live_mode: str, new: TooldConfig, chosen: Collection[str] = ()
) -> tuple[TooldConfig, list[str]]:
    """``new`` with its loosening changes reverted, and a description of each.

    ``live_mode`` is the guard's mode now (permissions/setMode may have changed it);
    dotted keys in ``chosen`` were set by the user (didChangeConfiguration) and pass.
    """
    old_data, data = current.model_dump(), new.model_dump()
    held: list[str] = []
    mode = new.permissions.mode
    if (
        "permissions.mode" not in chosen
        and mode != current.permissions.mode
        and MODE_STRICTNESS[mode] < MODE_STRICTNESS[live_mode]
    ):
        data["permissions"]["mode"] = current.permissions.mode
        held.append(f"permissions.mode {live_mode} → {mode}")
    for key, check in LOOSENING.items():
        if key in chosen or key.partition(".")[0] in chosen:
            continue
        section, _, name = key.partition(".")
        kept, what = check(old_data[section][name], data[section][name])
        if what:
            data[section][name] = kept
            held.extend(
                text if text.startswith(("new ", "deny ")) else f"{key} {text}" for text in what
            )
    if not held:
        return new, []
    return TooldConfig.model_validate(data), held


def chosen_keys(overrides: dict[str, Any] | None) -> frozenset[str]:
    """The dotted keys an override sets (``{"permissions": {"mode": ..}}`` → permissions.mode)."""
    keys: set[str] = set()
    for section, value in (overrides or {}).items():
        if isinstance(value, dict):
            keys.update(f"{section}.{name}" for name in value)
        else:
            keys.add(str(section))
    return frozenset(keys)
