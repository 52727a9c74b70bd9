"""Cost of rule tracing: N connections pod -> ClusterIP and external -> NodePort on a flannel lab,
with and without xtables-monitor tracing (deploy/destroy timed separately, not per mode)."""

from __future__ import annotations

import sys
import time

import yaml

from kpemu.kernel import lab
from kpemu.kernel import netns as nsmod
from kpemu.kernel.labstate import LabState
from kpemu.kernel.trace import start_tracing
from kpemu.model import topology_from_data
from kpemu.plan.tracing import FlowMatch
from kpemu.runtimes.host import deploy_lab
from kpemu.statedir import scratch_dir
from kpemu.traffic.server import serve_pods
from scripts.bench import ROOT

CONNECTIONS = 5
BACKENDS = (("10.244.0.2", 80), ("10.244.1.5", 80), ("10.244.1.6", 80))
FLOWS = (("client-0", "10.244.0.3", "10.96.0.10", 80), ("client", "10.242.72.50", "192.168.1.100", 30080))


def _flows(state: LabState, nodes: dict[str, str], trace: bool) -> float:
    t0 = time.perf_counter()
    for member, client, dst, port in FLOWS:
        session = start_tracing(nodes, FlowMatch("tcp", client, dst, port, BACKENDS, "bench"),
                                workdir=scratch_dir(state.lab)) if trace else None
        try:
            nsmod.run_in(state.members[member], [sys.executable, "-m", "kpemu.traffic.client", "--flow", "b",
                                                 "--dst", dst, "--port", str(port), "--connections",
                                                 str(CONNECTIONS), "--timeout", "2"], timeout=30)
        finally:
            if session:
                session.stop()
    return time.perf_counter() - t0


def trace_cost() -> list[dict[str, object]]:
    data = yaml.safe_load((ROOT / "topologies" / "flannel-vxlan.yaml").read_text())
    data["name"] = "benchtrace"
    topo = topology_from_data(data, "benchtrace.yaml")
    lab.destroy(topo.name)
    t0 = time.perf_counter()
    state = deploy_lab(topo)
    deploy = time.perf_counter() - t0
    servers = None
    try:
        servers = serve_pods([(p.name, state.members[p.name], [pp.port for pp in p.ports if pp.protocol == "TCP"],
                              [pp.port for pp in p.ports if pp.protocol == "UDP"]) for p in topo.pods])
        nodes = {n.name: state.members[n.name] for n in topo.nodes}
        plain = _flows(state, nodes, False)
        traced = _flows(state, nodes, True)
    finally:
        if servers is not None:
            servers.close()
        lab.destroy(topo.name)
    n = len(FLOWS) * CONNECTIONS
    return [{"name": "trace.deploy", "value": round(deploy, 3), "unit": "s"},
            {"name": f"trace.flows_{n}_connections_without_tracing", "value": round(plain, 3), "unit": "s"},
            {"name": f"trace.flows_{n}_connections_with_tracing", "value": round(traced, 3), "unit": "s"},
            {"name": "trace.overhead_per_flow", "value": round((traced - plain) / len(FLOWS), 3), "unit": "s"}]


BENCHES = [trace_cost]
