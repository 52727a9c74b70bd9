"""A guest counts as hung only on evidence that it stopped: silence in which it could have run.

The judgement is pure (samples in, reason out); QEMU's side is read from /proc, here from a real
process stopped and resumed with signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kpemu.hang import Qemu, Sample, Tally, Watch, judge, read_qemu
from kpemu.jobs import exchange

LIMIT, CEILING = 10.0, 100.0
RUNNING = Qemu(False, 0, 0)


def _feed(samples: list[Sample]) -> list[str | None]:
    tally = Tally()
    return [judge(tally, s, LIMIT, CEILING) for s in samples]


def _qemu(t: float, ran_per_s: float, waited_per_s: float, stopped: bool = False) -> Qemu:
    return Qemu(stopped, int(t * ran_per_s * 1e9), int(t * waited_per_s * 1e9))


def test_a_stopped_qemu_is_found_within_the_limit() -> None:
    got = _feed([Sample(t / 10, (1,), _qemu(0, 0, 0, stopped=True)) for t in range(0, 115)])
    assert got[:101] == [None] * 101
    assert got[110] == "its agent gave no sign of life for 11s in which it could run; its QEMU is stopped"


def test_a_guest_that_runs_and_says_nothing_is_hung() -> None:
    got = _feed([Sample(t / 10, (1,), _qemu(t / 10, 1.0, 0.1)) for t in range(0, 115)])
    assert got[110] == "its agent gave no sign of life for 11s in which it could run"


def test_a_host_that_did_not_run_for_a_minute_counts_one_poll() -> None:
    before = [Sample(t / 10, (1,), RUNNING) for t in range(0, 50)]  # 4.9 s of silence
    after = [Sample(65 + t / 10, (1,), RUNNING) for t in range(0, 40)]  # then a 60 s gap, then 3.9 s
    got = _feed(before + after)
    assert got == [None] * 90  # 4.9 + 1 (the gap, capped) + 3.9 < 10


def test_a_guest_starved_of_cpu_is_waited_for_up_to_the_ceiling() -> None:
    got = _feed([Sample(t, (1,), _qemu(t, 0.1, 0.9)) for t in range(0, 105)])
    assert got[:101] == [None] * 101
    assert got[101] == "its agent gave no sign of life for 101s, 101s of them waiting for a CPU"


def test_any_sign_of_life_resets_the_silence() -> None:
    samples = [Sample(t / 10, (1, t // 80), RUNNING) for t in range(0, 300)]  # the console grows every 8 s
    assert _feed(samples) == [None] * 300


def test_before_the_first_beat_there_is_no_silence() -> None:
    assert _feed([Sample(float(t), None, RUNNING) for t in range(0, 60)]) == [None] * 60


def test_qemu_threads_read_from_proc_stopped_running_and_gone() -> None:
    spin = "import time\nend = time.time() + 20\nwhile time.time() < end: pass"  # bounded: 20 s at most
    child = subprocess.Popen([sys.executable, "-c", spin])
    try:
        time.sleep(0.3)
        first = read_qemu(child.pid)
        time.sleep(0.3)
        second = read_qemu(child.pid)
        assert first is not None and second is not None and not second.stopped
        assert second.ran_ns > first.ran_ns  # it burns CPU
        os.kill(child.pid, signal.SIGSTOP)
        time.sleep(0.2)
        stopped = read_qemu(child.pid)
        time.sleep(0.3)
        still = read_qemu(child.pid)
        assert stopped is not None and stopped.stopped and still is not None and still.ran_ns == stopped.ran_ns
        os.kill(child.pid, signal.SIGCONT)
    finally:
        child.kill()
        child.wait()
    assert read_qemu(child.pid) is None


def test_watch_counts_the_heartbeat_console_and_progress_logs(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KPEMU_HEARTBEAT_LIMIT", "0.3")
    monkeypatch.delenv("KPEMU_SLOWDOWN", raising=False)
    watch = Watch(tmp_path)  # no QEMU shares tmp_path: every silent poll counts
    assert watch() is None  # no agent yet
    (tmp_path / exchange.HEARTBEAT).touch()
    log = tmp_path / exchange.WORK / "r1" / "log"
    log.parent.mkdir(parents=True)
    for _ in range(6):  # the heartbeat stands still, but the progress log grows
        log.write_text(log.read_text() + "step\n" if log.exists() else "step\n")
        assert watch() is None
        time.sleep(0.1)
    for _ in range(5):
        watch()
        time.sleep(0.1)
    assert watch() == "its agent gave no sign of life for 1s in which it could run"


def test_the_kernel_reporting_its_own_stall_on_the_console_is_no_sign_of_life(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A wedged guest kernel prints RCU stall reports for as long as it is wedged: those console lines
    are the kernel's, not the agent's; a console line of the guest's own still counts."""
    monkeypatch.setenv("KPEMU_HEARTBEAT_LIMIT", "0.3")
    monkeypatch.delenv("KPEMU_SLOWDOWN", raising=False)
    watch = Watch(tmp_path)
    (tmp_path / exchange.HEARTBEAT).touch()
    console = tmp_path / "guest-console.log"
    stall = (b"[  132.829600] rcu: INFO: rcu_preempt self-detected stall on CPU\n"
             b"[  788.529543] R13: 0000000000000002 R14: 0000000000000000 R15: 0000559ddbbfeab0\n")
    verdicts = []
    for _ in range(12):
        with console.open("ab") as f:
            f.write(stall)
        verdicts.append(watch())
        time.sleep(0.1)
    assert verdicts[-1] == "its agent gave no sign of life for 1s in which it could run"
    alive = Watch(tmp_path)
    for i in range(12):
        with console.open("ab") as f:
            f.write(f"agent: step {i}\n".encode())
        assert alive() is None
        time.sleep(0.1)
