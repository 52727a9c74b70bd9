"""The model oracle walks kpemu's generated rules; expected paths come from reference/kube-proxy.md
(sections 2.2 packet walk, 2.6 generation, 2.8 examples, 3.3 IPVS, 9.2/9.4 legacy), with chain
names computed here from the reference's hash algorithm (2.4), not taken from the oracle."""

from __future__ import annotations

import base64
import copy
import hashlib

import pytest
import yaml

from kpemu.analyse.oracle import node_local_addresses, predict_for_topology
from kpemu.analyse.oracle.compare import compare_paths
from kpemu.analyse.oracle.iptables import predict
from kpemu.analyse.oracle.types import Packet
from kpemu.model import topology_from_data
from kpemu.proxy.iptables import iptables_rules
from kpemu.proxy.modes import node_state
from tests.helpers import ROOT


def h(s: str) -> str:
    """Reference 2.4: base32(sha256(s))[:16]."""
    return base64.b32encode(hashlib.sha256(s.encode()).digest()).decode()[:16]


def topo(name: str = "flannel-vxlan", **changes: object):
    data = yaml.safe_load((ROOT / "topologies" / f"{name}.yaml").read_text())
    for k, v in changes.items():
        data[k] = v
    return topology_from_data(data, f"{name}.yaml")


FLANNEL = yaml.safe_load((ROOT / "topologies" / "flannel-vxlan.yaml").read_text())
SVC = h("default/web:http" + "tcp")
SEP = {ep: h("default/web:http" + "tcp" + ep) for ep in ("10.244.0.2:80", "10.244.1.5:80", "10.244.1.6:80")}


def chains_of(outcome) -> list[str]:
    return [s.chain for s in outcome.steps if s.rule is not None]


def nat_chain_walk(outcome) -> list[str]:
    out: list[str] = []
    for s in outcome.steps:
        if s.table == "nat" and s.rule is not None and s.chain not in out:
            out.append(s.chain)
    return out


def test_clusterip_from_pod_reaches_every_endpoint_through_its_sep_chain() -> None:
    pred = predict_for_topology(topo(), "node1", Packet("10.244.0.3", "10.96.0.10", 80), node_state(topo(), "node1"))
    assert pred.endpoints == pytest.approx({ep: 1 / 3 for ep in SEP})
    assert pred.endpoint_chains == pytest.approx({f"KUBE-SEP-{v}": 1 / 3 for v in SEP.values()})
    for ep, sep in SEP.items():
        o = pred.outcome_for(ep)
        assert o is not None and o.endpoint_chain == f"KUBE-SEP-{sep}"
        # 2.2: nat PREROUTING -> KUBE-SERVICES -> KUBE-SVC -> KUBE-SEP (DNAT); filter FORWARD; nat POSTROUTING
        assert nat_chain_walk(o)[:4] == ["PREROUTING", "KUBE-SERVICES", f"KUBE-SVC-{SVC}", f"KUBE-SEP-{sep}"]
        assert o.hooks == ("PREROUTING", "FORWARD", "POSTROUTING")
        forward = [s.target for s in o.steps if s.table == "filter" and s.chain == "FORWARD" and s.rule]
        assert forward == ["KUBE-PROXY-FIREWALL", "KUBE-FORWARD", "KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES"]
    # source inside the cluster CIDR: no masquerade mark, KUBE-POSTROUTING returns
    assert pred.marked is False and pred.masquerade is False
    assert pred.verdicts == {"ACCEPT"}


def test_clusterip_from_outside_the_cluster_cidr_is_marked_and_masqueraded() -> None:
    pred = predict_for_topology(topo(), "node1", Packet("192.168.1.100", "10.96.0.10", 80, origin="local"),
                                node_state(topo(), "node1"))
    assert pred.marked is True and pred.masquerade is True
    o = pred.outcomes[0]
    svc_rules = [s.rule for s in o.steps if s.chain == f"KUBE-SVC-{SVC}"]
    assert svc_rules[0].target == "KUBE-MARK-MASQ"  # the "! -s clusterCIDR" rule, first in the SVC chain (2.6)
    assert o.masquerade_chain == "KUBE-POSTROUTING"
    assert o.hooks == ("OUTPUT", "POSTROUTING")


def test_nodeport_external_goes_nodeports_ext_mark_masq_svc_sep_and_masquerade() -> None:
    pred = predict_for_topology(topo(), "node1", Packet("10.242.72.50", "192.168.1.100", 30080),
                                node_state(topo(), "node1"))
    assert set(pred.endpoints) == set(SEP)
    for o in pred.outcomes:
        walk = nat_chain_walk(o)
        assert walk[:5] == ["PREROUTING", "KUBE-SERVICES", "KUBE-NODEPORTS", f"KUBE-EXT-{SVC}", "KUBE-MARK-MASQ"]
        assert f"KUBE-SVC-{SVC}" in walk
        assert o.mark & 0x4000
        assert o.masquerade and o.masquerade_chain == "KUBE-POSTROUTING"
        # the NodePort rule is the last rule of KUBE-SERVICES (2.3)
        last = next(s.rule for s in o.steps if s.chain == "KUBE-SERVICES" and s.table == "nat")
        assert last.parsed.addrtype == {"dst": ("LOCAL", False)}
        assert o.hooks == ("PREROUTING", "FORWARD", "POSTROUTING")
        forward = [s for s in o.steps if s.table == "filter" and s.chain == "KUBE-FORWARD"]
        assert forward[0].verdict == "ACCEPT"  # the mark ACCEPT rule


def test_nodeport_to_an_address_that_is_not_the_nodes_does_not_match() -> None:
    pred = predict_for_topology(topo(), "node1", Packet("10.242.72.50", "192.168.1.101", 30080),
                                node_state(topo(), "node1"))
    assert pred.endpoints == {}
    assert all("KUBE-NODEPORTS" not in chains_of(o) for o in pred.outcomes)


def _etp_local() -> dict:
    data = copy.deepcopy(FLANNEL)
    data["services"][0]["externalTrafficPolicy"] = "Local"
    data["pods"] = [p for p in data["pods"] if p["name"] != "web-0"]  # endpoints only on node2
    return data


def test_etp_local_drops_on_a_node_without_local_endpoints() -> None:
    t = topology_from_data(_etp_local(), "etp.yaml")
    pred = predict_for_topology(t, "node1", Packet("10.242.72.50", "192.168.1.100", 30080), node_state(t, "node1"))
    assert pred.verdicts == {"DROP"}
    o = pred.outcomes[0]
    last = o.steps[-1]
    assert (last.table, last.chain, last.verdict) == ("filter", "KUBE-EXTERNAL-SERVICES", "DROP")
    assert last.rule.parsed.comment == "default/web:http has no local endpoints"
    assert pred.endpoints == {}


def test_etp_local_keeps_the_client_address_on_a_node_with_local_endpoints() -> None:
    t = topology_from_data(_etp_local(), "etp.yaml")
    pred = predict_for_topology(t, "node2", Packet("10.242.72.50", "192.168.1.101", 30080), node_state(t, "node2"))
    assert set(pred.endpoints) == {"10.244.1.5:80", "10.244.1.6:80"}
    assert pred.marked is False and pred.masquerade is False
    o = pred.outcomes[0]
    assert f"KUBE-SVL-{SVC}" in nat_chain_walk(o) and f"KUBE-SVC-{SVC}" not in nat_chain_walk(o)


def test_no_endpoints_rejects_in_filter_kube_services() -> None:
    data = copy.deepcopy(FLANNEL)
    del data["services"][0]["selector"]
    data["services"][0]["endpoints"] = []
    t = topology_from_data(data, "noeps.yaml")
    pred = predict_for_topology(t, "node1", Packet("10.244.0.3", "10.96.0.10", 80), node_state(t, "node1"))
    assert pred.verdicts == {"REJECT"}
    last = pred.outcomes[0].steps[-1]
    assert (last.table, last.chain) == ("filter", "KUBE-SERVICES")
    assert last.rule.parsed.comment == "default/web:http has no endpoints"
    np = predict_for_topology(t, "node1", Packet("10.242.72.50", "192.168.1.100", 30080), node_state(t, "node1"))
    assert np.verdicts == {"REJECT"}
    assert np.outcomes[0].steps[-1].chain == "KUBE-EXTERNAL-SERVICES"


def test_session_affinity_first_connection_skips_rcheck_and_sets_recent() -> None:
    data = copy.deepcopy(FLANNEL)
    data["services"][0]["sessionAffinity"] = "ClientIP"
    t = topology_from_data(data, "aff.yaml")
    pred = predict_for_topology(t, "node1", Packet("10.244.0.3", "10.96.0.10", 80), node_state(t, "node1"))
    assert pred.endpoints == pytest.approx({ep: 1 / 3 for ep in SEP})
    for o in pred.outcomes:
        svc_steps = [s.rule for s in o.steps if s.chain == f"KUBE-SVC-{SVC}"]
        assert all((r.parsed.recent or {}).get("action") != "rcheck" for r in svc_steps)
        dnat = next(s.rule for s in o.steps if s.verdict == "DNAT")
        assert dnat.parsed.recent == {"action": "set", "name": o.endpoint_chain}


def test_masquerade_all_marks_pod_traffic_too() -> None:
    data = copy.deepcopy(FLANNEL)
    data["kubeProxy"]["masqueradeAll"] = True
    t = topology_from_data(data, "masqall.yaml")
    pred = predict_for_topology(t, "node1", Packet("10.244.0.3", "10.96.0.10", 80), node_state(t, "node1"))
    assert pred.marked is True and pred.masquerade is True
    without = predict_for_topology(topo(), "node1", Packet("10.244.0.3", "10.96.0.10", 80), node_state(topo(), "node1"))
    assert without.masquerade is False


def test_legacy_seed001_nodeport_masq_in_nodeports_and_the_notes_chains() -> None:
    t = topo("seed-001")
    pred = predict_for_topology(t, "minikube", Packet("10.242.72.50", "192.168.49.2", 30180), node_state(t, "minikube"))
    # seed 001 / reference 9.4: KUBE-SVC-4N57TFCL4MD7ZTDA, SEPs UZXILYFQQ2IZUWN5 (.4) and 43IWXJI557JKCKCF (.5)
    assert pred.endpoint_chains == pytest.approx({"KUBE-SEP-UZXILYFQQ2IZUWN5": 0.5, "KUBE-SEP-43IWXJI557JKCKCF": 0.5})
    assert pred.endpoints == pytest.approx({"172.17.0.4:80": 0.5, "172.17.0.5:80": 0.5})
    for o in pred.outcomes:
        np = [s.rule.target for s in o.steps if s.chain == "KUBE-NODEPORTS"]
        assert np == ["KUBE-MARK-MASQ", "KUBE-SVC-4N57TFCL4MD7ZTDA"]  # T8 legacy
        assert o.masquerade
        post = [s for s in o.steps if s.chain == "KUBE-POSTROUTING"]
        assert [s.verdict for s in post] == ["MASQUERADE"]  # T3: one mark-matching rule


def test_legacy_xlb_local_endpoint_and_mark_drop_without() -> None:
    data = _etp_local()
    data["kubeProxy"]["version"] = "1.18"
    t = topology_from_data(data, "xlb.yaml")
    s = h("default/web:http" + "tcp")
    local = predict_for_topology(t, "node2", Packet("10.242.72.50", "192.168.1.101", 30080), node_state(t, "node2"))
    assert set(local.endpoints) == {"10.244.1.5:80", "10.244.1.6:80"}
    assert all(f"KUBE-XLB-{s}" in nat_chain_walk(o) for o in local.outcomes)
    assert local.masquerade is False
    none = predict_for_topology(t, "node1", Packet("10.242.72.50", "192.168.1.100", 30080), node_state(t, "node1"))
    assert none.verdicts == {"DROP"}
    o = none.outcomes[0]
    assert "KUBE-MARK-DROP" in nat_chain_walk(o)  # 9.2: "has no local endpoints" -j KUBE-MARK-DROP
    assert o.steps[-1].chain == "KUBE-FIREWALL"  # kubelet's mark-drop rule in filter INPUT
    assert o.hooks == ("PREROUTING", "INPUT")  # dropped in filter INPUT


def test_ipvs_nodeport_seed000_marks_masq_and_ipvs_picks_the_real_server() -> None:
    t = topo("calico-ipip")
    pred = predict_for_topology(t, "node1", Packet("10.242.72.50", "10.246.198.17", 30080), node_state(t, "node1"))
    assert pred.endpoints == {"192.168.97.10:80": 1.0}
    o = pred.outcomes[0]
    assert o.ipvs == "IPVS rr TCP 10.246.198.17:30080 -> 192.168.97.10:80"
    nat = nat_chain_walk(o)
    assert nat[:4] == ["PREROUTING", "KUBE-SERVICES", "KUBE-NODE-PORT", "KUBE-MARK-MASQ"]
    node_port = next(s.rule for s in o.steps if s.chain == "KUBE-NODE-PORT" and s.table == "nat")
    assert node_port.parsed.match("set").get("--match-set").values == ("KUBE-NODE-PORT-TCP", "dst")
    assert o.masquerade and o.masquerade_chain == "KUBE-POSTROUTING"
    assert o.hooks == ("PREROUTING", "INPUT", "OUTPUT", "POSTROUTING")  # 3.3: INPUT, IPVS in LOCAL_IN sends via OUTPUT


def test_ipvs_clusterip_from_pod_is_accepted_not_marked() -> None:
    t = topo("calico-ipip")
    pred = predict_for_topology(t, "node1", Packet("192.168.97.5", "192.168.96.165", 80), node_state(t, "node1"))
    o = pred.outcomes[0]
    assert o.dnat == "192.168.97.10:80" and not o.marked_masq
    kube = [s.rule for s in o.steps if s.chain == "KUBE-SERVICES" and s.table == "nat"]
    assert kube[-1].target == "ACCEPT"
    assert kube[-1].parsed.match("set").get("--match-set").values == ("KUBE-CLUSTER-IP", "dst,dst")


def test_an_altered_rule_set_is_reported_as_model_vs_kernel() -> None:
    t = topo()
    model = predict_for_topology(t, "node1", Packet("10.242.72.50", "192.168.1.100", 30080), node_state(t, "node1"))
    # the "kernel": the same rules with the KUBE-EXT masquerade rule deleted
    rs = iptables_rules(t, "node1")
    ext = rs.tables["nat"].chains[f"KUBE-EXT-{SVC}"]
    ext.rules = [r for r in ext.rules if r.target != "KUBE-MARK-MASQ"]
    kernel = predict(rs, Packet("10.242.72.50", "192.168.1.100", 30080), node_local_addresses(t, "node1"), "node1")
    ko = kernel.outcome_for("10.244.0.2:80")
    assert not ko.masquerade
    diffs = compare_paths(model, ko.kube_path(), "10.244.0.2:80")
    assert len(diffs) == 1
    d = diffs[0]
    assert d.describe().startswith("model vs kernel on node1")
    assert "KUBE-MARK-MASQ" in d.model and "KUBE-MARK-MASQ" not in d.kernel
    # and an unaltered kernel path agrees
    assert compare_paths(model, model.outcome_for("10.244.0.2:80").kube_path(), "10.244.0.2:80") == []


def test_a_dnat_target_the_model_does_not_know_is_a_disagreement() -> None:
    model = predict_for_topology(topo(), "node1", Packet("10.244.0.3", "10.96.0.10", 80), node_state(topo(), "node1"))
    diffs = compare_paths(model, [], "10.244.9.9:80")
    assert diffs and diffs[0].what == "DNAT target" and diffs[0].kernel == "10.244.9.9:80"

