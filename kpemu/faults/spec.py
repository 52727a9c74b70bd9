"""What one fault kind says about itself (pure): the `FaultSpec` each fault module exports as `FAULT`,
read through the registry (kpemu.faults)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kpemu.model.scenario import Fault
from kpemu.model.topology import Topology
from kpemu.plan.faultstep import FaultStep

# (a validated scenario's topology, the fault): the step that applies it, with its change and symptom prose
Planner = Callable[[Topology, Fault], FaultStep]
# (the fault, the topology) -> its own cross-field problems, as (field, message)
Checker = Callable[[Fault, Topology], list[tuple[str, str]]]


def _no_check(_: Fault, __: Topology) -> list[tuple[str, str]]:
    return []


@dataclass(frozen=True)
class FaultSpec:
    """Everything kpemu asks about one kind of fault."""

    name: str  # the scenario's `faults[].kind` value
    needs: Mapping[str, str]  # the Fault fields it needs -> an example of each (for the error that asks for it)
    plan: Planner
    features: tuple[str, ...] = ()  # kernel.probe features it needs beyond its lab's
    replacement: bool = False  # whether it takes a replacement pod (`faults[].replacement`)
    conntrack_tool: bool = False  # whether `faults[].conntrackTool` applies (kube-proxy's UDP conntrack cleanup)
    check: Checker = _no_check
