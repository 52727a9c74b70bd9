"""Program IPVS state into a node namespace: kube-ipvs0, sysctls, virtual and real servers.

Needs the ip_vs and dummy modules (the guest-VM runtime has them; this host does not). Virtual
servers go through pyroute2's IPVS generic-netlink socket opened inside the namespace; the result
is read back with `ipvsadm -Sn` when the tool exists (else a netlink dump) and must equal
`IpvsState.ipvsadm_text()`.
"""

from __future__ import annotations

import errno
import shutil
import socket
import uuid
from collections.abc import Sequence

from pyroute2 import IPVS, IPVSDest, IPVSService
from pyroute2.netlink.exceptions import NetlinkError

from kpemu.errors import ApplyError
from kpemu.kernel import netns as nsmod
from kpemu.kernel.fabric import write_sysctls
from kpemu.kernel.readback import check_readback
from kpemu.plan.types import Sysctl
from kpemu.proxy import ipvsadm_text
from kpemu.proxy.ipvs import DUMMY_DEVICE, IpvsState
from kpemu.proxy.ipvsadm_text import FWD_MASQ, RealServer, VirtualServer

_PROTO = {"TCP": socket.IPPROTO_TCP, "UDP": socket.IPPROTO_UDP, "SCTP": socket.IPPROTO_SCTP}
_PROTO_NAME = {v: k for k, v in _PROTO.items()}


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


def _service(vs: VirtualServer) -> IPVSService:
    return IPVSService(
        addr=vs.address,
        port=vs.port,
        protocol=_PROTO[vs.protocol],
        sched_name=vs.scheduler,
        flags={"flags": vs.flags, "mask": 0xFFFFFFFF},
        timeout=vs.timeout,
    )


def _dest(rs: RealServer) -> IPVSDest:
    return IPVSDest(addr=rs.address, port=rs.port, weight=rs.weight, fwd_method=FWD_MASQ)


def ensure_dummy(ns: str, addresses: Sequence[str]) -> None:
    """Create kube-ipvs0 (left DOWN, as kube-proxy does) and add each address as a /32."""
    ipr = nsmod.open_ipr(ns)
    try:
        if not ipr.link_lookup(ifname=DUMMY_DEVICE):
            ipr.link("add", ifname=DUMMY_DEVICE, kind="dummy")
        idx = ipr.link_lookup(ifname=DUMMY_DEVICE)[0]
        for ip in addresses:
            ipr.addr("add", index=idx, address=ip, prefixlen=32)
    except NetlinkError as e:
        raise ApplyError(f"{ns}: {DUMMY_DEVICE}: {e}") from None
    finally:
        ipr.close()


def add_virtual_servers(ns: str, services: Sequence[VirtualServer]) -> None:
    """Create every virtual server and its real servers through IPVS netlink inside `ns`."""
    sock = IPVS(netns=ns, flags=0)
    try:
        for vs in services:
            svc = _service(vs)
            try:
                sock.service("add", service=svc)
                for rs in vs.real_servers:
                    sock.dest("add", service=svc, dest=_dest(rs))
            except NetlinkError as e:
                raise ApplyError(f"{ns}: IPVS {vs.name}: {e}") from None
    finally:
        sock.close()


def dump_virtual_servers(ns: str) -> list[VirtualServer]:
    """The namespace's IPVS table through netlink (same fields `ipvsadm -Sn` shows)."""
    sock = IPVS(netns=ns, flags=0)
    out: list[VirtualServer] = []
    try:
        for msg in sock.service("dump"):
            svc = IPVSService.from_message(msg)
            flags = svc["flags"]["flags"] & ~0x2  # the kernel always adds IP_VS_SVC_F_HASHED
            key = IPVSService(addr=svc["addr"], port=svc["port"], protocol=svc["protocol"])
            dests = [IPVSDest.from_message(d) for d in sock.dest("dump", service=key)]
            out.append(
                VirtualServer(
                    _PROTO_NAME[svc["protocol"]],
                    svc["addr"],
                    svc["port"],
                    svc["sched_name"],
                    flags,
                    svc["timeout"],
                    tuple(RealServer(d["addr"], d["port"], d["weight"]) for d in dests),
                )
            )
    finally:
        sock.close()
    return out


def ipvs_saved(ns: str) -> str:
    """The IPVS table of `ns` as `ipvsadm -Sn` text (the tool if present, else netlink)."""
    if shutil.which("ipvsadm"):
        res = nsmod.run_in(ns, ["ipvsadm", "-Sn"])
        if res.returncode != 0:
            raise ApplyError(f"{ns}: ipvsadm -Sn failed: {res.stderr.strip()}")
        return ipvsadm_text.canonical_ipvsadm(res.stdout)
    return ipvsadm_text.ipvsadm_save(dump_virtual_servers(ns))


def apply_ipvs(ns: str, state: IpvsState) -> None:
    """kube-ipvs0 + addresses, sysctls, virtual servers; then verify the table read back."""
    ensure_dummy(ns, state.bound_addresses)
    write_sysctls([Sysctl(ns, key, value) for key, value in state.sysctls])
    add_virtual_servers(ns, state.virtual_servers)
    check_readback(f"{ns}: ipvsadm -Sn", state.ipvsadm_text(), ipvs_saved(ns))
