"""Recorded processes (the guest): stopped with their whole session by `destroy --all`'s sweep,
never a process that merely reuses a recorded pid."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kpemu import procrecords

# a session leader with a child, like vng and its qemu
TREE = "import subprocess, time; subprocess.Popen(['sleep', '60']); print('up', flush=True); time.sleep(60)"


@pytest.fixture(autouse=True)
def proc_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(procrecords, "PROC_DIR", tmp_path / "proc")
    return tmp_path / "proc"


def _session() -> tuple[subprocess.Popen[str], int]:
    leader = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    assert leader.stdout is not None and leader.stdout.readline() == "up\n"
    child = next(int(p) for p in os.listdir("/proc") if p.isdigit() and _ppid(int(p)) == leader.pid)
    return leader, child


def _ppid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError):
        return -1


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_recorded_session_is_stopped_whole(proc_dir: Path) -> None:
    leader, child = _session()
    record = procrecords.record_process("guest", leader.pid)
    assert record is not None and record.parent == proc_dir
    assert procrecords.stop_recorded() == [f"guest {leader.pid}"]
    leader.wait(timeout=5)
    deadline = time.monotonic() + 5
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _gone(child)
    assert not any(proc_dir.iterdir())


def test_a_reused_pid_is_left_alone(proc_dir: Path) -> None:
    leader, _ = _session()
    try:
        proc_dir.mkdir()
        (proc_dir / str(leader.pid)).write_text("guest 1\n")  # recorded with another start time
        assert procrecords.stop_recorded() == []
        assert leader.poll() is None
        assert not any(proc_dir.iterdir())
    finally:
        os.killpg(leader.pid, 9)
        leader.wait()


def test_forget_drops_the_record() -> None:
    record = procrecords.record_process("guest", os.getpid())
    procrecords.forget(record)
    assert record is not None and not record.exists()
