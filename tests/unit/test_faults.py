"""Faults as data: what each kind changes, in which namespace, and the rules no-masquerade removes."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kpemu.faults import plan_fault
from kpemu.inputs.topology import load_topology
from kpemu.kernel.btf import FIELDS, VMLINUX, BtfError, member_offsets
from kpemu.kernel.drops import bpf_program
from kpemu.kernel.faults import rules_to_delete
from kpemu.model.scenario import Fault
from kpemu.model.topology import Topology
from tests.helpers import ROOT


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


STALE = """name: flt-t
topology: ../../topologies/flannel-vxlan.yaml
overrides:
  services:
    - {name: dns, clusterIP: 10.96.0.10, selector: {app: dns}, ports: [{name: dns, port: 53, protocol: UDP}]}
  pods:
    - {name: dns-a, node: node2, ip: 10.244.1.5, labels: {app: dns}, ports: [{port: 53, protocol: UDP}]}
    - {name: dns-b, node: node1, ip: 10.244.0.2, labels: {app: dns}, ready: false, ports: [{port: 53, protocol: UDP}]}
    - {name: client-0, node: node1, ip: 10.244.0.3}
faults:
  - {kind: stale-conntrack, pod: dns-a, replacement: dns-b, after: first}
flows:
  - {name: first, from: client-0, to: {service: dns}, sourcePort: 40053}
"""


def _stale_scenario(tmp_path: Path, text: str = STALE):
    from kpemu.inputs.scenario import load_scenario

    d = tmp_path / "scenarios" / "faults"
    d.mkdir(parents=True)
    (tmp_path / "topologies").symlink_to(ROOT / "topologies")
    (d / "s.yaml").write_text(text)
    return load_scenario(d / "s.yaml")


def test_resync_text_keeps_kube_proxys_own_chains_and_deletes_the_chains_that_went_away() -> None:
    from kpemu.faults.stale_conntrack import resync_text

    old = ("*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-A - [0:0]\n:KUBE-SEP-OLD - [0:0]\n"
           "-A KUBE-SVC-A -j KUBE-SEP-OLD\n-I PREROUTING 1 -j KUBE-SERVICES\nCOMMIT\n")
    new = ("*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-A - [0:0]\n:KUBE-SEP-NEW - [0:0]\n"
           "-A KUBE-SVC-A -j KUBE-SEP-NEW\n-I PREROUTING 1 -j KUBE-SERVICES\nCOMMIT\n*mangle\nCOMMIT\n")
    assert resync_text(old, new) == (
        "*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-A - [0:0]\n:KUBE-SEP-NEW - [0:0]\n:KUBE-SEP-OLD - [0:0]\n"
        "-A KUBE-SVC-A -j KUBE-SEP-NEW\n-X KUBE-SEP-OLD\nCOMMIT\n*mangle\nCOMMIT\n")


def test_stale_conntrack_releases_the_pod_and_resyncs_every_node_to_its_replacement(tmp_path: Path) -> None:
    sc = _stale_scenario(tmp_path)
    step = plan_fault(sc.topology, sc.spec.faults[0])
    assert (step.member, step.netns, step.after) == ("dns-a", "kp-flt-t-dns-a", "first")
    assert step.commands == (("ip", "address", "flush", "dev", "eth0"),)
    assert step.elsewhere[0] == ("kp-flt-t-node2", ("ip", "neigh", "flush", "to", "10.244.1.5"), None)
    assert [(ns, argv) for ns, argv, _ in step.elsewhere[1:]] == [
        (f"kp-flt-t-{n}", ("iptables-nft-restore", "--noflush", "--wait")) for n in ("node1", "node2")]
    assert step.rules_changed == ("node1", "node2")
    text = step.elsewhere[1][2]
    assert '-A KUBE-SEP-LG7TWINNC4WCNBB7 -m comment --comment default/dns:dns -m udp -p udp -j DNAT ' \
           '--to-destination 10.244.0.2:53' in text
    assert "-X KUBE-SEP-5T4LYZJN632OWUJO" in text and "10.244.1.5" not in text
    assert not any(ln.startswith("-I ") for ln in text.splitlines())
    # kube-proxy 1.37 (the topology's default): the reconciler, on every node, after the re-sync
    assert step.conntrack == tuple((f"kp-flt-t-{n}", {"reconcile": {
        "frontends": {"10.96.0.10:53": ["10.244.0.2:53"]}, "nodePorts": {}, "endpointPort": True}})
        for n in ("node1", "node2"))
    assert "its reconciler lists the conntrack table through netlink" in step.change
    assert "NEIGH_FAILED" not in step.symptom and "are deleted" in step.symptom


@pytest.mark.parametrize(("version", "tool", "plan", "kept"), [
    ("1.31", True, {"commands": [["conntrack", "-D", "--orig-dst", "10.96.0.10", "--dst-nat", "10.244.1.5", "-p",
                                  "udp"]]}, False),
    ("1.31", False, {"skipped": 'kube-proxy 1.31 logs "Failed to delete endpoint connections" err="error looking for '
                                'path of conntrack: exec: \\"conntrack\\": executable file not found in $PATH"'}, True),
    ("1.32", False, {"reconcile": {"frontends": {"10.96.0.10:53": ["10.244.0.2"]}, "nodePorts": {},
                                   "endpointPort": False}}, False),
])
def test_stale_conntrack_cleans_up_as_the_release_does(tmp_path: Path, version: str, tool: bool,
                                                       plan: dict, kept: bool) -> None:
    """Before 1.32 kube-proxy runs the conntrack tool for the endpoint that went (nothing without it);
    1.32+ reconciles through netlink, tool or not (pkg/proxy/conntrack/cleanup.go at each release)."""
    sc = _stale_scenario(tmp_path)
    kp = sc.topology.kubeProxy.model_copy(update={"version": version})
    f = sc.spec.faults[0].model_copy(update={"conntrackTool": tool})
    step = plan_fault(sc.topology.model_copy(update={"kubeProxy": kp}), f)
    assert [p for _, p in step.conntrack] == [plan, plan]
    assert ("NEIGH_FAILED" in step.symptom) is kept


def test_conntrack_tool_is_only_for_stale_conntrack(tmp_path: Path) -> None:
    from kpemu.errors import InputError

    with pytest.raises(InputError, match=r"faults\[0\]\.conntrackTool: only stale-conntrack runs kube-proxy's "
                                         r"conntrack cleanup, not rp-filter"):
        _stale_scenario(tmp_path, STALE.replace("faults:\n", "faults:\n  - {kind: rp-filter, node: node1, "
                                                "source: 10.0.0.0/8, conntrackTool: false}\n"))


def test_stale_conntrack_and_source_port_input_errors_name_the_field(tmp_path: Path) -> None:
    from kpemu.errors import InputError

    bad = (STALE.replace("ready: false, ", "").replace("after: first", "after: nope")
           .replace("sourcePort: 40053}", "sourcePort: 40053}\n  - {name: t, from: client-0, to: {pod: dns-a, "
                                          "port: 53}, protocol: TCP, sourcePort: 40054}"))
    with pytest.raises(InputError) as e:
        _stale_scenario(tmp_path, bad)
    text = str(e.value)
    assert "faults[0].after: unknown flow 'nope'; expected one of ['first', 't']" in text
    assert "faults[0].replacement: dns-b must be another pod, with ready: false" in text
    assert "flows[1].sourcePort: a fixed source port is for UDP flows" in text


def test_udp_connections_from_a_fixed_source_port_all_use_it() -> None:
    import socket

    from kpemu.traffic.client import connections
    from kpemu.traffic.server import PodServers

    srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    srv.bind(("127.0.0.1", 0))
    servers = PodServers()
    servers.add("echo", [("udp", srv)])
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    free = probe.getsockname()[1]
    probe.close()
    try:
        got = list(connections("f", "127.0.0.1", srv.getsockname()[1], "udp", 3, 2.0, sport=free))
    finally:
        servers.close()
    assert [(c["sport"], c["outcome"], c["backend"]) for c in got] == [(free, "reply", "echo")] * 3


def test_conntrack_full_sets_the_kernel_wide_limit_only_in_the_guest_and_puts_it_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kpemu.errors import ApplyError
    from kpemu.kernel import faults

    step = plan_fault(_topo(), Fault(kind="conntrack-full", node="node1", limit=4))
    assert (step.netns, step.commands, step.kernel_wide) == ("kp-flannel-node1", (("conntrack", "-F"),),
                                                             ("net/netfilter/nf_conntrack_max", "4"))
    with pytest.raises(ApplyError, match="kernel-wide; kpemu sets it only in its guest kernel, never on the host"):
        faults._set_kernel_wide("net/netfilter/nf_conntrack_max", "4", "conntrack-full", False)
    monkeypatch.setattr(faults, "CMDLINE", tmp_path / "cmdline")
    (tmp_path / "cmdline").write_text("console=ttyS0 quiet panic=1\n")
    with pytest.raises(ApplyError, match="never on the host"):  # the runtime's word alone, on a kernel virtme
        faults._set_kernel_wide("net/netfilter/nf_conntrack_max", "4", "conntrack-full", True)  # did not boot
    # in the guest: written, then restored (a stand-in /proc/sys: this test must not change the kernel)
    (tmp_path / "cmdline").write_text("console=ttyS0 virtme_hostname=kpemu virtme.exec=`...`\n")
    monkeypatch.setattr(faults, "PROC_SYS", tmp_path)
    knob = tmp_path / "net" / "netfilter" / "nf_conntrack_max"
    knob.parent.mkdir(parents=True)
    knob.write_text("65536\n")
    done = faults._set_kernel_wide("net/netfilter/nf_conntrack_max", "4", "conntrack-full", True)
    assert done == "sysctl -w net.netfilter.nf_conntrack_max=4 (kernel-wide, was 65536; restored after the run)"
    assert knob.read_text() == "4"
    faults.restore_kernel_wide()
    assert knob.read_text() == "65536" and not faults._RESTORE


def test_a_fault_only_the_guest_may_apply_sends_the_scenario_to_the_guest() -> None:
    from kpemu.faults import FAULTS
    from kpemu.kernel.probe import Capabilities, Feature, _conntrack_max
    from kpemu.runtimes import Needs, choose

    host = _conntrack_max(in_guest=False)
    assert not host.ok and "kpemu never changes the host's" in host.detail
    caps = Capabilities(kernel="6.18", root=True, features={"conntrack:max": host})
    caps.features.update({n: Feature(n, True, "test") for n in
                          ("veth", "bridge", "iptables", "conntrack", "match:comment", "match:addrtype", "tool:ip",
                           "tool:iptables", "tool:tcpdump", "tool:conntrack", "vxlan", "br_netfilter",
                           "match:statistic")})
    assert choose("auto", [Needs("flannel-vxlan", "iptables")], caps)[0][0].name == "host"
    runtime, why = choose("auto", [Needs("flannel-vxlan", "iptables", FAULTS["conntrack-full"].features)], caps)[0]
    assert runtime.name == "vm" and why == "this kernel (6.18) lacks what is needed: a fault needs conntrack:max"


def test_the_registry_the_schema_and_the_validation_name_the_same_fault_kinds(tmp_path: Path) -> None:
    from kpemu.errors import InputError
    from kpemu.faults import FAULTS, names
    from kpemu.inputs.scenario import load_scenario
    from kpemu.model.schema import schema

    assert schema("scenario", names())["$defs"]["Fault"]["properties"]["kind"]["enum"] == list(FAULTS) == [
        "mtu-mismatch", "rp-filter", "no-masquerade", "no-br-netfilter", "stale-rules", "stale-conntrack",
        "conntrack-full"]
    bad = tmp_path / "s.yaml"
    bad.write_text(f"name: s\ntopology: {ROOT / 'topologies' / 'flannel-vxlan.yaml'}\nfaults:\n  - {{kind: nope}}\n"
                   "flows:\n  - {name: a, from: client, to: {node: node1, nodePort: 30080}}\n")
    with pytest.raises(InputError) as e:
        load_scenario(bad)
    assert str(e.value).endswith("faults[0].kind: Input should be 'mtu-mismatch', 'rp-filter', 'no-masquerade', "
                                 "'no-br-netfilter', 'stale-rules', 'stale-conntrack' or 'conntrack-full' (got 'nope')")


def test_no_masquerade_in_nftables_mode_removes_kube_proxy_s_nft_masquerade_rules() -> None:
    """iptables (and IPVS) mode: KUBE-POSTROUTING's MASQUERADE; nftables mode: the masquerade rules of
    kube-proxy's own `masquerading` chain, and the CNI's iptables MASQUERADE rules in both."""
    topo = _topo()
    ipt = plan_fault(topo, Fault(kind="no-masquerade", node="node1"))
    assert ipt.delete_rules is not None and ipt.delete_rules[1][0] == "KUBE-POSTROUTING" and ipt.delete_nft is None
    nft_topo = topo.model_copy(update={"kubeProxy": topo.kubeProxy.model_copy(update={"mode": "nftables"})})
    nft = plan_fault(nft_topo, Fault(kind="no-masquerade", node="node1"))
    assert nft.delete_nft == ("ip", "kube-proxy", "masquerading", "masquerade")
    assert nft.delete_rules is not None and "KUBE-POSTROUTING" not in nft.delete_rules[1]
    assert "kube-proxy's in its nft chain ip kube-proxy masquerading" in nft.change


def test_the_nft_rules_a_fault_deletes_are_found_by_handle() -> None:
    from kpemu.kernel.faults import nft_rules_to_delete

    listing = (
        "table ip kube-proxy {\n"
        "\tchain masquerading { # handle 7\n"
        "\t\ttype nat hook postrouting priority srcnat; policy accept;\n"
        "\t\tmeta mark & 0x00004000 == 0x00000000 return # handle 21\n"
        "\t\tmeta mark set meta mark ^ 0x00004000 # handle 22\n"
        "\t\tmasquerade fully-random # handle 23\n"
        "\t\tct status dnat ip saddr . ip daddr . meta l4proto . th dport @hairpin-connections masquerade "
        "fully-random # handle 24\n"
        '\t\tmeta mark set meta mark | 0x00004000 comment "masquerade" # handle 25\n'
        "\t}\n}\n")
    assert nft_rules_to_delete(listing, "masquerade") == [
        ("23", "masquerade fully-random"),
        ("24", "ct status dnat ip saddr . ip daddr . meta l4proto . th dport @hairpin-connections masquerade "
               "fully-random")]
    assert nft_rules_to_delete(listing, "snat") == []
