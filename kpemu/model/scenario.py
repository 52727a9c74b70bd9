"""The scenario schema: a topology (file or inline), overrides, flows to send, expectations.

A scenario names where traffic starts (`from:` a lab member), where it goes (`to:` a pod, a
service through one of its front doors, a node's NodePort or a plain address) and what must be
seen. Shape errors come from pydantic, cross-field checks from `check_expectations`; both become
`Problem`s with a field path such as `flows[0].to.service`, and loading (kpemu.inputs.scenario) stops
before anything is created (exit 2). Where each flow goes is worked out by kpemu.plan.flows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from kpemu.errors import Problem
from kpemu.model.modes import MODE_FACTS
from kpemu.model.topology import LabName, Strict, Topology, _check_ip

FlowName = Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$")]
MAX_CONNECTIONS = 64
Via = Literal["clusterIP", "nodePort", "loadBalancer", "externalIP"]
Outcome = Literal["reply", "refused", "dropped", "no-reply"]  # no-reply: connected, never answered


class Target(Strict):
    """Where a flow goes: exactly one of pod, service, node (+nodePort) or address (+port)."""

    pod: str | None = None
    service: str | None = None  # namespace/name (namespace defaults to "default")
    via: Via | None = None
    node: str | None = None  # the node whose NodePort (via: nodePort) or address is used
    nodePort: int | None = Field(None, ge=1, le=65535)
    address: str | None = None
    port: int | None = Field(None, ge=1, le=65535)  # pod port, service port, or address port

    _addr = field_validator("address")(lambda v: None if v is None else _check_ip(v))

    @model_validator(mode="after")
    def _one_kind(self) -> Target:
        kinds = [k for k in ("pod", "service", "address") if getattr(self, k) is not None]
        if self.node is not None and self.service is None and self.nodePort is None and self.port is None:
            raise ValueError("to: {node: N} needs nodePort: P (or port: P for the node's own address)")
        if self.node is not None and self.service is None:
            kinds.append("node")
        if len(kinds) != 1:
            raise ValueError(
                "expected exactly one destination: {pod: NAME}, {service: NS/NAME, via: clusterIP|nodePort|"
                f"loadBalancer|externalIP}}, {{node: NAME, nodePort: PORT}} or {{address: IP, port: PORT}}; got "
                f"{kinds or 'none'}"
            )
        if self.address is not None and self.port is None:
            raise ValueError("to: {address: IP} needs port: PORT")
        if self.via is not None and self.service is None:
            raise ValueError("via only applies to to: {service: NS/NAME}")
        return self


class Flow(Strict):
    """Traffic from one lab member to one destination: `connections` sequential connections."""

    name: FlowName
    from_: str = Field(alias="from")
    to: Target
    protocol: Literal["TCP", "UDP", "SCTP"] | None = None  # default: the destination port's protocol
    connections: int = Field(1, ge=1, le=MAX_CONNECTIONS)
    timeout: float = Field(2.0, gt=0, le=10)  # seconds per connection attempt
    size: int | None = Field(None, ge=1, le=60000)  # request bytes (default: just the marker line)
    http: str | None = None  # an HTTP GET of this path instead of the marker line
    # A container client's own command per connection; {dst} {port} {path} {timeout} {marker} are filled in.
    command: list[str] | None = None
    # Every connection sends from this local port (UDP): one conntrack entry for all of them, as a
    # long-lived UDP client (a resolver, a syslog or statsd sender) keeps while it runs.
    sourcePort: int | None = Field(None, ge=1024, le=65535)

    @field_validator("http")
    @classmethod
    def _path(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"/[!-~]*", v):
            raise ValueError(f"expected a URL path such as / or /index.html, got {v!r}")
        return v


class HopExpect(Strict):
    """The tuple that must be seen at a capture point: `at: member/interface`."""

    at: str
    direction: Literal["request", "reply"] = "request"
    src: str | None = None  # "IP" or "IP:PORT"
    dst: str | None = None
    outer: str | None = None  # "vxlan" | "ipip" | "none"

    @field_validator("at")
    @classmethod
    def _at(cls, v: str) -> str:
        if v.count("/") != 1 or not all(v.split("/")):
            raise ValueError(f"expected member/interface such as nginx-0/eth0 or node1/flannel.1, got {v!r}")
        return v

    @field_validator("src", "dst")
    @classmethod
    def _endpoint(cls, v: str | None) -> str | None:
        if v is None:
            return v
        ip, _, port = str(v).partition(":")
        _check_ip(ip)
        if port and not (port.isdigit() and 0 < int(port) < 65536):
            raise ValueError(f"expected IP or IP:PORT such as 10.244.1.5:80, got {v!r}")
        return str(v)


class RulesExpect(Strict):
    """Lines the kernel must hold on a node after deploy (read back into rules/<node>.<kind>)."""

    node: str
    kind: Literal["iptables-save", "ipset", "ipvs", "nft"] = "iptables-save"
    contains: list[str] = Field(min_length=1)
    # the kube-proxy mode the lines are for: checked only in a run of that mode (None: the topology's own)
    mode: str | None = Field(None, json_schema_extra=lambda s: s.update(enum=[*MODE_FACTS, None]))

    @field_validator("mode")
    @classmethod
    def _mode(cls, v: str | None) -> str | None:
        if v is not None and v not in MODE_FACTS:
            raise ValueError(f"unknown kube-proxy mode {v!r}; expected one of {', '.join(MODE_FACTS)}")
        return v


class DiedExpect(Strict):
    """Where and why the flow's unanswered connections died: every field is optional; `by` and
    `reason` are found in the verdict's words (chain, rule, function; drop reason, ICMP type, why)."""

    at: str | None = None  # the member (node, pod, external) where it died
    by: str | None = None  # e.g. KUBE-EXTERNAL-SERVICES, KUBE-FORWARD, tcp_v4_rcv
    reason: str | None = None  # e.g. DROP, REJECT, IP_RPFILTER, NO_SOCKET, port unreachable


class Expectation(Strict):
    """What must hold for one flow."""

    flow: str
    reply: bool | None = None  # shorthand: true = outcome reply
    outcome: Outcome | None = None  # reply | refused | dropped (timed out), for every connection
    backends: list[str] | None = None  # every one of these pods must answer; no other may
    hops: list[HopExpect] = Field(default_factory=list)
    golden: str | bool | None = None  # directory (relative to the scenario file) or true
    rules: list[RulesExpect] = Field(default_factory=list)
    died: DiedExpect | None = None  # where and why it died (a verdict from the kernel)
    httpStatus: int | None = Field(None, ge=100, le=599)  # every connection's HTTP status (flows with http:)
    bodyContains: str | None = Field(None, min_length=1)  # a substring of every connection's answer

    @model_validator(mode="after")
    def _consistent(self) -> Expectation:
        if self.reply is not None and self.outcome is not None and (self.outcome == "reply") != self.reply:
            raise ValueError(f"reply: {self.reply} contradicts outcome: {self.outcome}; give one of them")
        if self.died is not None and self.wanted_outcome == "reply":
            raise ValueError("died: contradicts reply: true / outcome: reply; a connection that is answered "
                             "does not die")
        return self

    @property
    def wanted_outcome(self) -> Outcome | None:
        if self.outcome:
            return self.outcome
        if self.reply is None:
            return None
        return "reply" if self.reply else "dropped"


# The validation context key under which the reader gives the fault kinds (kpemu.faults.names()): the
# model cannot import the fault registry, which plans with the layers above it.
FAULT_KINDS = "fault_kinds"


class Fault(Strict):
    """A classic misconfiguration applied to the deployed lab (what each kind does: its module in kpemu/faults/)."""

    kind: str  # one of the fault registry's names, checked when they are given (FAULT_KINDS)
    node: str | None = None  # the node it is applied on (every kind but stale-rules)
    pod: str | None = None  # stale-rules, stale-conntrack: the pod that goes away
    replacement: str | None = None  # stale-conntrack: the not-ready pod that becomes ready in its place
    # stale-conntrack: whether kube-proxy finds the conntrack tool (before 1.32 its UDP cleanup runs it;
    # 1.32+ uses netlink)
    conntrackTool: bool = True
    after: str | None = None  # the flow after which it is applied (default: before the first flow)
    mtu: int | None = Field(None, ge=576, le=9000)  # mtu-mismatch: the smaller MTU
    device: str = "eth0"  # mtu-mismatch: the node interface that gets it
    source: str | None = None  # rp-filter: the client prefix whose return route is sent astray (CIDR)
    limit: int | None = Field(None, ge=1, le=1024)  # conntrack-full: nf_conntrack_max (entries per namespace)

    @field_validator("kind", mode="before")
    @classmethod
    def _kind(cls, v: Any, info: ValidationInfo) -> Any:
        kinds = (info.context or {}).get(FAULT_KINDS)
        if kinds is not None and v not in kinds:
            *names, last = (repr(k) for k in kinds)
            raise ValueError(f"Input should be {', '.join(names)} or {last}")
        return v


class ScenarioSpec(Strict):
    """The file as written."""

    name: LabName
    description: str = ""
    lab: LabName | None = None  # lab name (namespace prefix); default: the scenario name
    topology: str | dict[str, Any]
    overrides: dict[str, Any] = Field(default_factory=dict)
    flows: list[Flow] = Field(min_length=1)
    expect: list[Expectation] = Field(default_factory=list)
    faults: list[Fault] = Field(default_factory=list)  # applied in order after deploy (or after a flow)
    settle: float = Field(0.2, ge=0, le=5)  # seconds to let packets drain before captures stop
    snaplen: int = Field(512, ge=96, le=262144)  # bytes tcpdump keeps of each frame (the pcaps say so)


@dataclass(frozen=True)
class ResolvedFlow:
    """A flow with its destination worked out: address, port, protocol, source member."""

    flow: Flow
    src_member: str
    dst_ip: str
    dst_port: int
    protocol: Literal["TCP", "UDP", "SCTP"]
    candidates: tuple[str, ...]  # pods that could answer (for captures and reports)
    src_container: bool = False  # the source is a container member (it runs its own client command)


@dataclass(frozen=True)
class Scenario:
    """A loaded, validated scenario and its (overridden, renamed) topology."""

    spec: ScenarioSpec
    topology: Topology
    path: Path
    flows: tuple[ResolvedFlow, ...]

    @property
    def name(self) -> str:
        return self.spec.name

    def golden_dir(self, exp: Expectation) -> Path | None:
        """Where the goldens of `exp` live: scenarios/<name>/golden/ for `golden: true`."""
        if exp.golden is None or exp.golden is False:
            return None
        if exp.golden is True:
            return self.path.parent / self.name / "golden"
        return (self.path.parent / str(exp.golden)).resolve()


def check_flow_names(spec: ScenarioSpec, file: str) -> list[Problem]:
    """Every flow name is given once."""
    names = [f.name for f in spec.flows]
    return [Problem(file, f"flows[{i}].name", f"flow {n!r} is defined twice")
            for i, n in enumerate(names) if names.index(n) != i]


def check_expectations(spec: ScenarioSpec, topo: Topology, file: str, points: set[str]) -> list[Problem]:
    """Cross-field checks of flows and expectations: container flows fit their source, and the flows,
    backends, hop points (of `points`), members and nodes named exist."""
    problems: list[Problem] = []
    names = [f.name for f in spec.flows]
    containers = topo.containers()
    for i, f in enumerate(spec.flows):
        if f.command is not None and f.from_ not in containers:
            problems.append(Problem(file, f"flows[{i}].command", f"{f.from_} is not a container; a command needs "
                                                                 "a source with image: (or drop command:)"))
        if (f.http is not None or f.command is not None) and (f.protocol or "TCP") != "TCP":
            problems.append(Problem(file, f"flows[{i}].protocol", "http: and command: flows are TCP"))
        if f.from_ in containers and f.http is None and f.command is None:
            problems.append(Problem(file, f"flows[{i}]", f"{f.from_} is a container: give http: PATH (it runs "
                                                         "wget) or command: [...] (its own client)"))
    http_flows = {f.name for f in spec.flows if f.http is not None}
    pods = {p.name for p in topo.pods}
    for i, e in enumerate(spec.expect):
        base = f"expect[{i}]"
        if e.flow not in names:
            problems.append(Problem(file, f"{base}.flow", f"unknown flow {e.flow!r}; expected one of {names}"))
        if e.httpStatus is not None and e.flow in names and e.flow not in http_flows:
            problems.append(Problem(file, f"{base}.httpStatus", f"flow {e.flow} is not HTTP; give it http: PATH"))
        for j, b in enumerate(e.backends or []):
            if b not in pods:
                problems.append(Problem(file, f"{base}.backends[{j}]", f"unknown pod {b!r}; expected pods of the "
                                                                      f"topology: {sorted(pods)}"))
        for j, h in enumerate(e.hops):
            if h.at not in points:
                problems.append(Problem(file, f"{base}.hops[{j}].at", f"no capture point {h.at!r}; expected "
                                                                      f"member/interface, one of {sorted(points)}"))
            if h.outer not in (None, "vxlan", "ipip", "none"):
                problems.append(Problem(file, f"{base}.hops[{j}].outer", "expected vxlan, ipip or none"))
        if e.died is not None and e.died.at is not None and e.died.at not in {*topo.member_kinds(), "underlay"}:
            problems.append(Problem(file, f"{base}.died.at", f"unknown member {e.died.at!r}; expected a node, pod, "
                                                            f"external or underlay: {sorted(topo.member_kinds())}"))
        for j, r in enumerate(e.rules):
            if r.node not in {n.name for n in topo.nodes}:
                problems.append(Problem(file, f"{base}.rules[{j}].node", f"unknown node {r.node!r}; expected one "
                                                                        f"of {sorted(n.name for n in topo.nodes)}"))
        if e.golden is not None and not isinstance(e.golden, bool) and Path(str(e.golden)).is_absolute():
            problems.append(Problem(file, f"{base}.golden", "expected a directory relative to the scenario file"))
    return problems
