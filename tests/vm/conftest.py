"""tests/vm: what needs ip_vs, ipip and dummy (IPVS mode, calico tunl0, kube-ipvs0).

They drive the real CLI from here, as users do. Where this kernel has those modules (a normal Linux
host, a GitHub runner) everything runs natively; where it lacks them, one warm guest is booted for
the session (`kpemu vm up`) and every `kpemu run/deploy/exec/inspect/destroy` goes to it, then it is
stopped (`kpemu vm down`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

NEEDED = ("ip_vs", "ipip", "dummy")


@pytest.fixture(scope="session")
def runtime() -> Iterator[str]:
    """"host" when this kernel has IPVS/IPIP/dummy, else "vm" with a warm guest up for the session."""
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces, modules)")
    from kpemu.runtimes import guest, probe_here
    from kpemu.runtimes.kernels import find_kernel

    if not probe_here().missing(NEEDED):
        yield "host"
        return
    assert find_kernel() is not None, "this kernel lacks ip_vs/ipip/dummy and there is no guest kernel: make setup"
    guest.up()
    try:
        yield "vm"
    finally:
        guest.down()
