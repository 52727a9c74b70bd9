"""One lab's whole plan (pure), made once for the kernel that will run it and handed along, never
remade: the fabric (kpemu.plan), kube-proxy's state of every node (kpemu.proxy), and the steps of the
scenario's faults (kpemu.faults). The job is built from it (kpemu.jobs.build), the analysis explains
the run with it (kpemu.analyse.pipeline)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kpemu.cni import cni_of
from kpemu.faults import plan_faults
from kpemu.model.scenario import Fault
from kpemu.model.topology import Topology
from kpemu.plan.fabric import plan_fabric
from kpemu.plan.faultstep import FaultStep
from kpemu.plan.types import Plan
from kpemu.proxy.modes import proxy_state
from kpemu.proxy.state import ProxyState


@dataclass(frozen=True)
class LabPlan:
    """The lab's topology, fabric, kube-proxy state (generated for `kernel`) and fault steps."""

    topology: Topology
    fabric: Plan
    proxy: ProxyState
    faults: tuple[FaultStep, ...]
    kernel: tuple[int, int]


def lab_plan(topo: Topology, kernel: tuple[int, int], faults: Sequence[Fault] = ()) -> LabPlan:
    """Plan a lab for a kernel (major, minor): its CNI's fabric, every node's kube-proxy state for that
    kernel, and the steps of `faults` in the order written."""
    return LabPlan(topo, plan_fabric(topo, cni_of(topo).plan), proxy_state(topo, kernel),
                   tuple(plan_faults(topo, list(faults))), kernel)
