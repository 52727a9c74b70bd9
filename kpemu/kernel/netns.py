"""Named network namespaces in one process: create, delete, list, run in.

Namespaces are created the way `ip netns add` does (unshare + bind mount under /run/netns) but
without forking. To open a socket or start a process inside a namespace, the calling thread
switches into it with setns(2) for the duration of the socket() or fork, then back: a child
inherits its creator's namespace, so no Python code runs between fork and exec (a preexec_fn
does, and is unsafe while other threads run: it failed as "Exception occurred in preexec_fn").
Standard library only at import time (ctypes for setns): this module is loaded in the guest,
where importing pyroute2 takes tens of seconds under software emulation.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import resource
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

RUN_DIR = Path("/run/netns")
CLONE_NEWNET = 0x40000000
MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)


def raise_nofile(needed: int) -> int:
    """Raise this process's RLIMIT_NOFILE soft limit to at least `needed` (and the hard one too when
    privileged and needed, up to fs.nr_open); the soft limit now. It is never lowered."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return soft
    if hard != resource.RLIM_INFINITY and hard < needed:
        with contextlib.suppress(OSError, ValueError):  # not privileged: stay at the hard limit
            nr_open = int(Path("/proc/sys/fs/nr_open").read_text())
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(needed, nr_open), min(needed, nr_open)))
            return min(needed, nr_open)
        needed = hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    return needed


def list_netns(prefix: str = "") -> list[str]:
    """Named namespaces, optionally only those starting with `prefix`."""
    try:
        return sorted(n for n in os.listdir(RUN_DIR) if n.startswith(prefix))
    except FileNotFoundError:
        return []


def netns_exists(name: str) -> bool:
    """Whether the named namespace exists."""
    return (RUN_DIR / name).exists()


def create_netns(name: str) -> None:
    """Create a named namespace (`ip netns add`); FileExistsError if it already exists."""
    if (RUN_DIR / name).exists():
        raise FileExistsError(f"network namespace {name} already exists")
    res = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise OSError(f"ip netns add {name}: {res.stderr.strip()}")


def delete_netns(name: str) -> bool:
    """Kill the processes inside `name`, then unmount and remove it (as `ip netns del`). False if it
    did not exist."""
    path = RUN_DIR / name
    if not path.exists():
        return False
    kill_processes_in(name)
    if _libc.umount2(str(path).encode(), MNT_DETACH) != 0 and ctypes.get_errno() != errno.EINVAL:
        err = ctypes.get_errno()
        raise OSError(err, f"umount {path}: {os.strerror(err)}")
    path.unlink(missing_ok=True)
    return True


def _inode(path: str | Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def pids_in(name: str) -> list[int]:
    """Processes whose network namespace is `name`."""
    target = _inode(RUN_DIR / name)
    if target is None:
        return []
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and _inode(f"/proc/{pid}/ns/net") == target:
            out.append(int(pid))
    return out


def kill_processes_in(name: str, grace: float = 1.0) -> list[int]:
    """SIGTERM every process in the namespace, SIGKILL what is left after `grace` seconds."""
    pids = pids_in(name)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
            time.sleep(0.02)
        pids = [p for p in pids if Path(f"/proc/{p}").exists()]
        if not pids:
            break
    return pids


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextlib.contextmanager
def inside(name: str | None) -> Iterator[None]:
    """Switch this thread into namespace `name` (None: stay), and back to where it was afterwards."""
    here = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        if name is not None:
            target = os.open(RUN_DIR / name, os.O_RDONLY | os.O_CLOEXEC)
            try:
                _setns(target)
            finally:
                os.close(target)
        try:
            yield
        finally:
            _setns(here)
    finally:
        os.close(here)


def run_in(name: str, argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """subprocess.run inside namespace `name` (text mode, output captured unless overridden)."""
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    with inside(name):
        return subprocess.run(list(argv), **kwargs)


def output_in(name: str, argv: Sequence[str], timeout: float = 10.0) -> str:
    """stdout of a short command inside `name`, or a `# ... failed` comment line when it did not work:
    for snapshots, which must never stop a run."""
    return outputs_in([(name, argv)], timeout)[0]


def outputs_in(commands: Sequence[tuple[str, Sequence[str]]], timeout: float = 10.0) -> list[str]:
    """`output_in` for several (namespace, argv) at once, run in parallel: snapshots of many nodes
    take as long as the slowest, not the sum (seconds each in an emulated guest)."""
    procs: list[subprocess.Popen[str] | str] = []
    for name, argv in commands:
        try:
            procs.append(popen_in(name, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        except OSError as e:
            procs.append(f"# {' '.join(argv)} failed: {e}\n")
    out = []
    deadline = time.monotonic() + timeout
    for (_, argv), p in zip(commands, procs, strict=True):
        if isinstance(p, str):
            out.append(p)
            continue
        try:
            stdout, stderr = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            out.append(f"# {' '.join(argv)} failed: timed out after {timeout:g}s\n")
            continue
        out.append(stdout if p.returncode == 0 else f"# {' '.join(argv)} exited {p.returncode}: {stderr.strip()}\n")
    return out


RTM_GETLINK, RTM_NEWLINK, NLMSG_ERROR, NLM_F_REQUEST, IFLA_IFALIAS = 18, 16, 2, 1, 20
LOOPBACK_INDEX = 1  # `lo` is ifindex 1 in every namespace


def loopback_alias(name: str) -> str:
    """The alias (IFLA_IFALIAS) of `lo` in namespace `name`, "" when it has none, asked over one netlink
    socket opened inside it and closed at once (as `ip -n NAME link show lo`, without starting a process:
    removing a lab asks it of every namespace). OSError when the namespace or the answer is not there."""
    with inside(name):
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    with sock:
        sock.settimeout(5.0)
        body = struct.pack("=BxHiII", socket.AF_UNSPEC, 0, LOOPBACK_INDEX, 0, 0)
        sock.send(struct.pack("=IHHII", 16 + len(body), RTM_GETLINK, NLM_F_REQUEST, 1, 0) + body)
        data = sock.recv(1 << 16)
    length, kind = struct.unpack_from("=IH", data)
    if kind != RTM_NEWLINK or length > len(data):
        raise OSError(errno.EIO, f"no answer about lo in {name}")
    at = 32  # nlmsghdr + ifinfomsg
    while at + 4 <= length:
        size, attr = struct.unpack_from("=HH", data, at)
        if size < 4:
            break
        if attr == IFLA_IFALIAS:
            return data[at + 4:at + size].split(b"\0", 1)[0].decode(errors="replace")
        at += (size + 3) & ~3
    return ""


def popen_in(name: str, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """subprocess.Popen inside namespace `name`."""
    with inside(name):
        return subprocess.Popen(list(argv), **kwargs)
