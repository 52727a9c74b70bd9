"""Faults as data: what each kind changes, in which namespace, and the rules no-masquerade removes."""

from __future__ import annotations

from pathlib import Path

from kpemu.kernel.drops import bpf_program
from kpemu.kernel.faults import rules_to_delete
from kpemu.model import load_topology
from kpemu.model.scenario import Fault
from kpemu.model.topology import Topology
from kpemu.plan.faults import plan_fault

ROOT = Path(__file__).resolve().parents[2]


def _topo() -> Topology:
    return load_topology(ROOT / "topologies" / "flannel-vxlan.yaml")


def test_each_fault_is_a_change_inside_one_lab_namespace() -> None:
    topo = _topo()
    mtu = plan_fault(topo, Fault(kind="mtu-mismatch", node="node2", mtu=1400))
    assert (mtu.netns, mtu.commands) == ("kp-flannel-node2", (("ip", "link", "set", "dev", "eth0", "mtu", "1400"),))
    rp = plan_fault(topo, Fault(kind="rp-filter", node="node1", source="10.242.72.0/24"))
    assert rp.commands == (("sysctl", "-q", "-w", "net.ipv4.conf.all.rp_filter=1"),
                           ("sysctl", "-q", "-w", "net.ipv4.conf.eth0.rp_filter=1"),
                           ("ip", "route", "replace", "10.242.72.0/24", "dev", "cni0"))
    br = plan_fault(topo, Fault(kind="no-br-netfilter", node="node1"))
    assert br.commands == (("sysctl", "-q", "-w", "net.bridge.bridge-nf-call-iptables=0"),)
    stale = plan_fault(topo, Fault(kind="stale-rules", pod="web-1"))
    assert (stale.member, stale.netns, stale.commands) == ("web-1", "kp-flannel-web-1",
                                                           (("ip", "address", "flush", "dev", "eth0"),))
    masq = plan_fault(topo, Fault(kind="no-masquerade", node="node1"))
    assert masq.commands == () and masq.delete_rules == ("nat", ("KUBE-POSTROUTING", "FLANNEL-POSTRTG",
                                                                 "cali-nat-outgoing"), "MASQUERADE")
    for step in (mtu, rp, br, stale, masq):
        assert step.netns.startswith("kp-flannel-") and step.change and step.symptom


def test_no_masquerade_removes_exactly_the_masquerade_rules_of_the_named_chains() -> None:
    save = "\n".join([
        "*nat",
        "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN",
        '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE '
        "--random-fully",
        '-A FLANNEL-POSTRTG ! -s 10.244.0.0/16 -d 10.244.0.0/16 -m comment --comment "flanneld masq" -j MASQUERADE',
        "-A POSTROUTING -j MASQUERADE",
        "COMMIT",
    ])
    assert rules_to_delete(save, ("KUBE-POSTROUTING", "FLANNEL-POSTRTG"), "MASQUERADE") == [
        '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE '
        "--random-fully",
        '-A FLANNEL-POSTRTG ! -s 10.244.0.0/16 -d 10.244.0.0/16 -m comment --comment "flanneld masq" -j MASQUERADE']


def test_the_drop_tracer_keeps_only_the_labs_namespaces() -> None:
    prog = bpf_program([4026532313, 4026532382])
    assert "if ($ns == 4026532313 || $ns == 4026532382)" in prog
    assert "tracepoint:skb:kfree_skb /args->protocol == 0x0800/" in prog and "$dp == 8472 || $dp == 4789" in prog
    assert "if (0)" in bpf_program([])
