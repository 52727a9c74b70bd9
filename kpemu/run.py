"""`kpemu run` on this kernel: deploy, serve, capture, send, collect, destroy, then explain and check.

The lab is destroyed on every path out of `run_scenario`, including Ctrl-C and SIGTERM (turned
into KeyboardInterrupt while a run is in progress). Everything after destroy is pure analysis of
the files the run left in the output directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kpemu import lab
from kpemu.analyse.expect import Check, check_died, check_flow, check_goldens, fixed_ports, write_goldens
from kpemu.analyse.explain import FlowExplanation, explain_flow, with_verdicts
from kpemu.analyse.kstate import parse_conntrack, parse_ipvs_connections
from kpemu.analyse.ledger import FlowLedger, PointInfo, attach_state, build_flow_ledger, hops_json
from kpemu.capture.points import capture_file_stem, point_name
from kpemu.errors import EnvironmentProblem, KpemuError
from kpemu.jobs.schema import COLLECTED, Collected, Job
from kpemu.jobs.verify import check_saved_rules
from kpemu.model.scenario import Scenario
from kpemu.outlock import holding_out_dir, out_dir_lock
from kpemu.plan.tracing import TraceData
from kpemu.plan.types import Interface, Plan
from kpemu.proxy.modes import proxy_state
from kpemu.report.html import render_html
from kpemu.report.markdown import render_markdown
from kpemu.traffic.result import FlowResult

Progress = Callable[[str], None]  # told what a run is doing now (the CLI shows it)


def _quiet(msg: str) -> None:
    pass


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


def _warm_scapy() -> threading.Thread:
    """Import scapy in the background while the lab runs (it takes about a second)."""

    def imp() -> None:
        with contextlib.suppress(Exception):
            import scapy.layers.inet
            import scapy.layers.vxlan  # noqa: F401

    t = threading.Thread(target=imp, daemon=True)
    t.start()
    return t


def point_infos(plan: Plan, points: list[Interface]) -> dict[str, PointInfo]:
    """PointInfo for every capture point (which node a pod's interface lives on, etc.)."""
    kinds = {ns.name: ns for ns in plan.namespaces}
    out = {}
    for i in points:
        ns = kinds[i.ns]
        node = ns.member if ns.kind == "node" else ns.node
        out[point_name(i)] = PointInfo(point_name(i), i.ns, i.member, i.name, node, ns.kind)
    return out


@dataclass
class Analysis:
    """What `analyse` made of a run: ledgers, checks, hops.json, explanations, rewritten goldens."""

    ledgers: list[FlowLedger]
    checks: list[Check]
    hops: dict[str, Any]
    written: list[Path]
    explanations: dict[str, FlowExplanation]
    details: dict[str, dict[int, dict[str, list[str]]]]


def analyse(sc: Scenario, plan: Plan, col: Collected, out: Path, update_goldens: bool,
            runtime: str, reason: str, kernel: str) -> Analysis:
    """Ledger, attribution, oracle, checks and hops.json from the run's files (pure apart from reading them)."""
    from kpemu.capture.pcap import read_pcap
    from kpemu.report.pcapng import write_run_pcapngs

    infos = point_infos(plan, col.points)
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
    altered = frozenset([f["member"] for f in col.faults if f.get("delete_rules")]
                        + [n for f in col.faults for n in f.get("rules_changed") or ()])
    proxy = plan.proxy or proxy_state(sc.topology)
    for flow in sc.flows:
        res = col.results.get(flow.flow.name) or FlowResult(flow.flow.name)
        fl = build_flow_ledger(flow.flow.name, flow.src_member, flow.dst_ip, flow.dst_port, flow.protocol,
                               res.connections, packets, infos)
        attach_state(fl, conntrack, ipvs)
        explanations[fl.name] = explain_flow(sc.topology, flow, fl, col.traces.get(flow.flow.name) or TraceData(),
                                             texts, ipvs_services, altered, proxy)
        ledgers.append(fl)
    write_run_pcapngs(out, infos, files, ledgers, packets)
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
            checks += check_goldens(exp.flow, gdir, texts, ports)
    for fl in ledgers:
        res = col.results.get(fl.name)
        if res is not None and not res.connections:
            checks.append(Check(fl.name, "client", False, "one result per connection",
                                res.stderr or "the client reported nothing"))
        for d in explanations[fl.name].disagreements:
            checks.append(Check(fl.name, "model vs kernel", False, "the kernel takes a path the model oracle "
                                "predicts for the generated rules", d))
    flows_ok = {fl.name: all(c.ok for c in checks if c.flow == fl.name) for fl in ledgers}
    hops = {"scenario": sc.name, "mode": sc.topology.kubeProxy.mode, "lab": sc.topology.name,
            "runtime": runtime, "reason": reason, "kernel": kernel,
            "ok": all(c.ok for c in checks),
            "faults": col.faults,
            "flows": [with_verdicts({**hops_json(fl, flows_ok[fl.name]), **explanations[fl.name].to_json()},
                                    explanations[fl.name]) for fl in ledgers],
            "checks": [c.to_json() for c in checks]}
    details = {name: ex.details for name, ex in explanations.items()}
    return Analysis(ledgers, checks, hops, written, explanations, details)


def resolved(sc: Scenario, runtime: str) -> Scenario:
    """The scenario with what depends on the machine decided: randomFully from the iptables version,
    nfacct from what the kernel of `runtime` (host or vm) can create."""
    from kpemu.kernel.netfilter import resolve_random_fully
    from kpemu.kernel.nfacct import supported_here, with_nfacct

    if runtime == "vm":
        from kpemu.guest import nfacct_supported as supported
    else:
        supported = supported_here
    return replace(sc, topology=with_nfacct(resolve_random_fully(sc.topology), supported))


def run_plan(sc: Scenario, kernel: str | None = None) -> Plan:
    """The (resolved) scenario's plan with kube-proxy's state of every node, generated once for the
    kernel release `kernel` (default: this one); the job and the analysis of the run both use it."""
    from kpemu.jobs.build import lab_plan, release_tuple

    return lab_plan(sc.topology, release_tuple(kernel or os.uname().release))


def scenario_job(sc: Scenario, trace: bool = True, kernel: str | None = None, plan: Plan | None = None,
                 ) -> Job:
    """The collect job of a (resolved) scenario, for the kernel release `kernel` (default: this one), from
    its `run_plan` (made here when not given)."""
    from kpemu.jobs.build import collect_job, release_tuple

    plan = plan or run_plan(sc, kernel)
    return collect_job(sc, plan, release_tuple(kernel or os.uname().release), trace)


@holding_out_dir
def collect_scenario(sc: Scenario, out: Path, trace: bool = True, progress: Progress = _quiet,
                     plan: Plan | None = None) -> float:
    """The kernel half of a run on this kernel (kpemu.jobs.execute): deploy, serve, capture, send,
    snapshot, destroy (always). Writes pcaps/, capture/, rules/, trace/ and collected.json into `out`."""
    from kpemu.jobs.execute import collect

    lab.require_root()
    return collect(scenario_job(sc, trace, plan=plan), out, progress)


def analyse_scenario(sc: Scenario, out: Path, update_goldens: bool = False, runtime: str = "host",
                     reason: str = "", progress: Progress = _quiet, plan: Plan | None = None) -> RunResult:
    """The pure half of a run, from the files `collect_scenario` left in `out`: ledger, attribution,
    oracle, checks; writes hops.json, report.md and report.html. `plan`: the run's (`run_plan`), made
    here for the kernel that collected the files when not given."""
    started = time.perf_counter()
    path = out / COLLECTED
    if not path.is_file():
        raise EnvironmentProblem(f"{sc.name}: the run left no {path} (the collection did not finish)",
                                 f"see {out / 'guest'} for the guest's logs" if runtime == "vm" else "")
    col = Collected.from_json(json.loads(path.read_text()))
    check_saved_rules(col.readback, out / "rules")
    progress(f"analysing {sc.name}: ledger, pcapng, attribution, oracle, reports")
    a = analyse(sc, plan or run_plan(sc, col.kernel), col, out, update_goldens, runtime, reason, col.kernel)
    hops = a.hops
    seconds = col.seconds + time.perf_counter() - started
    hops["seconds"] = round(seconds, 3)
    hops["trace"] = col.trace
    (out / "hops.json").write_text(json.dumps(hops, indent=2) + "\n")
    (out / "report.md").write_text(render_markdown(hops))
    (out / "report.html").write_text(render_html(hops, sc.topology, a.details, files=run_files(out)))
    return RunResult(sc.name, out, runtime, reason, seconds, a.ledgers, a.checks, hops, a.written, a.explanations)


def run_files(out: Path) -> list[str]:
    """The files of a run directory the report links to, relative to it."""
    subs = sorted(str(p.relative_to(out)) for d in ("pcaps", "capture", "rules", "trace")
                  for p in (out / d).glob("*") if p.is_file())
    top = [f for f in ("run.pcapng", "hops.json", "report.md") if (out / f).is_file()]
    return top + subs


@holding_out_dir
def run_scenario(sc: Scenario, out: Path, update_goldens: bool = False, runtime: str = "host",
                 reason: str = "", trace: bool = True, progress: Progress = _quiet) -> RunResult:
    """Run one (resolved) scenario on this kernel; write report.md/.html, hops.json, pcaps/, capture/,
    rules/, trace/."""
    warm = _warm_scapy()
    plan = run_plan(sc)
    collect_scenario(sc, out, trace, progress, plan)
    warm.join(timeout=10)
    return analyse_scenario(sc, out, update_goldens, runtime, reason, progress, plan)


def out_dir_for(out: str | None, name: str, several: bool) -> Path:
    """Where one scenario's files go: --out itself for one scenario, --out/<name> for several."""
    if out is None:
        return Path("runs") / name
    return Path(out) / name if several else Path(out)


def choose_runtimes(requested: str | None, scenarios: list[Scenario]) -> list[tuple[str, str]]:
    """(runtime, reason) per scenario. Probes this kernel once, only when it has to decide."""
    req = requested or os.environ.get("KPEMU_RUNTIME") or "auto"
    if os.environ.get("KPEMU_IN_GUEST") == "1":
        return [("host", "already inside the guest kernel")] * len(scenarios)
    if req == "host":
        return [("host", "--runtime host: this kernel, as asked")] * len(scenarios)
    from kpemu.faults import FAULTS
    from kpemu.kernel.probe import probe
    from kpemu.runtime import choose_runtime

    caps = probe(kvm=False) if req == "auto" else None
    return [choose_runtime(req, [(sc.topology.cni, sc.topology.kubeProxy.mode)], caps,
                           [f for fault in sc.spec.faults for f in FAULTS[fault.kind].features])
            for sc in scenarios]


def run_in_guest(scenarios: list[tuple[Scenario, Path]], cold_root: Path, update_goldens: bool, reason: str,
                 trace: bool = True, progress: Progress = _quiet, notice: Progress = _quiet,
                 ) -> tuple[list[RunResult], list[tuple[str, KpemuError]]]:
    """The kernel half of each scenario in the guest (the warm one if up, else one cold boot for all;
    a fresh one for what a hung guest left, told to `notice`), then the analysis here; results, and
    (name, error) for each scenario whose collection failed."""
    from kpemu import guest

    release = guest.kernel_release()
    plans = [run_plan(sc, release) for sc, _ in scenarios]
    reqs = [("collect", {"job": replace(scenario_job(sc, trace, release, plan), render=False).to_json()})
            for (sc, _), plan in zip(scenarios, plans, strict=True)]
    with contextlib.ExitStack() as held:  # each output folder is this run's from here on
        for _, out in scenarios:
            held.enter_context(out_dir_lock(out))
        how, answers = guest.send(reqs, cold_root, progress, notice)
        return _analyse_guest_runs(scenarios, plans, answers, how, update_goldens, reason, progress)


def _analyse_guest_runs(scenarios: list[tuple[Scenario, Path]], plans: list[Plan], answers: list[tuple[Path, dict]],
                        how: str, update_goldens: bool, reason: str, progress: Progress,
                        ) -> tuple[list[RunResult], list[tuple[str, KpemuError]]]:
    """Move what the guest collected into each output folder, render its captures, analyse it (with the
    plan its job was made from)."""
    from kpemu.capture.tcpdump import render_pcaps
    from kpemu.jobs.execute import prepare_out

    results, failed = [], []
    for (sc, out), plan, (work, res) in zip(scenarios, plans, answers, strict=True):
        if res["rc"] != 0:
            failed.append((sc.name, EnvironmentProblem(f"{sc.name}: in the guest: {res.get('error', '')}",
                                                       f"see {work}")))
            continue
        prepare_out(out)
        for item in work.iterdir():
            dest = out / ("guest-progress.log" if item.name == "log" else item.name)
            shutil.rmtree(dest, ignore_errors=True)
            shutil.move(str(item), dest)
        render_pcaps(sorted((out / "pcaps").glob("*.pcap")), out / "capture")
        try:
            results.append(analyse_scenario(sc, out, update_goldens, "vm", f"{reason}; {how} guest", progress,
                                            plan))
        except KpemuError as e:
            failed.append((sc.name, e))
    return results, failed
