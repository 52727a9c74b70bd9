"""Named network namespaces in one process: create, delete, list, open netlink in, run in.

Namespaces are created the way `ip netns add` does (unshare + bind mount under /run/netns) but
without forking, and netlink sockets are opened inside a namespace by switching this thread into
it for the duration of the socket() call. The root namespace is only ever switched back to.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pyroute2 import IPRoute
from pyroute2 import netns as _netns

RUN_DIR = Path("/run/netns")


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
    """Create a named namespace; FileExistsError if it already exists."""
    if (RUN_DIR / name).exists():
        raise FileExistsError(f"network namespace {name} already exists")
    _netns.pushns()
    try:
        _netns._create(name)
    finally:
        _netns.popns()


def delete_netns(name: str) -> bool:
    """Kill the processes inside `name`, then unmount and remove it. False if it did not exist."""
    if not (RUN_DIR / name).exists():
        return False
    kill_processes_in(name)
    _netns.remove(name)
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


@contextlib.contextmanager
def inside(name: str) -> Iterator[None]:
    """Switch this thread into namespace `name`, and back to where it was afterwards."""
    _netns.pushns(name)
    try:
        yield
    finally:
        _netns.popns()


def open_ipr(name: str) -> IPRoute:
    """An IPRoute whose netlink socket lives in namespace `name`."""
    with inside(name):
        return IPRoute()


def setns_preexec(name: str) -> Callable[[], None]:
    """A subprocess preexec_fn that enters namespace `name` (the child only)."""

    def enter() -> None:
        _netns.setns(name, flags=0)

    return enter


def run_in(name: str, argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """subprocess.run inside namespace `name` (text mode, output captured unless overridden)."""
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    return subprocess.run(list(argv), preexec_fn=setns_preexec(name), **kwargs)


def output_in(name: str, argv: Sequence[str], timeout: float = 10.0) -> str:
    """stdout of a short command inside `name`, or a `# ... failed` comment line when it did not work:
    for snapshots, which must never stop a run."""
    try:
        res = run_in(name, argv, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as e:
        return f"# {' '.join(argv)} failed: {e}\n"
    if res.returncode != 0:
        return f"# {' '.join(argv)} exited {res.returncode}: {res.stderr.strip()}\n"
    return res.stdout


def popen_in(name: str, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """subprocess.Popen inside namespace `name`."""
    return subprocess.Popen(list(argv), preexec_fn=setns_preexec(name), **kwargs)
