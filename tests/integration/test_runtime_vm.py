"""The vm runtime through the real CLI: one guest boot, exit code, logs; and its exit-3 failures.

Runs on the host (never inside the guest: no nested QEMU). Boots the real guest kernel.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kpemu.kernel.probe import GUEST_FEATURES
from kpemu.runtimes import in_guest, probe_here
from kpemu.runtimes.kernels import GuestKernel, find_kernel
from kpemu.runtimes.qemu import guest_running
from tests.helpers import kpemu, needs_root, start_kpemu

pytestmark = [
    needs_root,
    pytest.mark.skipif(in_guest(), reason="already inside the guest (no nested QEMU)"),
]


@pytest.fixture(scope="module")
def guest_kernel() -> GuestKernel:
    k = find_kernel()
    if k is None and not probe_here().missing(GUEST_FEATURES):
        pytest.skip("no guest kernel, and this kernel does not need one (kpemu vm setup to get one)")
    assert k is not None, "no guest kernel although this kernel lacks ip_vs/ipip/dummy: run make setup"
    return k


@pytest.mark.long  # ~12 s: `make test` stays under 10 minutes; .ci/run runs test-long too
def test_vm_exec_boots_runs_and_propagates_exit_code(tmp_path: Path, guest_kernel: GuestKernel) -> None:
    out = tmp_path / "out"
    r = kpemu("vm", "exec", "--out", str(out), "--", "sh", "-c",
              "echo kernel=$(uname -r) in_guest=$KPEMU_IN_GUEST; ls /sys/class/net; "
              "grep -qw ip_vs /proc/modules && echo ip_vs-loaded; echo written > \"$0\"; exit 7",
              str(out / "from-guest.txt"))
    assert r.returncode == 7, r.stdout + r.stderr
    assert f"kernel={guest_kernel.version} in_guest=1" in r.stdout  # the guest's output reaches our stdout
    assert "ip_vs-loaded" in r.stdout
    assert sorted(r.stdout.split("in_guest=1")[1].split("ip_vs-loaded")[0].split()) <= ["lo", "tunl0"], \
        "the guest must have no network device"
    assert (out / "from-guest.txt").read_text() == "written\n"  # the out dir is shared read-write
    console = (out / "guest-console.log").read_text()
    assert f"Linux version {guest_kernel.version}" in console  # console kept in the log ...
    assert "Linux version" not in r.stdout + r.stderr  # ... not on the terminal
    assert "boot-to-command" in r.stderr


def test_missing_qemu_is_exit_3(tmp_path: Path) -> None:
    r = kpemu("vm", "exec", "--out", str(tmp_path), "--", "true", env={"KPEMU_QEMU": "/nonexistent/qemu"})
    assert r.returncode == 3, r.stderr
    assert "QEMU" in r.stderr and "fix:" in r.stderr


def test_missing_guest_kernel_is_exit_3(tmp_path: Path) -> None:
    if any(Path("/boot").glob("vmlinuz-*")):
        pytest.skip("/boot has kernels that could serve as guest kernels")
    r = kpemu("vm", "exec", "--out", str(tmp_path), "--", "true", env={"KPEMU_CACHE": str(tmp_path / "empty")})
    assert r.returncode == 3, r.stderr
    assert "no guest kernel" in r.stderr and "make setup" in r.stderr  # the fix, worded for a checkout


def test_boot_timeout_is_exit_3_with_console_tail(tmp_path: Path, guest_kernel: GuestKernel) -> None:
    r = kpemu("vm", "exec", "--out", str(tmp_path), "--", "true", env={"KPEMU_BOOT_TIMEOUT": "1.5"})
    assert r.returncode == 3, r.stdout + r.stderr
    assert "did not boot within 2s" in r.stderr
    assert "console" in r.stderr and (tmp_path / "guest-console.log").exists()
    assert not [ln for ln in subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True,
                                            check=False).stdout.split()], "qemu left running after the timeout"


@pytest.mark.long  # ~12 s: `make test` stays under 10 minutes; .ci/run runs test-long too
def test_a_guest_dies_with_the_kpemu_that_started_it(tmp_path: Path, guest_kernel: GuestKernel) -> None:
    """SIGKILL the kpemu process of a cold guest: its QEMU goes too, and the guest lock is free again."""
    import signal
    import time

    from kpemu.runtimes.guest import stray_guests

    out = tmp_path / "out"
    proc = start_kpemu("vm", "exec", "--out", str(out), "--", "sleep", "600", stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not (out / ".kpemu-guest-started").exists() and time.monotonic() < deadline:
        time.sleep(0.2)  # the guest runs the command: QEMU is up and holds the lock
    assert (out / ".kpemu-guest-started").exists(), "the guest did not start"
    assert stray_guests(), "no process holds the guest lock while the guest runs"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 30
    while stray_guests() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not stray_guests(), "QEMU outlived the kpemu process that started it"
    assert not guest_running()  # the lock is free: a new run does not wait
