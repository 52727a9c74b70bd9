"""hops.json, the one document every renderer reads (pure): a run's flows, hop by hop, with their
explanations and verdicts, the faults applied and the checks. Typed here as TypedDicts, so report.md,
report.html and the terminal summary render a saved run as they render a fresh one.

Keys a run folder written by an older kpemu may lack are optional (`NotRequired`); the renderers
read those with `.get`.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

# "from" is a Python keyword: these use the functional form
ChangeReport = TypedDict("ChangeReport", {
    "kind": str,  # DNAT | SNAT | un-DNAT | un-SNAT | encap | decap
    "field": str,  # dst | src | outer
    "from": str,
    "to": str,
    "node": str | None,
    "by": list[str],  # the rules or IPVS decisions that did it
})


class OuterReport(TypedDict):
    """The encapsulating header of a tunnelled packet."""

    type: str
    src: str
    dst: str
    vni: int | None


class HopReport(TypedDict):
    """The packet as seen at one capture point."""

    node: str | None
    netns: str
    member: str
    interface: str
    direction: str  # request | reply
    proto: str
    src: str
    sport: int | None
    dst: str
    dport: int | None
    flags: str
    outer: OuterReport | None
    t_us: float
    changed_by: list[ChangeReport]
    frame: int | None  # in the run's pcapng
    flow_frame: int | None  # in the flow's pcapng


class ConnectionReport(TypedDict):
    """One connection of a flow: the client's view and its hops both ways."""

    index: int
    marker: str
    sport: int | None
    outcome: str
    backend: str | None
    status: NotRequired[int | None]  # the HTTP status
    reply: NotRequired[str | None]  # what the client read
    hops: list[HopReport]
    conntrack: list[dict[str, str]]  # {node, line}
    ipvs: list[dict[str, str]]  # {node, line}
    verdict: NotRequired[dict[str, Any] | None]  # why it died (kpemu.analyse.verdict)
    opened: NotRequired[list[HopReport]]  # the answered first packet, when a later one died (`hops`)


FlowReport = TypedDict("FlowReport", {
    "name": str,
    "ok": bool | None,  # every expectation on the flow held (None: the flow had none)
    "from": str,
    "to": str,
    "protocol": str,
    "backends": list[str],
    "hops": list[HopReport],  # the representative connection's (the first one seen at all)
    "conntrack": list[dict[str, str]],
    "ipvs": list[dict[str, str]],
    "connections": list[ConnectionReport],
    # the explanation (kpemu.analyse.explain.FlowExplanation.to_json) and the verdict
    "trace": NotRequired[dict[str, Any]],
    "chains": NotRequired[dict[str, list[str]]],
    "hooks": NotRequired[dict[str, dict[str, Any]]],
    "hook_claim": NotRequired[dict[str, Any] | None],
    "oracle": NotRequired[dict[str, Any]],
    "counters": NotRequired[dict[str, list[dict[str, Any]]]],
    "ipvs_decisions": NotRequired[dict[str, list[dict[str, Any]]]],
    "drops": NotRequired[dict[str, Any]],
    "verdict": NotRequired[dict[str, Any] | None],
})


class CheckReport(TypedDict):
    """One expectation's verdict (kpemu.analyse.expect.Check.to_json)."""

    flow: str
    what: str
    ok: bool
    expected: str
    seen: str
    diff: str


class RunReport(TypedDict):
    """A whole run: hops.json."""

    scenario: str
    mode: NotRequired[str]  # kube-proxy's mode
    lab: NotRequired[str]
    runtime: str
    reason: str
    kernel: str
    ok: bool
    faults: NotRequired[list[dict[str, Any]]]  # the faults applied (kpemu.plan.faultstep.AppliedFault)
    flows: list[FlowReport]
    checks: list[CheckReport]
    seconds: float
    trace: NotRequired[bool]
    # the real kube-proxy's run (kpemu.realproxy): version, build, binary, controlPlaneSeconds, syncSeconds,
    # resynced, and modelVsReal (each part where its rules differ from the model's: node, what, diff)
    kubeProxy: NotRequired[dict[str, Any]]


def representative(flow: FlowReport) -> ConnectionReport | None:
    """The connection the hop table shows: the first one that was seen at all (else the first one)."""
    conns = flow["connections"]
    return next((c for c in conns if request_hops(c)), conns[0] if conns else None)


def request_hops(conn: ConnectionReport) -> list[HopReport]:
    """The connection's hops on the way to its destination."""
    return [h for h in conn["hops"] if h["direction"] == "request"]
