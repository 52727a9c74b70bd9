"""IPVS apply (kube-ipvs0, sysctls, virtual servers) in a throwaway namespace; needs ip_vs + dummy.

Self-contained: creates and deletes its own kp-h2-* namespaces. Skips with the probe's reason
when the kernel has no IPVS (the conftest then runs it inside the guest kernel).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kpemu.errors import ApplyError
from kpemu.kernel import netns as nsmod
from kpemu.kernel.ipvs import apply_ipvs, dump_virtual_servers, ipvs_saved, ipvs_unavailable_reason
from kpemu.kernel.readback import check_readback
from kpemu.model import load_topology
from kpemu.proxy.ipvs import DUMMY_DEVICE, ipvs_rules
from kpemu.proxy.ipvsadm_text import ipvsadm_save
from tests.conftest import TOPOLOGIES


@pytest.fixture(scope="module")
def ipvs_ok() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    reason = ipvs_unavailable_reason("kp-h2-probe-")
    if reason:
        pytest.skip(reason)


@pytest.fixture
def ns(ipvs_ok: None) -> Iterator[str]:
    name = f"kp-h2-{uuid.uuid4().hex[:8]}"
    nsmod.create_netns(name)
    try:
        yield name
    finally:
        nsmod.delete_netns(name)


@pytest.mark.parametrize("version", ["1.15", "1.20", "1.33"])
def test_seed_000_ipvs_state_reads_back(ns: str, version: str) -> None:
    topo = load_topology(TOPOLOGIES / "calico-ipip.yaml")
    topo = topo.model_copy(update={"kubeProxy": topo.kubeProxy.model_copy(update={"version": version})})
    state = ipvs_rules(topo, "node1")
    apply_ipvs(ns, state)  # raises ApplyError when `ipvsadm -Sn` differs
    assert ipvs_saved(ns) == state.ipvsadm_text()
    assert ipvsadm_save(dump_virtual_servers(ns)) == state.ipvsadm_text()  # netlink read-back too
    assert "-A -t 10.246.198.17:30080 -s rr\n-a -t 10.246.198.17:30080 -r 192.168.97.10:80 -m -w 1\n" in (
        state.ipvsadm_text()
    )
    ipr = nsmod.open_ipr(ns)
    try:
        link = ipr.get_links(ifname=DUMMY_DEVICE)[0]
        assert not link["flags"] & 1  # IFF_UP: kube-proxy leaves kube-ipvs0 down
        addrs = sorted(a.get_attr("IFA_ADDRESS") for a in ipr.get_addr(index=link["index"]))
        assert all(a["prefixlen"] == 32 for a in ipr.get_addr(index=link["index"]))
    finally:
        ipr.close()
    assert addrs == sorted(state.bound_addresses)
    with nsmod.inside(ns):
        assert Path("/proc/sys/net/ipv4/vs/conntrack").read_text().strip() == "1"


def test_persistence_reads_back(ns: str) -> None:
    topo = load_topology(TOPOLOGIES / "calico-ipip.yaml")
    svcs = [s.model_copy(update={"sessionAffinity": "ClientIP"}) if s.name == "nginx" else s for s in topo.services]
    state = ipvs_rules(topo.model_copy(update={"services": svcs}), "node1")
    apply_ipvs(ns, state)
    assert "-A -t 192.168.96.165:80 -s rr -p 10800\n" in ipvs_saved(ns)


def test_mismatch_is_an_apply_error(ns: str) -> None:
    state = ipvs_rules(load_topology(TOPOLOGIES / "calico-ipip.yaml"), "node1")
    apply_ipvs(ns, state)
    gone = nsmod.run_in(ns, ["ipvsadm", "-d", "-t", "10.246.198.17:30080", "-r", "192.168.97.10:80"])
    assert gone.returncode == 0, gone.stderr
    with pytest.raises(ApplyError, match=re.escape("expected '-a -t 10.246.198.17:30080 -r 192.168.97.10:80 -m -w 1'")):
        check_readback(f"{ns}: ipvsadm -Sn", state.ipvsadm_text(), ipvs_saved(ns))
    with pytest.raises(ApplyError, match=r"kube-ipvs0: .*File exists"):
        apply_ipvs(ns, state)  # applying twice is refused, not silently merged
