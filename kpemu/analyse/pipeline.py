"""The analysis of one run (pure apart from reading the run's files): ledgers, attribution, oracle,
checks and goldens, and the hops.json document built from them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kpemu.analyse.drops import DropEvent, parse_drops
from kpemu.analyse.expect import Check, check_died, check_flow, check_goldens, fixed_ports, write_goldens
from kpemu.analyse.explain import FlowExplanation, explain_flow, with_verdicts
from kpemu.analyse.kstate import parse_conntrack, parse_ipvs_connections
from kpemu.analyse.ledger import FlowLedger, PointInfo, attach_state, build_flow_ledger, hops_json
from kpemu.capture.pcap import Pkt, read_pcap
from kpemu.capture.points import capture_file_stem, point_name
from kpemu.labplan import LabPlan
from kpemu.model.scenario import Scenario
from kpemu.plan.faultstep import AppliedFault
from kpemu.plan.tracing import TraceData
from kpemu.plan.types import Interface, Plan
from kpemu.traffic.result import FlowResult


class RunMaterial(Protocol):
    """What the analysis reads of what a run collected (kpemu.jobs.schema.Collected, which analysis may
    not import: it is the kernel half's)."""

    @property
    def results(self) -> Mapping[str, FlowResult]: ...
    @property
    def conntrack(self) -> Mapping[str, str]: ...
    @property
    def ipvs(self) -> Mapping[str, str]: ...
    @property
    def points(self) -> Sequence[Interface]: ...
    @property
    def traces(self) -> Mapping[str, TraceData]: ...
    @property
    def faults(self) -> Sequence[AppliedFault]: ...


@dataclass
class RunResult:
    """What one scenario run produced."""

    name: str
    out_dir: Path
    runtime: str
    reason: str
    seconds: float
    ledgers: list[FlowLedger] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    hops: dict[str, Any] = field(default_factory=dict)
    goldens_written: list[Path] = field(default_factory=list)
    explanations: dict[str, FlowExplanation] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1


@dataclass
class Analysis:
    """What `analyse` made of a run: ledgers, checks, explanations, rewritten goldens, and the packets and
    capture points they come from (run.pcapng is written from them, kpemu.report.write)."""

    ledgers: list[FlowLedger]
    checks: list[Check]
    written: list[Path]
    explanations: dict[str, FlowExplanation]
    details: dict[str, dict[int, dict[str, list[str]]]]
    faults: Sequence[AppliedFault]
    infos: dict[str, PointInfo]
    files: dict[str, Path]  # capture point -> its pcap
    packets: list[Pkt]


def point_infos(plan: Plan, points: list[Interface]) -> dict[str, PointInfo]:
    """PointInfo for every capture point (which node a pod's interface lives on, etc.)."""
    kinds = {ns.name: ns for ns in plan.namespaces}
    peers: dict[tuple[str, str], str] = {}
    for v in plan.veths:
        for (ns, name), (pns, pname) in (((v.ns, v.name), (v.peer_ns, v.peer_name)),
                                         ((v.peer_ns, v.peer_name), (v.ns, v.name))):
            if pns in kinds:
                peers[(ns, name)] = f"{kinds[pns].member}/{pname} ({kinds[pns].kind})"
    out = {}
    for i in points:
        ns = kinds[i.ns]
        node = ns.member if ns.kind == "node" else ns.node
        out[point_name(i)] = PointInfo(point_name(i), i.ns, i.member, i.name, node, ns.kind, peers.get((i.ns, i.name)))
    return out


def dropped_by(trace: TraceData) -> list[tuple[DropEvent, str]]:
    """The kernel's drops of a flow's packets, each with the lab member whose namespace dropped it."""
    members = {int(k): m for k, m in trace.drop_members.items()}
    return [(e, members[e.netns_inode]) for e in parse_drops(trace.drops) if e.netns_inode in members]


def analyse(sc: Scenario, plan: LabPlan, col: RunMaterial, out: Path, update_goldens: bool) -> Analysis:
    """Ledger, attribution, oracle, checks and goldens from the run's files in `out` (pure apart from
    reading them, and rewriting the goldens when `update_goldens`)."""
    infos = point_infos(plan.fabric, col.points)
    files = {point_name(i): out / "pcaps" / f"{capture_file_stem(i)}.pcap" for i in col.points}
    packets = []
    for point, path in files.items():
        packets += read_pcap(path, point)
    conntrack = {m: parse_conntrack(t) for m, t in col.conntrack.items()}
    ipvs = {n: parse_ipvs_connections(t) for n, t in col.ipvs.items()}
    texts = {}
    for i in col.points:
        txt = out / "capture" / f"{capture_file_stem(i)}.txt"
        texts[f"{i.member}_{i.name}"] = txt.read_text() if txt.exists() else ""
    rules_text = {f.name: f.read_text() for f in (out / "rules").glob("*.*")} if (out / "rules").is_dir() else {}
    ipvs_services = {n.name: rules_text.get(f"{n.name}.ipvs", "") for n in sc.topology.nodes}
    ledgers: list[FlowLedger] = []
    explanations: dict[str, FlowExplanation] = {}
    altered = frozenset([f.member for f in col.faults if f.delete_rules or f.delete_nft]
                        + [n for f in col.faults for n in f.rules_changed])
    for flow in sc.flows:
        res = col.results.get(flow.flow.name) or FlowResult(flow.flow.name)
        trace = col.traces.get(flow.flow.name) or TraceData()
        fl = build_flow_ledger(flow.flow.name, flow.src_member, flow.dst_ip, flow.dst_port, flow.protocol,
                               res.connections, packets, infos, dropped_by(trace))
        attach_state(fl, conntrack, ipvs)
        explanations[fl.name] = explain_flow(sc.topology, flow, fl, trace, plan.proxy, texts, ipvs_services, altered)
        ledgers.append(fl)
    by_name = {fl.name: fl for fl in ledgers}
    checks: list[Check] = []
    ports = fixed_ports(sc.topology)
    written: list[Path] = []
    for exp in sc.spec.expect:
        checks += check_flow(exp, by_name[exp.flow], rules_text)
        checks += check_died(exp, exp.flow, explanations[exp.flow].verdicts)
        gdir = sc.golden_dir(exp)
        if gdir is not None:
            if update_goldens:
                written += write_goldens(gdir, texts, ports)
            checks += check_goldens(exp.flow, gdir, texts, ports, f"sudo kpemu run {sc.path} --update-goldens")
    for fl in ledgers:
        res = col.results.get(fl.name)
        if res is not None and not res.connections:
            checks.append(Check(fl.name, "client", False, "one result per connection",
                                res.stderr or "the client reported nothing"))
        for d in explanations[fl.name].disagreements:
            checks.append(Check(fl.name, "model vs kernel", False, "the kernel takes a path the model oracle "
                                "predicts for the generated rules", d))
    details = {name: ex.details for name, ex in explanations.items()}
    return Analysis(ledgers, checks, written, explanations, details, col.faults, infos, files, packets)


def hops_document(sc: Scenario, a: Analysis, runtime: str, reason: str, kernel: str) -> dict[str, Any]:
    """The hops.json document of an analysed run (after run.pcapng numbered every hop's frames)."""
    # a flow is ok when it got everything it expected; one nothing was expected of is not said to be
    flows_ok = {fl.name: all(c.ok for c in mine) if (mine := [c for c in a.checks if c.flow == fl.name]) else None
                for fl in a.ledgers}
    return {"scenario": sc.name, "mode": sc.topology.kubeProxy.mode, "lab": sc.topology.name,
            "runtime": runtime, "reason": reason, "kernel": kernel,
            "ok": all(c.ok for c in a.checks),
            "faults": [f.to_json() for f in a.faults],
            "flows": [with_verdicts({**hops_json(fl, flows_ok[fl.name]), **a.explanations[fl.name].to_json()},
                                    a.explanations[fl.name]) for fl in a.ledgers],
            "checks": [c.to_json() for c in a.checks]}
