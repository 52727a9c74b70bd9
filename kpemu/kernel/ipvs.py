"""Whether this kernel has IPVS: ask the IPVS generic-netlink family in a throwaway namespace.

(A lab's IPVS state is applied with `ipvsadm -R`, see kpemu.jobs.build.proxy_steps.)
"""

from __future__ import annotations

import errno
import uuid

from pyroute2 import IPVS
from pyroute2.netlink.exceptions import NetlinkError

from kpemu.kernel import netns as nsmod


def ipvs_unavailable_reason(prefix: str = "kp-probe-") -> str | None:
    """None if IPVS works in a fresh namespace; otherwise why not (asks the IPVS genl family)."""
    name = f"{prefix}{uuid.uuid4().hex[:8]}"
    nsmod.create_netns(name)
    try:
        sock = IPVS(netns=name, flags=0)
        try:
            list(sock.service("dump"))
        finally:
            sock.close()
    except NetlinkError as e:
        if e.code == errno.ENOENT:
            return "the kernel has no IPVS (generic netlink family 'IPVS' missing: ip_vs not loaded/built)"
        return f"IPVS netlink error: {e}"
    except OSError as e:
        return f"IPVS netlink socket failed: {e}"
    finally:
        nsmod.delete_netns(name)
    return None
