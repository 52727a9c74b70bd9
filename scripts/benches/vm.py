"""Guest runtime benchmarks, in one run: the floor (`kpemu vm exec -- true`), the headline
(`kpemu run scenarios/nodeport-ipvs.yaml`) with a cold guest and with a warm one, their ratios to the
floor, and `make scenarios`' guest scenarios with a warm guest. Whole commands, as users type them."""

from __future__ import annotations

import statistics
import subprocess
import tempfile
import time

from kpemu.runtimes import guest
from kpemu.runtimes.kernels import find_kernel
from kpemu.runtimes.qemu import kvm_usable
from scripts.bench import ROOT

KPEMU = ROOT / ".venv" / "bin" / "kpemu"
RUNS = 3
GUEST_SCENARIOS = ("nodeport-ipvs", "nodeport-ipvs-remote", "hairpin-ipvs")


def _seconds(*args: str) -> float:
    """Wall time of one `kpemu ARGS` (raises when it fails: a failed run is no figure)."""
    t0 = time.perf_counter()
    res = subprocess.run([str(KPEMU), *args], capture_output=True, text=True, cwd=ROOT, timeout=900, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"kpemu {' '.join(args)} exited {res.returncode}: {(res.stdout + res.stderr)[-1500:]}")
    return time.perf_counter() - t0


def _median(*args: str) -> float:
    return statistics.median(_seconds(*args) for _ in range(RUNS))


def guest_headline() -> list[dict[str, object]]:
    """Floor, cold and warm headline (medians of 3), ratios to the floor; then the guest scenarios warm."""
    if find_kernel() is None:
        return [{"name": "vm.floor", "value": "no guest kernel (kpemu vm setup)", "unit": ""}]
    guest.down()
    with tempfile.TemporaryDirectory(prefix="kpemu-bench-vm-") as tmp:
        floor = _median("vm", "exec", "--out", tmp, "--", "true")
        cold = _median("run", "scenarios/nodeport-ipvs.yaml", "--runtime", "vm", "--out", f"{tmp}/cold")
        guest.up()
        try:
            warm = _median("run", "scenarios/nodeport-ipvs.yaml", "--runtime", "vm", "--out", f"{tmp}/warm")
            several = _seconds("run", *(f"scenarios/{n}.yaml" for n in GUEST_SCENARIOS), "--runtime", "vm",
                               "--out", f"{tmp}/several")
        finally:
            guest.down()
    accel = "kvm" if kvm_usable(kernel=find_kernel().vmlinuz)[0] else "tcg"  # type: ignore[union-attr]
    return [
        {"name": f"vm.{accel}.floor_vm_exec_true", "value": round(floor, 2), "unit": "s"},
        {"name": f"vm.{accel}.headline_cold", "value": round(cold, 2), "unit": "s"},
        {"name": f"vm.{accel}.headline_warm", "value": round(warm, 2), "unit": "s"},
        {"name": f"vm.{accel}.headline_cold_vs_floor", "value": round(cold / floor, 2), "unit": "x"},
        {"name": f"vm.{accel}.headline_warm_vs_floor", "value": round(warm / floor, 2), "unit": "x"},
        {"name": f"vm.{accel}.three_guest_scenarios_warm", "value": round(several, 2), "unit": "s"},
    ]


BENCHES = [guest_headline]
