"""The oracle on a recorded IPVS run: scenarios/nft-nodeport.yaml in IPVS mode on the guest kernel 6.1,
eTP=Local Service `local` (NodePort 30081) whose only endpoint is web-0 10.244.0.2:80 on node1.

Fixture, cut from that run's directory: trace/ipvs_etp_local*_node*.txt are the nodes' xtables-monitor
traces as saved; trace/ipvs_nft_nodeport_ledger.json.gz holds each flow's connections, the packets of
its ports read from the run's pcaps, their capture points, `ipvsadm -Lnc` and `ipvsadm -Sn` of both nodes.
The raw OUTPUT trace rule for the backend traces the packet IPVS sends from LOCAL_IN again; on node1
(no masquerade) that send used to be checked as a packet generated on the node ("DNAT target: model no
DNAT; kernel 10.244.0.2:80").
"""

from __future__ import annotations

import gzip
import json

from kpemu.analyse.explain import explain_flow
from kpemu.analyse.explain.types import FlowExplanation
from kpemu.analyse.kstate import parse_ipvs_connections
from kpemu.analyse.ledger import PointInfo, attach_state, build_flow_ledger
from kpemu.analyse.oracle import predict_for_topology
from kpemu.analyse.oracle.types import Packet
from kpemu.capture.pcap import Outer, Pkt
from kpemu.inputs.scenario import load_scenario
from kpemu.jobs.build import release_tuple
from kpemu.labplan import lab_plan
from kpemu.plan.tracing import TraceData
from tests.helpers import ROOT

DATA = ROOT / "tests" / "data" / "trace"
SC = load_scenario(ROOT / "scenarios" / "nft-nodeport.yaml", "ipvs")
REC = json.loads(gzip.decompress((DATA / "ipvs_nft_nodeport_ledger.json.gz").read_bytes()))
PROXY = lab_plan(SC.topology, release_tuple(REC["kernel"])).proxy


def _explain(name: str, stem: str) -> FlowExplanation:
    """explain_flow as `analyse` calls it, on the recorded flow."""
    flow = next(f for f in SC.flows if f.flow.name == name)
    rec = REC["flows"][name]
    points = {k: PointInfo(**v) for k, v in REC["points"].items()}
    packets = [Pkt(**{**p, "payload": bytes.fromhex(p["payload"]),
                      "outer": Outer(**p["outer"]) if p["outer"] else None}) for p in rec["packets"]]
    fl = build_flow_ledger(name, flow.src_member, flow.dst_ip, flow.dst_port, flow.protocol, rec["connections"],
                           packets, points)
    attach_state(fl, {}, {n: parse_ipvs_connections(t) for n, t in REC["ipvs_connections"].items()})
    texts = {n: (DATA / f"{stem}_{n}.txt").read_text() if (DATA / f"{stem}_{n}.txt").is_file() else ""
             for n in ("node1", "node2")}
    return explain_flow(SC.topology, flow, fl, TraceData(texts=texts), PROXY, ipvs_services=REC["ipvs_services"])


def test_ipvs_send_of_the_nodeport_packet_is_joined_to_it_and_the_model_agrees() -> None:
    ex = _explain("local-with-endpoint", "ipvs_etp_local")
    assert ex.disagreements == []
    assert (ex.oracle_checked, ex.oracle_nodes, ex.unchecked) == (2, ["node1"], [])
    assert ex.hooks["node1"]["text"] == ("PREROUTING (raw, nat) -> INPUT (filter) -> OUTPUT (raw, filter) -> "
                                         "POSTROUTING (nat)")
    assert ex.chains["node1"] == ["KUBE-SERVICES", "KUBE-NODE-PORT", "KUBE-POSTROUTING", "FLANNEL-POSTRTG"]


def test_an_untraced_ipvs_send_leaves_the_model_its_steps_before_output() -> None:
    # node2 masquerades the send to node1 (flannel), so no captured hop shows the traced send: node2's
    # packet ends in INPUT and the model's OUTPUT and POSTROUTING steps are left out of the comparison
    ex = _explain("local-without-endpoint", "ipvs_etp_local_no_endpoint")
    assert ex.disagreements == []
    assert (ex.oracle_checked, ex.oracle_nodes) == (2, ["node2", "node1"])
    assert ex.hooks["node2"]["text"] == "PREROUTING (raw, nat) -> INPUT (filter)"


def test_model_sends_the_ipvs_packet_through_filter_output_then_nat_postrouting() -> None:
    pred = predict_for_topology(SC.topology, "node1", Packet("10.242.72.50", "192.168.1.100", 30081, "tcp", 41135),
                                state=PROXY.node("node1"))
    (o,) = pred.outcomes
    assert (o.dnat, o.ipvs, o.masquerade) == ("10.244.0.2:80", "IPVS rr TCP 192.168.1.100:30081 -> 10.244.0.2:80",
                                              False)
    assert o.hooks == ("PREROUTING", "INPUT", "OUTPUT", "POSTROUTING")
    assert o.kube_path() == [  # KUBE-NODE-PORT returns for KUBE-NODE-PORT-LOCAL-TCP: no masquerade mark
        ("nat", "PREROUTING", "KUBE-SERVICES"),
        ("nat", "KUBE-SERVICES", "KUBE-NODE-PORT"),
        ("nat", "KUBE-NODE-PORT", "RETURN"),
        ("filter", "INPUT", "KUBE-IPVS-FILTER"),
        ("filter", "INPUT", "KUBE-PROXY-FIREWALL"),
        ("filter", "INPUT", "KUBE-NODE-PORT"),
        ("filter", "OUTPUT", "KUBE-IPVS-OUT-FILTER"),
        ("nat", "POSTROUTING", "KUBE-POSTROUTING"),
        ("nat", "KUBE-POSTROUTING", "RETURN"),
    ]
