"""A warm guest that dies mid-run: the run fails with exit 3 and says why, and the next run boots a fresh
guest and passes. (Runs last in tests/vm: it kills the session's warm guest.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.vm.conftest import KPEMU, ROOT, kpemu

pytestmark = pytest.mark.vm


def test_qemu_killed_mid_run_fails_clearly_then_a_fresh_guest_passes(runtime: str, tmp_path: Path) -> None:
    if runtime != "vm":
        pytest.skip("this kernel runs IPVS natively: no guest to kill")
    from kpemu import guest

    pid = json.loads((guest.WARM_DIR / guest.GUEST_FILE).read_text())["pid"]
    run = subprocess.Popen([KPEMU, "run", "scenarios/nodeport-ipvs.yaml", "--out", str(tmp_path / "dies")],
                           cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while not list((guest.WARM_DIR / "running").glob("*.json")) and time.monotonic() < deadline:
        time.sleep(0.1)  # the guest has claimed the request: it is mid-run
    os.killpg(pid, signal.SIGKILL)
    out, _ = run.communicate(timeout=300)
    assert run.returncode == 3, out
    assert "the warm guest died during collect (its QEMU exited)" in " ".join(out.split()), out
    assert guest.warm_status() is None  # noticed and forgotten
    again = kpemu("run", "scenarios/nodeport-ipvs.yaml", "--out", str(tmp_path / "again"))
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert "vm: booting" in again.stdout  # a fresh guest
