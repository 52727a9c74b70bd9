"""Faults as data: what each kind changes, in which namespace, and the rules no-masquerade removes."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kpemu.kernel.btf import FIELDS, VMLINUX, BtfError, member_offsets
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


OFFSETS = {"skb_dev": 16, "skb_head": 192, "skb_nh": 180, "skb_len": 112, "dev_net": 264, "dev_ifindex": 224,
           "net_inum": 176}


def test_the_drop_tracer_never_reports_the_root_namespace_and_reads_fields_at_btf_offsets() -> None:
    prog = bpf_program(4026531840, OFFSETS)
    assert "if ($ns != 4026531840)" in prog and "$ns = *(uint32 *)(*(uint64 *)($dev + 264) + 176);" in prog
    assert "$ip = *(uint64 *)($skb + 192) + *(uint16 *)($skb + 180);" in prog
    assert "tracepoint:skb:kfree_skb /args->protocol == 0x0800/" in prog and "$dp == 8472 || $dp == 4789" in prog


def _btf(types: list[bytes], strings: bytes) -> bytes:
    body = b"".join(types)
    return struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, len(body), len(body), len(strings)) + body + strings


def test_member_offsets_look_into_anonymous_unions_and_nested_members() -> None:
    # 1 u32; 2 struct inner {u32 pad; u32 inum}; 3 anonymous union {u32 a; u32 b};
    # 4 struct outer {u64 x; the union; struct inner ns}
    strings = b"\0u32\0inner\0pad\0inum\0a\0b\0outer\0x\0ns\0"
    off = {w: strings.index(w.encode() + b"\0") for w in ("u32", "inner", "pad", "inum", "a", "b", "outer", "x", "ns")}
    t = [struct.pack("<IIII", off["u32"], 1 << 24, 4, 32),
         struct.pack("<III", off["inner"], (4 << 24) | 2, 8) + struct.pack("<III", off["pad"], 1, 0)
         + struct.pack("<III", off["inum"], 1, 32),
         struct.pack("<III", 0, (5 << 24) | 2, 4) + struct.pack("<III", off["a"], 1, 0)
         + struct.pack("<III", off["b"], 1, 0),
         struct.pack("<III", off["outer"], (4 << 24) | 3, 24) + struct.pack("<III", off["x"], 1, 0)
         + struct.pack("<III", 0, 3, 64) + struct.pack("<III", off["ns"], 2, 128)]
    got = member_offsets(_btf(t, strings), {"b": ("outer", "b"), "inum": ("outer", "ns.inum")})
    assert got == {"b": 8, "inum": 20}
    with pytest.raises(BtfError, match="no member nope in struct outer"):
        member_offsets(_btf(t, strings), {"x": ("outer", "nope")})


@pytest.mark.skipif(not VMLINUX.exists(), reason="this kernel exposes no BTF")
def test_this_kernels_btf_has_every_field_the_drop_tracer_reads() -> None:
    got = member_offsets(VMLINUX.read_bytes(), FIELDS)
    assert set(got) == set(FIELDS) and all(0 <= v < 4096 for v in got.values())
