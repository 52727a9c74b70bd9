"""Guest runtime benchmarks: boot-to-command time of the vm runtime on this machine."""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

from kpemu import vm
from scripts.bench import ROOT

KPEMU = ROOT / ".venv" / "bin" / "kpemu"


def guest_boot() -> list[dict[str, object]]:
    """One guest boot running `true`: boot-to-command (modules loaded) and total wall time."""
    if vm.find_kernel() is None:
        return [{"name": "vm.guest_boot_to_command", "value": "no guest kernel (kpemu vm setup)", "unit": ""}]
    with tempfile.TemporaryDirectory(prefix="kpemu-bench-vm-") as tmp:
        res = vm.boot(["true"], Path(tmp), timeout=300)
    accel = "kvm" if res.kvm else "tcg"
    return [
        {"name": f"vm.guest_boot_to_command.{accel}", "value": round(res.boot_seconds, 2), "unit": "s"},
        {"name": f"vm.guest_total_true.{accel}", "value": round(res.total_seconds, 2), "unit": "s"},
    ]


def _run_in_vm(scenarios: list[str]) -> float:
    """Wall time of `kpemu run SCENARIOS --runtime vm`, as a user runs it (fails loudly if a run fails)."""
    with tempfile.TemporaryDirectory(prefix="kpemu-bench-vm-") as tmp:
        t0 = time.perf_counter()
        subprocess.run([str(KPEMU), "run", *scenarios, "--runtime", "vm", "--out", tmp],
                       check=True, capture_output=True, cwd=ROOT)
        return time.perf_counter() - t0


def guest_scenarios() -> list[dict[str, object]]:
    """One IPVS scenario end to end through the guest, then three in one boot (each adds its own time)."""
    if vm.find_kernel() is None:
        return []
    one = _run_in_vm(["scenarios/nodeport-ipvs.yaml"])
    three = _run_in_vm([f"scenarios/{n}.yaml" for n in ("nodeport-ipvs", "nodeport-ipvs-remote", "hairpin-ipvs")])
    return [{"name": "vm.scenario.nodeport-ipvs.total", "value": round(one, 2), "unit": "s"},
            {"name": "vm.scenarios.three_ipvs_one_boot.total", "value": round(three, 2), "unit": "s"}]


BENCHES = [guest_boot, guest_scenarios]
