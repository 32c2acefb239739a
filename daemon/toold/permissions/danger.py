"""Which programs, with which arguments, do damage: the table behind the danger detector.

``program_danger`` says why one program with its arguments is dangerous: it deletes or
discards work (recursive rm, ``rsync --delete``, ``tar --remove-files``, ``git checkout
-- path``, ``git branch -D``...), stops the machine or other processes (``kill -1``,
``pkill``, ``shutdown``, ``systemctl stop``...), wipes disks (``mkfs``, ``wipefs``,
``fdisk``...), changes permissions recursively, or writes outside the workspace (a
known output operand such as cp's destination, ``dd of=``, tee's files, the operands
of rm/mv/ln/touch...: each is checked like a path the guard reads, see paths.py; a
symbolic link pointing out of the workspace counts, it is how tools get tricked).
Arguments only known at run time make the programs listed here dangerous.
"""

from __future__ import annotations

import re

from toold.permissions.interpreters import git_arguments
from toold.permissions.paths import names_outside
from toold.permissions.readonly import PROGRAMS, has_option, operands

_OCTAL_MODE = re.compile(r"^[0-7]{1,8}$")
_SYMBOLIC_MODE = re.compile(r"^[ugoa]*(?:[-+=][rwxXstugo]*)+$")
_DISK_TOOLS = (
    "mke2fs", "mkdosfs", "mkntfs", "tune2fs", "losetup", "cryptsetup", "mdadm", "lvremove",
    "vgremove", "pvremove", "mount", "umount", "swapoff", "swapon", "chattr", "kexec",
)  # fmt: skip
_ADMIN_TOOLS = (
    "iptables", "ip6tables", "nft", "useradd", "userdel", "usermod", "groupadd", "groupdel",
    "passwd", "chpasswd", "visudo", "hostnamectl", "timedatectl", "hwclock", "modprobe",
    "insmod", "rmmod",
)  # fmt: skip
_ALWAYS = {
    **dict.fromkeys(("pkill", "killall", "killall5", "skill", "slay"), "killing processes by name"),
    **dict.fromkeys(("shutdown", "reboot", "halt", "poweroff", "init", "telinit"), "power"),
    **dict.fromkeys(("shred", "wipefs", "mkswap", "blkdiscard", "truncate"), "wiping data"),
    **dict.fromkeys(("fdisk", "sfdisk", "cfdisk", "gdisk", "sgdisk", "parted"), "partitioning"),
    **dict.fromkeys(_DISK_TOOLS, "disks and file systems"),
    **dict.fromkeys(_ADMIN_TOOLS, "system administration"),
}
_SYSTEMCTL_STOPS = frozenset(
    {"stop", "disable", "mask", "kill", "poweroff", "reboot", "isolate", "halt", "restart"}
    | {"suspend", "hibernate", "kexec", "emergency", "rescue", "default", "try-restart"}
)
_REMOVE_ITEM = frozenset({"remove-item", "del", "erase", "rd", "ri", "rmdir"})
"""PowerShell's names for Remove-Item (-Recurse), where bash.exe or pwsh may run them."""
_RSYNC_DELETES = (
    "--delete", "--delete-before", "--delete-during", "--delete-delay", "--delete-after",
    "--delete-excluded", "--delete-missing-args", "--remove-source-files", "--del",
)  # fmt: skip
_WRITES_OPERANDS = frozenset(
    {"rm", "rmdir", "unlink", "touch", "mkdir", "mv", "ln", "tee", "chmod", "chown", "chgrp"}
    | {"mkfifo", "mknod", "curl", "wget", "link"}
)
"""Programs whose every argument may name a file they write, remove or link to."""
_QUOTES = re.compile(r"[\'\"\\]")
_UNRESOLVED_DANGER = frozenset(
    {"rm", "git", "chmod", "dd", "find", "shred", "mkfs", "kill", "systemctl", "service"}
    | {"rsync", "tar", "zip", "crontab"}
)
"""Programs whose arguments, when only known at run time, make them dangerous."""
DANGER_PROGRAMS = (
    frozenset({"rm", "git", "chmod", "chown", "chgrp", "dd", "find", "mkfs", "kill"})
    | frozenset({"systemctl", "service", "rsync", "tar", "zip", "crontab", "cp", "install"})
    | frozenset({"ip", "sysctl", "setfacl", "pip", "pip3", "npm", "pnpm", "yarn"})
    | frozenset(_ALWAYS)
    | _WRITES_OPERANDS
)
"""Programs the detector looks for, also in the arguments of programs it does not know."""


def program_danger(
    prog: str, args: list[str | None], stdin_args: bool = False, texts: list[str] | None = None
) -> str | None:
    """Why ``prog`` with ``args`` (written as ``texts``) is dangerous, or None."""
    if stdin_args and prog in DANGER_PROGRAMS:
        return f"xargs passes the arguments it reads to {prog}"
    if prog in _UNRESOLVED_DANGER and any(a is None for a in args):
        return f"the arguments of {prog} cannot be resolved"
    known = [a for a in args if a is not None]
    if prog in _WRITES_OPERANDS or prog in ("cp", "install", "rsync", "scp", "dd", "sed"):
        # A glob is checked by its text: cp x ~/.bash* writes outside as surely as ~/.bashrc.
        shown = texts if texts is not None and len(texts) == len(args) else []
        pairs = zip(args, shown, strict=False)
        known = [a if a is not None else _QUOTES.sub("", t) for a, t in pairs] or known
    if prog == "git":
        return git_danger([a for a in git_arguments(args) if a is not None])
    if prog.startswith("mkfs"):
        return "mkfs"
    if prog in _ALWAYS:
        return f"{prog} ({_ALWAYS[prog]})"
    return _deletes(prog, known) or _stops(prog, known) or _writes_outside(prog, known)


def _deletes(prog: str, args: list[str]) -> str | None:
    if prog == "rm" and has_option(args, "rR", ("--recursive", "--no-preserve-root")):
        return "recursive rm"
    if prog in _REMOVE_ITEM and any(a.lower().startswith(("-r", "/s")) for a in args):
        return f"recursive {prog} (PowerShell's Remove-Item)"
    if prog == "chmod":
        opened = next((a for a in args if opens_mode(a)), None)
        if opened is not None or any(a.startswith("--reference") for a in args):
            return f"chmod {opened or '--reference'} (world-writable, setuid or setgid, as 777)"
    if prog in ("chmod", "chown", "chgrp") and has_option(args, "R", ("--recursive",)):
        return f"recursive {prog}"
    if prog == "dd" and any(a.startswith(("if=", "of=")) for a in args):
        return "dd if="
    if prog == "find" and "-delete" in args:
        return "find -delete"
    if prog == "rsync" and (
        has_option(args, "", _RSYNC_DELETES) or any(a.startswith("--del") for a in args)
    ):
        return "rsync that deletes files"
    if prog == "tar" and has_option(args, "", ("--remove-files",)):
        return "tar --remove-files"
    if prog == "zip" and has_option(args, "m", ("--move",)):
        return "zip -m (moves files into the archive)"
    if prog == "crontab" and not (has_option(args, "l") and not has_option(args, "reie")):
        return "crontab that replaces or removes the crontab"
    return None


def opens_mode(word: str) -> bool:
    """Whether a chmod mode grants others write, or sets setuid or setgid.

    Octal modes are read as numbers (``00777`` is 777, ``1777`` too); each clause of a
    symbolic mode is read: who (none means all, as the umask may allow), the operator,
    the permissions. Copying another class's bits (``o=u``) counts: they may include w.
    """
    if _OCTAL_MODE.match(word):
        return bool(int(word, 8) & 0o6002)
    if not all(_SYMBOLIC_MODE.match(clause) for clause in word.split(",")):
        return False
    for clause in word.split(","):
        who = re.match(r"^[ugoa]*", clause)
        people = set(who.group() if who else "") or set("a")
        for op, perms in re.findall(r"([-+=])([rwxXstugo]*)", clause):
            if op == "-":
                continue
            others = bool(people & set("oa"))
            if others and (set(perms) & set("wugo")):
                return True
            if people & set("uga") and "s" in perms:
                return True
    return False


def _stops(prog: str, args: list[str]) -> str | None:
    if prog == "kill":
        rest = args[2:] if args[:1] in (["-s"], ["-n"]) else args[1:] if args[:1] else []
        signal_given = bool(args) and args[0].startswith("-") and args[0] != "--"
        pids = rest if signal_given else args
        if "-1" in args or any(p.startswith("-") or p in ("0", "1") for p in pids if p != "--"):
            return "kill of every process or a process group"
    if prog == "systemctl":
        # Any word: options such as -H HOST take values, so the verb is not always first.
        sub = next((a for a in args if a in _SYSTEMCTL_STOPS), None)
        if sub is not None:
            return f"systemctl {sub}"
    if prog == "service" and len(args) >= 2 and args[1] in ("stop", "restart", "force-reload"):
        return f"service {args[1]}"
    if prog == "ip" and {"set", "add", "del", "delete", "flush", "change", "replace"} & set(args):
        return "ip changes the network"
    if prog == "sysctl" and (has_option(args, "wp", ("--write", "--load")) or _assigns(args)):
        return "sysctl changes the kernel"
    if prog == "date" and has_option(args, "s", ("--set",)):
        return "date --set changes the clock"
    if prog == "setfacl" and has_option(args, "R", ("--recursive",)):
        return "recursive setfacl"
    return None


def _assigns(args: list[str]) -> bool:
    return any("=" in a and not a.startswith("-") for a in args)


def _outputs(prog: str, args: list[str]) -> list[str]:
    """The words that name what a program writes (every word, for rm, mv, ln...)."""
    if prog in _WRITES_OPERANDS:
        return args
    if prog in ("cp", "install", "rsync", "scp"):
        targets = [a.split("=", 1)[1] for a in args if a.startswith("--target-directory=")]
        targets += [args[i + 1] for i, a in enumerate(args[:-1]) if a == "-t"]
        found = [o for o in operands(args, takes_value="tSmogeB") if o is not None]
        remote = [o for o in found[-1:] if prog in ("rsync", "scp") and ":" in o]
        return targets + (found[-1:] if not remote else [])
    if prog == "dd":
        return [a for a in args if a.startswith("of=")]
    if prog in ("pip", "pip3") and has_option(args, "t", ("--target", "--prefix", "--root")):
        return args  # the directory is an option's value: every word is checked
    if prog in ("pip", "pip3") and "--user" in args:
        return ["~/.local"]
    if prog in ("npm", "pnpm", "yarn") and has_option(args, "g", ("--global",)):
        return ["~/global packages"]
    if prog == "sed" and has_option(args, "i", ("--in-place",)):
        given = has_option(args, "ef", ("--expression", "--file"))
        found = [o for o in operands(args, takes_value="efl") if o is not None]
        return found if given else found[1:]
    spec = PROGRAMS.get(prog)
    if spec is not None and spec.allows(args):
        return []  # only reads (a read outside the workspace asks as not read-only)
    # Any other program may write where any argument or option value points
    # (pytest --basetemp=DIR wipes DIR, --junitxml=F writes F): nothing outside passes.
    return args


def _writes_outside(prog: str, args: list[str]) -> str | None:
    outside = next((w for w in _outputs(prog, args) if names_outside(w)), None)
    if outside is not None:
        return f"{prog} may write or link outside the workspace ({outside})"
    return None


def git_danger(args: list[str]) -> str | None:
    """Git subcommands that rewrite or delete history or discard uncommitted work."""
    sub, rest = (args[0], args[1:]) if args else ("", [])
    if sub == "push" and (
        has_option(rest, "fd", ("--force", "--force-with-lease", "--delete", "--mirror", "--prune"))
        or any(a.startswith("--force") for a in rest)
        or any(a.startswith("+") or (a.startswith(":") and len(a) > 1) for a in rest)
    ):
        return "git push that rewrites or deletes remote history"
    if sub == "clean" and has_option(rest, "f", ("--force",)):
        return "git clean -f"
    if sub == "reset" and has_option(rest, "", ("--hard", "--merge", "--keep")):
        return "git reset --hard"
    if sub == "checkout" and (
        "--" in rest
        or "." in rest
        or has_option(rest, "fp", ("--force", "--patch", "--ours", "--theirs", "--merge"))
        or len([a for a in rest if not a.startswith("-")]) > 1 + _creates_branch(rest)
    ):
        return "git checkout that discards uncommitted changes"
    if sub == "clone":
        found = [o for o in operands(rest, "objuc", ("--origin", "--branch", "--depth")) if o]
        if len(found) > 1 and names_outside(found[1]):
            return f"git clone outside the workspace ({found[1]})"
    if sub == "checkout-index" and has_option(rest, "f", ("--force",)):
        return "git checkout-index -f"
    if sub == "rm" and has_option(rest, "rf", ("--force",)) and "--cached" not in rest:
        return "git rm -r/-f deletes files"
    if sub == "switch" and has_option(rest, "f", ("--discard-changes", "--force")):
        return "git switch that discards uncommitted changes"
    if sub == "restore" and (
        not has_option(rest, "S", ("--staged",)) or has_option(rest, "W", ("--worktree",))
    ):
        return "git restore that discards uncommitted changes"
    return _git_history_danger(sub, rest)


def _creates_branch(rest: list[str]) -> int:
    """1 when checkout creates a branch (its name is an operand that is not a path)."""
    return int(has_option(rest, "bB", ("--orphan",)))


def _git_history_danger(sub: str, rest: list[str]) -> str | None:
    if sub == "branch" and has_option(rest, "dD", ("--delete",)):
        return "git branch -d/-D deletes a branch"
    if sub == "stash" and rest[:1] in (["drop"], ["clear"]):
        return f"git stash {rest[0]}"
    if sub == "reflog" and rest[:1] in (["expire"], ["delete"]):
        return f"git reflog {rest[0]}"
    if sub == "gc" and has_option(rest, "", ("--prune",)):
        return "git gc --prune"
    if sub in ("prune", "filter-branch", "filter-repo"):
        return f"git {sub}"
    if sub == "update-ref" and has_option(rest, "d", ("--stdin",)):
        return "git update-ref -d"
    if sub == "worktree" and rest[:1] == ["remove"] and has_option(rest[1:], "f", ("--force",)):
        return "git worktree remove --force"
    return None
