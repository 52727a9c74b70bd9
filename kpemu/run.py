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
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kpemu import lab
from kpemu.analyse.drops import window as drops_window
from kpemu.analyse.expect import Check, check_died, check_flow, check_goldens, fixed_ports, write_goldens
from kpemu.analyse.explain import FlowExplanation, TraceData, explain_flow, flow_match, with_verdicts
from kpemu.analyse.kstate import parse_conntrack, parse_ipvs_connections
from kpemu.analyse.ledger import FlowLedger, PointInfo, attach_state, build_flow_ledger, hops_json
from kpemu.capture import snapshot
from kpemu.capture.points import capture_file_stem, capture_points, point_name
from kpemu.capture.tcpdump import render_text, start_captures, stop_captures
from kpemu.errors import EnvironmentProblem
from kpemu.kernel import counters
from kpemu.kernel.drops import DropSession, start_drop_tracing
from kpemu.kernel.faults import apply_faults
from kpemu.kernel.trace import start_tracing
from kpemu.model.scenario import ResolvedFlow, Scenario
from kpemu.plan.fabric import plan_fabric
from kpemu.plan.faults import plan_faults
from kpemu.plan.types import Interface, Plan
from kpemu.report.html import render_html
from kpemu.report.markdown import render_markdown
from kpemu.traffic.procs import stop_processes
from kpemu.traffic.runner import FlowResult, run_flow, start_servers

# Seconds between a traced flow's connections: xtables-monitor prints (and looks up) every event,
# and a burst of back-to-back connections can overflow its netlink socket (it then exits).
TRACE_GAP = float(os.environ.get("KPEMU_TRACE_GAP", "0.02"))
DROP_SLACK_NS = 300_000_000  # a drop reported just after the client gave up still belongs to the flow
COLLECTED = "collected.json"  # what the kernel half of a run hands to the analysis half


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
class Collected:
    """Raw material gathered while the lab was up."""

    results: dict[str, FlowResult] = field(default_factory=dict)
    conntrack: dict[str, str] = field(default_factory=dict)  # member -> conntrack -L text
    ipvs: dict[str, str] = field(default_factory=dict)  # node -> ipvsadm -Lnc text
    points: list[Interface] = field(default_factory=list)
    traces: dict[str, TraceData] = field(default_factory=dict)  # flow -> trace texts and counter snapshots
    faults: list[dict] = field(default_factory=list)  # the faults applied (plan step + commands run)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt for the duration (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextlib.contextmanager
def signals_blocked() -> Iterator[None]:
    """Hold SIGINT/SIGTERM while cleaning up, so a second Ctrl-C cannot leave the lab half-removed."""
    sigs = {signal.SIGINT, signal.SIGTERM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _warm_scapy() -> threading.Thread:
    """Import scapy in the background while the lab runs (it takes about a second)."""

    def imp() -> None:
        with contextlib.suppress(Exception):
            import scapy.layers.inet
            import scapy.layers.vxlan  # noqa: F401

    t = threading.Thread(target=imp, daemon=True)
    t.start()
    return t


def prepare_out(out: Path) -> None:
    """Empty the run directory's generated parts (keeps anything else a user put there)."""
    for sub in ("pcaps", "capture", "rules", "trace"):
        shutil.rmtree(out / sub, ignore_errors=True)
    for f in ("report.md", "hops.json", "report.html", "report.png", COLLECTED):
        (out / f).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)


def _traced_flow(sc: Scenario, flow: ResolvedFlow, nodes: dict[str, str], members: dict[str, str],
                 out: Path) -> tuple[FlowResult, TraceData]:
    """Run one flow between two counter snapshots with its packets traced in every node namespace."""
    kp = sc.topology.kubeProxy
    data = TraceData(before=counters.snapshot(nodes, kp.backend, kp.mode == "ipvs"))
    session = start_tracing(nodes, flow_match(sc.topology, flow), kp.backend)
    try:
        result = run_flow(flow, members, gap=TRACE_GAP if session.unavailable is None else 0.0)
    finally:
        texts = session.stop()
    data.after = counters.snapshot(nodes, kp.backend, kp.mode == "ipvs")
    data.unavailable = session.unavailable
    data.texts = texts if session.unavailable is None else {}
    tdir = out / "trace"
    tdir.mkdir(parents=True, exist_ok=True)
    for node, text in data.texts.items():
        (tdir / f"{flow.flow.name}_{node}.txt").write_text(text)
    return result, data


def _traffic(sc: Scenario, plan: Plan, state: lab.LabState, out: Path, trace: bool = True,
             drop_session: DropSession | None = None) -> Collected:
    """Servers, captures, flows (traced unless `trace` is False), kernel state; stops what it started.

    `drop_session`: a kernel drop tracer started before deploy (one is started here when traced without)."""
    topo = sc.topology
    col = Collected(points=capture_points(plan, topo, sc.flows))
    nodes = {n.name: state.members[n.name] for n in topo.nodes}
    steps = plan_faults(topo, sc.spec.faults)
    col.faults = [{**s.to_json(), "done": d} for s, d in zip(steps, apply_faults(steps, topo.kubeProxy.backend),
                                                              strict=True)]
    snapshot.save_rules(nodes, topo.kubeProxy.backend, topo.kubeProxy.mode == "ipvs", out / "rules")
    servers = []
    caps = []
    if trace and drop_session is None:
        drop_session = start_drop_tracing(out / "trace" / "drops.txt")
    if drop_session is not None:
        drop_session.watch(state.members)
    windows: dict[str, tuple[int, int]] = {}
    try:
        servers = start_servers(topo, state.members)
        caps = start_captures(col.points, out / "pcaps")
        if drop_session is not None:
            drop_session.wait_ready()
        for flow in sc.flows:
            if trace:
                start = time.monotonic_ns()
                col.results[flow.flow.name], col.traces[flow.flow.name] = _traced_flow(
                    sc, flow, nodes, state.members, out)
                windows[flow.flow.name] = (start, time.monotonic_ns())
            else:
                col.results[flow.flow.name] = run_flow(flow, state.members)
        time.sleep(sc.spec.settle)
        if drop_session is not None:
            _split_drops(drop_session, windows, col)
        nat_members = list(nodes) + [e.name for e in topo.externals if e.role == "loadbalancer"]
        for m in nat_members:
            col.conntrack[m] = snapshot.conntrack_text(state.members[m])
        if topo.kubeProxy.mode == "ipvs":
            for n, ns in nodes.items():
                col.ipvs[n] = snapshot.ipvs_connections_text(ns)
    finally:
        if drop_session is not None:
            drop_session.stop()
        stop_captures(caps)
        stop_processes(servers)
    render_text(caps, out / "capture")
    return col


def _split_drops(session: DropSession, windows: dict[str, tuple[int, int]], col: Collected) -> None:
    """Stop the drop tracer and give each flow the kernel drops inside its window (+ the settle time)."""
    text = session.stop()
    members = {str(k): v for k, v in session.members.items()}
    starts = sorted(start for start, _ in windows.values())
    for name, (start, end) in windows.items():
        following = [s for s in starts if s > start]
        end = min(end + DROP_SLACK_NS, following[0] if following else end + DROP_SLACK_NS)
        data = col.traces[name]
        data.drops_unavailable = session.unavailable
        data.drop_members = members
        if session.unavailable is None:
            data.drops = drops_window(text, start, end)


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

    infos = point_infos(plan, col.points)
    packets = []
    for i in col.points:
        packets += read_pcap(out / "pcaps" / f"{capture_file_stem(i)}.pcap", point_name(i))
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
    altered = frozenset(f["member"] for f in col.faults if f.get("delete_rules"))
    for flow in sc.flows:
        res = col.results.get(flow.flow.name) or FlowResult(flow.flow.name)
        fl = build_flow_ledger(flow.flow.name, flow.src_member, flow.dst_ip, flow.dst_port, flow.protocol,
                               res.connections, packets, infos)
        attach_state(fl, conntrack, ipvs)
        explanations[fl.name] = explain_flow(sc.topology, flow, fl, col.traces.get(flow.flow.name) or TraceData(),
                                             texts, ipvs_services, altered)
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


def collected_json(col: Collected) -> dict[str, Any]:
    """Collected as JSON: what the guest hands to the host, which then analyses the run itself."""
    return {
        "results": {k: asdict(v) for k, v in col.results.items()},
        "conntrack": col.conntrack,
        "ipvs": col.ipvs,
        "faults": col.faults,
        "points": [asdict(i) for i in col.points],
        "traces": {k: {"texts": t.texts, "unavailable": t.unavailable,
                       "before": asdict(t.before) if t.before else None,
                       "after": asdict(t.after) if t.after else None,
                       "drops": t.drops, "drops_unavailable": t.drops_unavailable,
                       "drop_members": t.drop_members} for k, t in col.traces.items()},
    }


def collected_from_json(data: dict[str, Any]) -> Collected:
    """The inverse of `collected_json`."""

    def snap(d: dict[str, Any] | None) -> counters.CounterSnapshot | None:
        return counters.CounterSnapshot(**d) if d else None

    return Collected(
        results={k: FlowResult(**v) for k, v in data["results"].items()},
        conntrack=data["conntrack"],
        ipvs=data["ipvs"],
        faults=data.get("faults", []),
        points=[Interface(**i) for i in data["points"]],
        traces={k: TraceData(texts=t["texts"], unavailable=t["unavailable"], before=snap(t["before"]),
                             after=snap(t["after"]), drops=t.get("drops", ""),
                             drops_unavailable=t.get("drops_unavailable"), drop_members=t.get("drop_members", {}))
                for k, t in data["traces"].items()},
    )


def collect_scenario(sc: Scenario, out: Path, trace: bool = True) -> float:
    """The kernel half of a run: deploy, serve, capture, send, snapshot, destroy (always).

    Writes pcaps/, capture/, rules/, trace/ and collected.json into `out`; returns its seconds. In the
    guest runtime only this half runs there: the pure analysis runs on the host, where it is fast.
    """
    lab.require_root()
    started = time.perf_counter()
    prepare_out(out)
    plan = plan_fabric(sc.topology)
    drops = start_drop_tracing(out / "trace" / "drops.txt") if trace else None  # attaches while we deploy
    with sigterm_as_interrupt():
        try:
            state = lab.deploy(sc.topology, source=str(sc.path), plan=plan)
            try:
                col = _traffic(sc, plan, state, out, trace, drops)
            finally:
                with signals_blocked():
                    lab.destroy(state.lab)
        finally:
            if drops is not None:
                drops.stop()
    seconds = time.perf_counter() - started
    (out / COLLECTED).write_text(json.dumps({**collected_json(col), "seconds": seconds, "trace": trace,
                                             "kernel": os.uname().release}) + "\n")
    return seconds


def analyse_scenario(sc: Scenario, out: Path, update_goldens: bool = False, runtime: str = "host",
                     reason: str = "") -> RunResult:
    """The pure half of a run, from the files `collect_scenario` left in `out`: ledger, attribution,
    oracle, checks; writes hops.json, report.md and report.html."""
    started = time.perf_counter()
    path = out / COLLECTED
    if not path.is_file():
        raise EnvironmentProblem(f"{sc.name}: the run left no {path} (the collection did not finish)",
                                 f"see {out / 'guest'} for the guest's logs" if runtime == "vm" else "")
    data = json.loads(path.read_text())
    a = analyse(sc, plan_fabric(sc.topology), collected_from_json(data), out, update_goldens, runtime, reason,
                data["kernel"])
    hops = a.hops
    seconds = data["seconds"] + time.perf_counter() - started
    hops["seconds"] = round(seconds, 3)
    hops["trace"] = data["trace"]
    (out / "hops.json").write_text(json.dumps(hops, indent=2) + "\n")
    (out / "report.md").write_text(render_markdown(sc.name, runtime, reason, hops["kernel"], a.ledgers, a.checks,
                                                   seconds, flows_json=hops["flows"], mode=hops["mode"],
                                                   faults=hops["faults"]))
    (out / "report.html").write_text(render_html(hops, sc.topology, a.details))
    return RunResult(sc.name, out, runtime, reason, seconds, a.ledgers, a.checks, hops, a.written, a.explanations)


def run_scenario(sc: Scenario, out: Path, update_goldens: bool = False, runtime: str = "host",
                 reason: str = "", trace: bool = True) -> RunResult:
    """Run one scenario on this kernel; write report.md/.html, hops.json, pcaps/, capture/, rules/, trace/."""
    warm = _warm_scapy()
    collect_scenario(sc, out, trace)
    warm.join(timeout=10)
    return analyse_scenario(sc, out, update_goldens, runtime, reason)


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
    from kpemu.runtime import choose_runtime

    caps = None
    if req == "auto":
        from kpemu.kernel.probe import probe

        caps = probe(kvm=False)
    return [choose_runtime(req, [(sc.topology.cni, sc.topology.kubeProxy.mode)], caps) for sc in scenarios]


def guest_argv(files: list[str], out: str | None, extra: list[str] | None = None) -> list[str]:
    """The `kpemu run` command line the guest runs for scenarios that need its kernel."""
    import sys

    argv = [sys.executable, "-m", "kpemu.cli", "run", *files, "--runtime", "host"]
    if out is not None:
        argv += ["--out", out]
    return argv + list(extra or [])
