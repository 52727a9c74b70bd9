"""Start the pod servers and run each flow's client inside the lab's namespaces (effects)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from dataclasses import dataclass, field

from kpemu.errors import EnvironmentProblem
from kpemu.kernel import netns as nsmod
from kpemu.model.scenario import ResolvedFlow
from kpemu.model.topology import Topology
from kpemu.pace import scaled
from kpemu.traffic.procs import stop_processes, wait_for_lines

READY_TIMEOUT = 5.0


@dataclass
class FlowResult:
    """What the client saw: one dict per connection (outcome, backend, reply, sport, duration)."""

    name: str
    connections: list[dict] = field(default_factory=list)
    stderr: str = ""

    @property
    def backends(self) -> list[str]:
        return sorted({c["backend"] for c in self.connections if c.get("backend")})

    @property
    def outcomes(self) -> list[str]:
        return [c["outcome"] for c in self.connections]


def start_servers(topo: Topology, members: dict[str, str]) -> list[subprocess.Popen]:
    """One server process per pod with ports, started inside the pod; returns once all are ready."""
    procs: dict[str, subprocess.Popen] = {}
    for pod in topo.pods:
        if not pod.ports:
            continue
        argv = [sys.executable, "-m", "kpemu.traffic.server", "--name", pod.name]
        for pp in pod.ports:
            if pp.protocol in ("TCP", "UDP"):
                argv += [f"--{pp.protocol.lower()}", str(pp.port)]
        procs[pod.name] = nsmod.popen_in(members[pod.name], argv, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=True)
    late = wait_for_lines(procs, "ready", scaled(READY_TIMEOUT), "stdout")
    if late:
        stop_processes(list(procs.values()))
        raise EnvironmentProblem(f"the servers in {', '.join(late)} did not start within {scaled(READY_TIMEOUT)}s",
                                 "check that the pod ports are free and python runs in the namespace")
    return list(procs.values())


def run_flow(flow: ResolvedFlow, members: dict[str, str], gap: float = 0.0) -> FlowResult:
    """Run one flow's client in its source namespace (bounded by connections x (timeout + gap)).

    `gap` seconds pass between connections (a traced flow is paced so the trace monitor keeps up).
    """
    f = flow.flow
    argv = [sys.executable, "-m", "kpemu.traffic.client", "--flow", f.name, "--dst", flow.dst_ip,
            "--port", str(flow.dst_port), "--proto", flow.protocol.lower(),
            "--connections", str(f.connections), "--timeout", str(f.timeout)]
    if gap > 0:
        argv += ["--gap", str(gap)]
    if f.size:
        argv += ["--size", str(f.size)]
    budget = f.connections * (f.timeout + 0.5 + gap) + 5
    try:
        res = nsmod.run_in(members[flow.src_member], argv, timeout=budget)
        out, err = res.stdout, res.stderr
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = f"client timed out after {budget:.0f}s"
    result = FlowResult(f.name, stderr=err.strip())
    for line in out.splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            result.connections.append(json.loads(line))
    return result
