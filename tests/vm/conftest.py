"""tests/vm: tests that need ip_vs, ipip and dummy (IPVS mode, calico tunl0, kube-ipvs0).

Where this kernel has them (a normal Linux host, a GitHub runner), or inside the guest, the tests
run natively. Where it lacks them, the individual tests are skipped on the host with the reason,
and one extra item, `tests/vm::guest-kernel`, boots the guest kernel ONCE and runs all the selected
tests/vm tests there (pytest inside the guest); it fails with the guest's output when they fail.
The guest's console, output and junit.xml are kept in runs/vm-tests/.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

VM_DIR = Path(__file__).resolve().parent
NEEDED = ("ip_vs", "ipip", "dummy")
OUT = VM_DIR.parent.parent / "runs" / "vm-tests"


def _guest_reason() -> str | None:
    """None to run natively, else why the tests must run in the guest."""
    from kpemu.kernel.probe import probe
    from kpemu.vm import in_guest

    if in_guest():
        return None
    missing = probe(kvm=False).missing(NEEDED)
    return f"this kernel ({os.uname().release}) lacks {', '.join(missing)}" if missing else None


class GuestTestsFailed(Exception):
    """The tests failed inside the guest; the message is the guest's pytest output."""


class GuestKernelRun(pytest.Item):
    """Runs the selected tests/vm tests inside one guest boot and reports the outcome here."""

    def __init__(self, *, nodeids: list[str], reason: str, **kwargs):
        super().__init__(**kwargs)
        self.nodeids = nodeids
        self.reason = reason

    def runtest(self) -> None:
        from kpemu.vm import run_pytest_in_guest

        res = run_pytest_in_guest(self.nodeids, OUT, timeout=1800, cwd=self.config.rootpath)
        text = res.output_log.read_text(errors="replace")
        self.add_report_section("call", "guest pytest", text)
        if res.rc != 0:
            raise GuestTestsFailed(
                f"tests/vm failed inside the guest kernel (pytest exit {res.rc}; {self.reason}; "
                f"boot {res.boot_seconds:.1f}s, total {res.total_seconds:.1f}s; logs in {OUT}):\n"
                + "\n".join(text.splitlines()[-80:]))

    def repr_failure(self, excinfo, style=None):  # type: ignore[override]
        if isinstance(excinfo.value, GuestTestsFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, f"guest-kernel: {len(self.nodeids)} tests/vm tests in one guest boot"


def _vm_items(items: list[pytest.Item]) -> list[pytest.Item]:
    return [i for i in items if VM_DIR in (p := Path(i.path).resolve()).parents or p.parent == VM_DIR]


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    vm_items = [i for i in _vm_items(items) if not isinstance(i, GuestKernelRun)]
    if not vm_items:
        return
    if os.geteuid() != 0:
        for i in vm_items:
            i.add_marker(pytest.mark.skip(reason="needs root (network namespaces, modules)"))
        return
    reason = _guest_reason()
    if reason is None:
        return
    for i in vm_items:
        i.add_marker(pytest.mark.skip(reason=f"{reason}: runs inside the guest kernel, see tests/vm::guest-kernel"))
    parent = vm_items[0].parent
    while parent is not None and Path(parent.path).resolve() != VM_DIR:
        parent = parent.parent
    item = GuestKernelRun.from_parent(parent or session, name="guest-kernel",
                                      nodeids=[i.nodeid for i in vm_items], reason=reason)
    items.insert(items.index(vm_items[0]), item)
