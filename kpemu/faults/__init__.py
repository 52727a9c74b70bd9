"""The fault registry: the classic misconfigurations a scenario can apply, one module per kind, each
exporting its spec as `FAULT` (kpemu.faults.spec.FaultSpec): the fields it needs with an example of
each, the kernel features it needs, its own checks, and its planner, which turns a fault into the
`FaultStep` kernel/faults.py applies, with the prose of what it changes and what that breaks.

Every change stays inside the lab's namespaces (a node's or a pod's): a sysctl, an MTU, a route,
an address released, kube-proxy rules deleted or re-synced. Nothing touches the root namespace; the
one kernel-wide setting (conntrack-full's nf_conntrack_max) is applied only in kpemu's guest.
Adding a fault is its own module plus one line in `FAULTS` (and a scenario under scenarios/faults/).
"""

from __future__ import annotations

import ipaddress
from dataclasses import replace

from kpemu.errors import Problem
from kpemu.faults import (
    conntrack_full,
    mtu_mismatch,
    no_br_netfilter,
    no_masquerade,
    rp_filter,
    stale_conntrack,
    stale_rules,
)
from kpemu.faults.spec import FaultSpec
from kpemu.model.scenario import Fault, ScenarioSpec
from kpemu.model.topology import Topology
from kpemu.plan.faultstep import FaultStep

# the scenario's `faults[].kind` value -> its spec, in the order the schema lists them
FAULTS: dict[str, FaultSpec] = {m.FAULT.name: m.FAULT for m in (
    mtu_mismatch, rp_filter, no_masquerade, no_br_netfilter, stale_rules, stale_conntrack, conntrack_full)}


def names() -> tuple[str, ...]:
    """Every fault kind a scenario may give, in registry order."""
    return tuple(FAULTS)


def plan_fault(topo: Topology, f: Fault) -> FaultStep:
    """The step for one fault of a validated scenario."""
    return replace(FAULTS[f.kind].plan(topo, f), after=f.after)


def plan_faults(topo: Topology, faults: list[Fault]) -> list[FaultStep]:
    """The steps for a scenario's faults, in the order written."""
    return [plan_fault(topo, f) for f in faults]


def check_faults(spec: ScenarioSpec, topo: Topology, file: str) -> list[Problem]:
    """Each fault gives what its kind needs, the node, pods and flow it names exist, its source is a CIDR,
    and its kind's own checks hold."""
    problems: list[Problem] = []
    nodes = sorted(n.name for n in topo.nodes)
    pods = sorted(p.name for p in topo.pods)
    flows = [f.name for f in spec.flows]
    for i, f in enumerate(spec.faults):
        base = f"faults[{i}]"
        kind = FAULTS[f.kind]
        for key, example in kind.needs.items():
            if getattr(f, key) is None:
                problems.append(Problem(file, f"{base}.{key}", f"fault {f.kind} needs {key}: (e.g. {example})"))
        if f.node is not None and f.node not in nodes:
            problems.append(Problem(file, f"{base}.node", f"unknown node {f.node!r}; expected one of {nodes}"))
        for key in ("pod", "replacement"):
            if getattr(f, key) is not None and getattr(f, key) not in pods:
                problems.append(Problem(file, f"{base}.{key}", f"unknown pod {getattr(f, key)!r}; expected one of "
                                                               f"{pods}"))
        if f.after is not None and f.after not in flows:
            problems.append(Problem(file, f"{base}.after", f"unknown flow {f.after!r}; expected one of {flows}"))
        if f.replacement is not None and not kind.replacement:
            takers = " and ".join(k.name for k in FAULTS.values() if k.replacement)
            problems.append(Problem(file, f"{base}.replacement", f"only {takers} has a replacement, not {f.kind}"))
        if not f.conntrackTool and not kind.conntrack_tool:
            takers = " and ".join(k.name for k in FAULTS.values() if k.conntrack_tool)
            problems.append(Problem(file, f"{base}.conntrackTool", f"only {takers} runs kube-proxy's conntrack "
                                                                   f"cleanup, not {f.kind}"))
        problems += [Problem(file, f"{base}.{key}", msg) for key, msg in kind.check(f, topo)]
        if f.source is not None:
            try:
                ipaddress.ip_network(f.source, strict=False)
            except ValueError:
                problems.append(Problem(file, f"{base}.source", f"expected a CIDR such as 10.242.72.0/24, got "
                                                                f"{f.source!r}"))
    return problems
