"""Which kpemu process owns a lab, a guest or a helper process, and whether that process still lives.

A process is named by its pid *and* its start time (field 22 of /proc/PID/stat, in clock ticks since
boot), so a pid the kernel has reused since is never taken for the owner. The token `pid:start` is
recorded in a lab's state file, and carried in the environment variable `KPEMU_OWNER` of every
process a kpemu command starts (tcpdump, bpftrace and the tracefs reader, dockerd, a cold guest's
QEMU): the environment is inherited by their children too, and `/proc/PID/environ` keeps it for as
long as the process lives. So a helper that outlived a killed run is found by its token, whatever
it was reparented to, and `destroy --all` kills it; one whose owner lives is left alone.
A helper meant to outlive the command that started it (the warm guest) carries no pid token.
Standard library only: the guest's agent imports this module.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path

ENV = "KPEMU_OWNER"
PROC = Path("/proc")


def start_time(stat: str) -> int | None:
    """The start time (field 22) from the text of /proc/PID/stat, or None for a zombie or bad text (pure).

    The command name (field 2) is in parentheses and may itself hold spaces and parentheses, so the
    fields are counted from the last `)`.
    """
    fields = stat.rpartition(")")[2].split()
    if len(fields) < 20 or fields[0] == "Z" or not fields[19].isdigit():
        return None
    return int(fields[19])


def token_of(pid: int) -> str | None:
    """The token `pid:start` of a running process, or None when it does not run."""
    try:
        start = start_time((PROC / str(pid) / "stat").read_text())
    except OSError:
        return None
    return None if start is None else f"{pid}:{start}"


def my_token() -> str:
    """This process's token."""
    token = token_of(os.getpid())
    assert token is not None  # this process runs
    return token


def parse_token(token: str) -> int | None:
    """The pid of a `pid:start` token, or None when it is not one (pure)."""
    pid, sep, start = token.partition(":")
    return int(pid) if sep and pid.isdigit() and start.isdigit() else None


def alive(token: str) -> bool:
    """Whether the process the token names still runs (the same process: same pid and start time)."""
    pid = parse_token(token)
    return pid is not None and token_of(pid) == token


def dies_with_parent(argv: list[str]) -> list[str]:
    """`argv` under util-linux's setpriv, which sets its parent-death signal to SIGKILL and execs it
    (same pid): the helper dies the moment the kpemu thread that started it does, SIGKILL included.
    Where setpriv is missing, `argv` as it is (destroy --all still finds it by its token)."""
    return ["setpriv", "--pdeathsig", "KILL", "--", *argv] if shutil.which("setpriv") else argv


def adopt() -> str:
    """Mark every process this one starts from now on as this one's (`KPEMU_OWNER`); the token."""
    token = my_token()
    os.environ[ENV] = token
    return token


@dataclass(frozen=True)
class Helper:
    """A process that carries a kpemu owner token."""

    pid: int
    owner: str
    command: str

    def describe(self) -> str:
        return f"{self.command} (pid {self.pid}, started by kpemu pid {parse_token(self.owner)})"


def owner_in_environ(environ: bytes) -> str | None:
    """The `KPEMU_OWNER` value in the NUL-separated text of /proc/PID/environ, or None (pure)."""
    prefix = f"{ENV}=".encode()
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix):].decode(errors="replace")
    return None


def helpers() -> list[Helper]:
    """Every running process (but this one) that carries a pid owner token."""
    found = []
    me = os.getpid()
    for entry in PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            owner = owner_in_environ((entry / "environ").read_bytes())
            if owner is None or parse_token(owner) is None:
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        found.append(Helper(int(entry.name), owner, b" ".join(a for a in argv if a).decode(errors="replace")[:120]))
    return found


def orphans() -> list[Helper]:
    """Helpers whose owner is gone: what a killed kpemu process left running."""
    return [h for h in helpers() if not alive(h.owner)]


def kill_orphans() -> list[Helper]:
    """SIGKILL every orphaned helper; the ones killed."""
    killed = []
    for h in orphans():
        with contextlib.suppress(ProcessLookupError):
            os.kill(h.pid, signal.SIGKILL)
            killed.append(h)
    return killed
