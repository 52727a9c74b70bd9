"""A host that stalls is not a hung guest. QEMU and the kpemu process frozen together past the limit
(a paused or descheduled VM, as CI machines and laptops are), while both cores are kept busy, then
resumed: the run passes in the same guest, with no hang noticed and no retry. (A guest frozen alone
is still found: tests/vm/test_warm_guest_death.py.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import start_kpemu

pytestmark = [pytest.mark.vm, pytest.mark.long]
LIMIT = 10  # KPEMU_HEARTBEAT_LIMIT for the run: the freeze lasts half as long again
FREEZE = 15.0
SPIN = "import time\nend = time.time() + 120\nwhile time.time() < end: pass"  # bounded busy loop


def test_qemu_and_kpemu_frozen_together_past_the_limit_under_load_pass_without_a_retry(
        runtime: str, tmp_path: Path) -> None:
    if runtime != "vm":
        pytest.skip("this kernel runs IPVS natively: no guest to stall")
    from kpemu.runtimes import guest

    qemu = guest.up()["pid"]  # the session's warm guest: vng, the leader of QEMU's session
    busy = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(2)]
    out = tmp_path / "stall"
    try:
        run = start_kpemu("run", "scenarios/nodeport-ipvs.yaml", "--out", str(out), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, env={"KPEMU_HEARTBEAT_LIMIT": str(LIMIT)})
        deadline = time.monotonic() + 300
        while not list((guest.WARM_DIR / "running").glob("*.json")):  # the guest has the request
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()[0]
            time.sleep(0.1)
        os.kill(run.pid, signal.SIGSTOP)  # the whole host side: kpemu, then QEMU's process group
        os.killpg(qemu, signal.SIGSTOP)
        time.sleep(FREEZE)
        os.killpg(qemu, signal.SIGCONT)
        os.kill(run.pid, signal.SIGCONT)
        text, _ = run.communicate(timeout=600)
    finally:
        for b in busy:
            b.kill()
            b.wait()
    flat = " ".join(text.split())
    assert run.returncode == 0, text[-3000:]
    assert "hung" not in flat, text[-3000:]
    hops = json.loads((out / "hops.json").read_text())
    assert hops["ok"] and "hung" not in hops["reason"], hops["reason"]
    assert guest.warm_status() is not None and guest.warm_status()["pid"] == qemu  # the same guest, alive
