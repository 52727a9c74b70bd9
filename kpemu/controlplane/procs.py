"""The control plane's processes: started so that none outlives kpemu unfound, and stopped.

Each process dies with the kpemu thread that started it (a parent-death SIGKILL), carries kpemu's
owner token in its environment (so `destroy --all` kills it if it ever outlives its owner), and is
recorded in a pid file in the control plane's state directory as `pid:start` (so a reused pid is never
taken for it): `destroy NAME` stops what its lab's pid files name, whoever started it.
The parent-death signal follows the *thread* that started a process: start a control plane from a
thread that lives as long as it should (the main thread), never from a short-lived worker.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from kpemu.kernel.runowner import alive, dies_with_parent, parse_token, token_of


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen
    log: Path
    pidfile: Path

    def running(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n    ".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def start(name: str, argv: list[str], log: Path, pidfile: Path) -> Proc:
    """Start `argv` with its output in `log`, recorded in `pidfile`."""
    with log.open("ab") as out:
        popen = subprocess.Popen(dies_with_parent(argv), stdin=subprocess.DEVNULL, stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True)
    token = token_of(popen.pid)
    pidfile.write_text(f"{token or popen.pid}\n")
    return Proc(name, popen, log, pidfile)


def stop(proc: Proc, grace: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds; the pid file goes."""
    if proc.running():
        proc.popen.terminate()
        try:
            proc.popen.wait(grace)
        except subprocess.TimeoutExpired:
            proc.popen.kill()
            proc.popen.wait()
    proc.pidfile.unlink(missing_ok=True)


def stop_recorded(directory: Path) -> list[str]:
    """SIGKILL every live process a pid file under `directory` names (by its `pid:start` token, so a
    pid reused since is left alone) and wait for it to go; what was killed."""
    killed = []
    for pidfile in sorted(directory.rglob("*.pid")) if directory.is_dir() else []:
        try:
            token = pidfile.read_text().strip()
        except OSError:
            continue
        pid = parse_token(token)
        if pid is not None and alive(token):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed.append(f"{pidfile.stem} (pid {pid})")
            _wait_gone(token)
        pidfile.unlink(missing_ok=True)
    return killed


OWNER_FILE = "owner"  # in a control plane's directory: the token of the kpemu process that started it


def record_owner(directory: Path, token: str) -> None:
    """Record which kpemu process (`pid:start`) uses the control plane in `directory`."""
    (directory / OWNER_FILE).write_text(token + "\n")


def in_use(directory: Path) -> str | None:
    """The token of the live kpemu process that uses a control plane under `directory`, or None."""
    for owner in sorted(directory.rglob(OWNER_FILE)) if directory.is_dir() else []:
        with contextlib.suppress(OSError):
            token = owner.read_text().strip()
            if alive(token):
                return token
    return None


def _wait_gone(token: str, limit: float = 10.0) -> None:
    """Until the process is gone (reaped or a zombie), at most `limit` seconds."""
    deadline = time.monotonic() + limit
    while alive(token) and time.monotonic() < deadline:
        time.sleep(0.02)
