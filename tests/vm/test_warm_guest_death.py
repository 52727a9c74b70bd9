"""A guest that dies or hangs mid-run. Killed (its QEMU exits): the run fails with exit 3 and says why,
and the dead warm guest is forgotten. Hung (its QEMU frozen, so its agent stops beating): the guest is
killed and the scenario runs again in a fresh guest, once, and passes. (Runs last in tests/vm: it kills
the session's warm guest.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import start_kpemu

pytestmark = pytest.mark.vm


def _mid_run(root: Path, run: subprocess.Popen) -> None:
    """Wait until the guest's agent has claimed the request (the run is in the guest)."""
    deadline = time.monotonic() + 300
    while not list((root / "running").glob("*.json")):
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()[0]
        time.sleep(0.1)


def _qemu_serving(root: Path) -> int:
    """The pid of the QEMU whose guest shares `root`."""
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"qemu-system-x86_64") and any(str(root).encode() in a for a in argv):
            return int(proc.name)
    raise AssertionError(f"no QEMU shares {root}")


def test_qemu_killed_mid_run_fails_clearly(runtime: str, tmp_path: Path) -> None:
    if runtime != "vm":
        pytest.skip("this kernel runs IPVS natively: no guest to kill")
    from kpemu.runtimes import guest

    pid = guest.up()["pid"]  # the session's warm guest (a fresh one if an earlier test's hung)
    run = start_kpemu("run", "scenarios/nodeport-ipvs.yaml", "--out", str(tmp_path / "dies"), stdout=subprocess.PIPE,
                      stderr=subprocess.STDOUT)
    _mid_run(guest.WARM_DIR, run)
    os.killpg(pid, signal.SIGKILL)
    out, _ = run.communicate(timeout=300)
    assert run.returncode == 3, out
    assert "the warm guest died during collect (its QEMU exited)" in " ".join(out.split()), out
    assert guest.warm_status() is None  # noticed and forgotten


@pytest.mark.long
def test_a_hung_guest_is_killed_and_the_run_passes_in_a_fresh_one(runtime: str, tmp_path: Path) -> None:
    if runtime != "vm":
        pytest.skip("this kernel runs IPVS natively: no guest to hang")
    from kpemu.runtimes import guest

    guest.down()  # none is up after the test above; this run boots a cold guest (the default)
    out = tmp_path / "hangs"
    run = start_kpemu("run", "scenarios/nodeport-ipvs.yaml", "--out", str(out), stdout=subprocess.PIPE,
                      stderr=subprocess.STDOUT, env={"KPEMU_HEARTBEAT_LIMIT": "10"})
    _mid_run(out / "guest", run)
    os.kill(_qemu_serving(out / "guest"), signal.SIGSTOP)  # the whole machine stops: no beat, no console
    text, _ = run.communicate(timeout=600)
    flat = " ".join(text.split())
    assert run.returncode == 0, text[-3000:]
    assert "the guest hung (its agent gave no sign of life for 1" in flat, text[-3000:]
    assert "the 1 request(s) it had not answered go to a fresh guest, once" in flat, text[-3000:]
    hops = json.loads((out / "hops.json").read_text())
    assert hops["ok"] and hops["reason"].endswith("; cold guest hung; ran again in a fresh cold guest"), hops["reason"]
    assert (out / "guest-again" / "guest-console.log").exists() and (out / "guest" / "guest-console.log").exists()
