"""Guest runtime benchmarks: boot-to-command time of the vm runtime on this machine."""

from __future__ import annotations

import tempfile
from pathlib import Path

from kpemu import vm


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


def guest_python_import() -> list[dict[str, object]]:
    """Cost of starting kpemu's Python inside the guest (imports over 9p in the guest's view)."""
    if vm.find_kernel() is None:
        return []
    with tempfile.TemporaryDirectory(prefix="kpemu-bench-vm-") as tmp:
        res = vm.boot(["sh", "-c", "t0=$(date +%s.%N); python3 -c 'import kpemu.cli, pyroute2, pytest' >/dev/null;"
                       " t1=$(date +%s.%N); echo \"$t1 - $t0\" | bc 2>/dev/null || awk \"BEGIN{print $t1-$t0}\""],
                      Path(tmp), timeout=300)
        text = (Path(tmp) / "guest-output.log").read_text().strip().splitlines()
    try:
        value = round(float(text[-1]), 2)
    except (IndexError, ValueError):
        value = float("nan")
    return [{"name": "vm.guest_python_import_kpemu_pyroute2_pytest", "value": value, "unit": "s"},
            {"name": "vm.guest_total_python_import", "value": round(res.total_seconds, 2), "unit": "s"}]


BENCHES = [guest_boot, guest_python_import]
