"""Rule attribution from a live trace (root, this kernel, iptables mode on nft, flannel VXLAN).

Own lab "ittrace" (a copy of topologies/flannel-vxlan.yaml), always destroyed. A pod -> ClusterIP
and an external -> NodePort connection are traced with xtables-monitor in both node namespaces;
the attribution must name the chains kube-proxy's packet walk goes through (reference 2.2), the
KUBE-SEP chain of the backend that answered, KUBE-MARK-MASQ / MASQUERADE where they belong, the
hook walk, and agree with the model oracle; a rule deleted in the kernel shows up as
"model vs kernel".
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from collections.abc import Iterator

import pytest
import yaml

from kpemu.analyse.attribution.xtables import (
    TracedPacket,
    counter_deltas,
    kernel_dnat,
    kernel_kube_path,
    kube_chain_path,
    parse_trace,
    phrases,
)
from kpemu.analyse.hooks import check_hook_claim, hooks_only
from kpemu.analyse.oracle import predict_for_topology
from kpemu.analyse.oracle.compare import compare_paths
from kpemu.analyse.oracle.types import Packet
from kpemu.kernel import lab
from kpemu.kernel import netns as nsmod
from kpemu.kernel.labstate import LabState
from kpemu.kernel.snapshot import read_counters
from kpemu.kernel.trace import start_tracing
from kpemu.model import topology_from_data
from kpemu.model.topology import Topology
from kpemu.plan.tracing import FlowMatch
from kpemu.proxy.iptables import iptables_rules, restore_text
from kpemu.proxy.modes import node_state
from kpemu.runtimes.host import deploy_lab
from kpemu.statedir import scratch_dir
from kpemu.traffic.server import serve_pods
from tests.helpers import TOPOLOGIES, needs_root

pytestmark = [needs_root, pytest.mark.root]
SVC = base64.b32encode(hashlib.sha256(b"default/web:httptcp").digest()).decode()[:16]
BACKENDS = (("10.244.0.2", 80), ("10.244.1.5", 80), ("10.244.1.6", 80))


def save(ns: str, backend: str = "nft", table: str | None = None) -> str:
    """`iptables-save` in `ns` (one table or all)."""
    return nsmod.run_in(ns, [f"iptables-{backend}-save", *(["-t", table] if table else [])]).stdout


def restore(ns: str, text: str, backend: str = "nft") -> None:
    """`iptables-restore --noflush` of `text` in `ns`."""
    res = nsmod.run_in(ns, [f"iptables-{backend}-restore", "--noflush", "--wait"], input=text)
    assert res.returncode == 0, res.stderr


def sep(ip: str) -> str:
    return "KUBE-SEP-" + base64.b32encode(hashlib.sha256(f"default/web:httptcp{ip}:80".encode()).digest()).decode()[:16]


@pytest.fixture(scope="module")
def env() -> Iterator[tuple[Topology, LabState]]:
    data = yaml.safe_load((TOPOLOGIES / "flannel-vxlan.yaml").read_text())
    data["name"] = "ittrace"
    topo = topology_from_data(data, "ittrace.yaml")
    lab.destroy(topo.name)
    state = deploy_lab(topo)
    servers = None
    try:
        for n in topo.nodes:  # deploy may not program kube-proxy yet: make sure its rules are there
            ns = state.members[n.name]
            if "KUBE-SERVICES" not in save(ns, topo.kubeProxy.backend, "nat"):
                restore(ns, restore_text(iptables_rules(topo, n.name)), topo.kubeProxy.backend)
        servers = serve_pods([(p.name, state.members[p.name], [pp.port for pp in p.ports if pp.protocol == "TCP"],
                              [pp.port for pp in p.ports if pp.protocol == "UDP"], []) for p in topo.pods])
        yield topo, state
    finally:
        if servers is not None:
            servers.close()
        lab.destroy(topo.name)
        assert not nsmod.list_netns("kp-ittrace-")


def _connect(state: LabState, member: str, dst: str, port: int) -> dict:
    res = nsmod.run_in(state.members[member], [sys.executable, "-m", "kpemu.traffic.client", "--flow", "t",
                                               "--dst", dst, "--port", str(port), "--connections", "1",
                                               "--timeout", "2"], timeout=15)
    return json.loads(res.stdout.splitlines()[0])


def _traced(topo: Topology, state: LabState, member: str, client: str, dst: str, port: int,
            tag: str) -> tuple[dict, dict[str, list[TracedPacket]], dict[str, list]]:
    nodes = {n.name: state.members[n.name] for n in topo.nodes}
    before = read_counters(nodes)
    session = start_tracing(nodes, FlowMatch("tcp", client, dst, port, BACKENDS, tag), workdir=scratch_dir(topo.name))
    assert session.unavailable is None
    try:
        conn = _connect(state, member, dst, port)
    finally:
        texts = session.stop()
    after = read_counters(nodes)
    for ns in nodes.values():  # the TRACE rules are gone again
        assert "kpemu-trace" not in save(ns, "nft", "raw")
    syns = {n: [p for p in parse_trace(t, n) if p.first.get("flags") == ["SYN"]] for n, t in texts.items()}
    deltas = {n: counter_deltas(before.iptables[n], after.iptables[n]) for n in nodes}
    return conn, syns, deltas


def _backend_ip(topo: Topology, conn: dict) -> str:
    assert conn["outcome"] == "reply", conn
    return next(p.ip for p in topo.pods if p.name == conn["backend"])


def test_pod_to_clusterip_is_attributed_and_walks_prerouting_forward_postrouting(env) -> None:
    topo, state = env
    conn, syns, deltas = _traced(topo, state, "client-0", "10.244.0.3", "10.96.0.10", 80, "cip")
    ip = _backend_ip(topo, conn)
    syn = next(p for p in syns["node1"] if p.first.get("dst") == "10.96.0.10")
    assert kube_chain_path(syn)[:3] == ["KUBE-SERVICES", f"KUBE-SVC-{SVC}", sep(ip)]
    assert kernel_dnat(syn) == f"{ip}:80"
    said = phrases(syn)
    assert said["DNAT"][0] == f"DNAT by {sep(ip)} (default/web:http)"
    assert said["MARK"] == [] and said["SNAT"] == []  # a pod source: no masquerade by kube-proxy
    assert hooks_only(syn) == ["PREROUTING", "FORWARD", "POSTROUTING"]
    verdict = check_hook_claim("ClusterIP", hooks_only(syn))
    assert not verdict.right and "never reaches INPUT" in verdict.explanation
    model = predict_for_topology(topo, "node1", Packet("10.244.0.3", "10.96.0.10", 80), node_state(topo, "node1"))
    assert compare_paths(model, kernel_kube_path(syn), kernel_dnat(syn)) == []
    # counters agree: the SEP's DNAT rule counted the connection on node1
    assert any(t == "nat" and r.startswith(f"-A {sep(ip)} ") and "DNAT" in r for t, r, _ in deltas["node1"])


def test_external_to_nodeport_names_nodeports_ext_mark_masq_sep_and_masquerade(env) -> None:
    topo, state = env
    conn, syns, _deltas = _traced(topo, state, "client", "10.242.72.50", "192.168.1.100", 30080, "np")
    ip = _backend_ip(topo, conn)
    syn = next(p for p in syns["node1"] if p.first.get("dport") == 30080)
    path = kube_chain_path(syn)
    assert path == ["KUBE-SERVICES", "KUBE-NODEPORTS", f"KUBE-EXT-{SVC}", "KUBE-MARK-MASQ", f"KUBE-SVC-{SVC}",
                    sep(ip)]
    said = phrases(syn)
    assert said["DNAT"][0] == f"DNAT by {sep(ip)} (default/web:http)"
    assert said["MARK"] == [f"KUBE-MARK-MASQ from KUBE-EXT-{SVC} (masquerade traffic for default/web:http "
                            "external destinations)"]
    assert said["SNAT"] == ["MASQUERADE in KUBE-POSTROUTING (mark 0x4000)"]
    assert hooks_only(syn) == ["PREROUTING", "FORWARD", "POSTROUTING"]
    assert check_hook_claim("NodePort", hooks_only(syn)).right
    model = predict_for_topology(topo, "node1", Packet("10.242.72.50", "192.168.1.100", 30080),
                                 node_state(topo, "node1"))
    assert compare_paths(model, kernel_kube_path(syn), kernel_dnat(syn)) == []
    if ip != "10.244.0.2":  # a backend on node2: node2 sees the masqueraded packet, no kube-proxy NAT
        remote = [p for p in syns["node2"] if (p.first.get("dst"), p.first.get("dport")) == (ip, 80)]
        assert remote and kernel_dnat(remote[0]) is None
        assert remote[0].first.get("src") == "10.244.0.0"  # MASQUERADE to node1's flannel.1 address


def test_a_rule_deleted_in_the_kernel_is_reported_as_model_vs_kernel(env) -> None:
    topo, state = env
    ns = state.members["node1"]
    rule = (f'-D KUBE-EXT-{SVC} -m comment --comment "masquerade traffic for default/web:http external '
            f'destinations" -j KUBE-MARK-MASQ')
    restore(ns, f"*nat\n{rule}\nCOMMIT\n")
    try:
        _conn, syns, _ = _traced(topo, state, "client", "10.242.72.50", "192.168.1.100", 30080, "alt")
        syn = next(p for p in syns["node1"] if p.first.get("dport") == 30080)
        assert "KUBE-MARK-MASQ" not in kube_chain_path(syn)
        model = predict_for_topology(topo, "node1", Packet("10.242.72.50", "192.168.1.100", 30080),
                                     node_state(topo, "node1"))
        diffs = compare_paths(model, kernel_kube_path(syn), kernel_dnat(syn))
        assert len(diffs) == 1
        assert diffs[0].describe().startswith("model vs kernel on node1")
        assert "KUBE-MARK-MASQ" in diffs[0].model
    finally:
        restore(ns, f"*nat\n{rule.replace('-D ', '-I ', 1).replace(f'KUBE-EXT-{SVC} ', f'KUBE-EXT-{SVC} 1 ', 1)}"
                    "\nCOMMIT\n")
