"""Records of the processes kpemu starts outside any lab namespace (the guest's vng and qemu), so
that `destroy --all` can stop them after the kpemu that started them was killed.

Processes inside a lab's namespaces need no record: removing a namespace kills what runs in it.
A guest runs in the root namespace, in a session of its own; its record, written as soon as it
is started, is `/run/kpemu/labs/proc/<pid>` holding the kind and the process's start time (field
22 of /proc/PID/stat), so a recycled pid is never mistaken for it.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from kpemu.statedir import PROC_DIR


def _start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def record_process(kind: str, pid: int) -> Path | None:
    """Record process `pid` (the leader of its own session) as `kind`; None if it cannot be recorded
    (no write access to the state directory: then nothing can be cleaned up after a kill)."""
    started = _start_time(pid)
    if started is None:
        return None
    with contextlib.suppress(OSError):
        PROC_DIR.mkdir(parents=True, exist_ok=True)
        path = PROC_DIR / str(pid)
        path.write_text(f"{kind} {started}\n")
        return path
    return None


def forget(record: Path | None) -> None:
    """Drop a record once its process has ended (or been stopped by the one who started it)."""
    if record is not None:
        record.unlink(missing_ok=True)


def stop_recorded() -> list[str]:
    """SIGKILL the session of every recorded process still running; remove every record.
    Returns "kind pid" for each process stopped."""
    stopped = []
    for record in sorted(PROC_DIR.iterdir()) if PROC_DIR.is_dir() else []:
        kind, _, started = record.read_text().strip().partition(" ")
        pid = int(record.name) if record.name.isdigit() else 0
        if pid and _start_time(pid) == started:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
                stopped.append(f"{kind} {pid}")
        record.unlink(missing_ok=True)
    return stopped
