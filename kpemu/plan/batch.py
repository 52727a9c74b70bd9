"""A plan as kernel steps: one `ip -batch` (or `bridge -batch`) per namespace and phase, sysctl writes,
and the devices whose TX checksum offload goes off (pure).

This is how every lab is built, on the host and in the guest: a handful of processes per namespace,
not one per object, and nothing to import but the standard library on the executing side (see
kpemu.jobs.execute). Veth pairs are created from the executor's own namespace straight into their
two lab namespaces (`link add A netns X type veth peer name B netns Y`), so the namespace the
executor runs in never holds a lab device.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from kpemu.plan.types import Plan, Route, Sysctl

StepKind = Literal["run", "sysctl", "txcsum-off", "nfacct", "containers"]


@dataclass(frozen=True)
class Step:
    """One kernel operation, run in namespace `ns` (None: where the executor runs).

    kind "run": `argv` with `input` on stdin; "sysctl": write `sysctls` (key, value, optional);
    "txcsum-off": turn TX checksum offload off on `devices`; "nfacct": create kube-proxy's nfacct counters;
    "containers": start the container members named in `devices` and bind their namespaces.
    """

    kind: StepKind
    what: str
    ns: str | None = None
    argv: tuple[str, ...] = ()
    input: str | None = None
    sysctls: tuple[tuple[str, str, bool], ...] = ()
    devices: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "what": self.what, "ns": self.ns, "argv": list(self.argv), "input": self.input,
                "sysctls": [list(s) for s in self.sysctls], "devices": list(self.devices)}


@dataclass
class _PerNs:
    lines: dict[str, list[str]] = field(default_factory=dict)

    def add(self, ns: str, line: str) -> None:
        self.lines.setdefault(ns, []).append(line)


def batch_step(what: str, ns: str | None, lines: Iterable[str], tool: str = "ip") -> Step:
    """`ip -batch -` (or `bridge -batch -`) of `lines` in `ns`; -force goes on past nothing: the first
    failing line stops the batch and names itself."""
    return Step("run", what, ns, (tool, "-batch", "-"), "\n".join(lines) + "\n")


def sysctl_steps(what: str, sysctls: Iterable[Sysctl]) -> list[Step]:
    """One sysctl step per namespace, in first-seen order."""
    by_ns: dict[str, list[tuple[str, str, bool]]] = {}
    for s in sysctls:
        by_ns.setdefault(s.ns, []).append((s.key, s.value, s.optional))
    return [Step("sysctl", f"{what} in {ns}", ns, sysctls=tuple(v)) for ns, v in by_ns.items()]


def route_line(r: Route) -> str:
    """`route replace ...` for one route, as `ip -batch` reads it."""
    parts = ["route", "replace"]
    if r.type == "blackhole":
        parts += ["blackhole", r.dst]
    else:
        parts.append(r.dst)
        if r.via:
            parts += ["via", r.via]
        if r.dev:
            parts += ["dev", r.dev]
        if r.scope != "universe":
            parts += ["scope", r.scope]
        if r.onlink:
            parts.append("onlink")
    if r.proto != "boot":
        parts += ["proto", r.proto]
    return " ".join(parts)


def is_namespace_wide(s: Sysctl) -> bool:
    """conf/all, conf/default and non-device keys: written before the devices exist."""
    parts = s.key.split("/")
    return not (len(parts) > 4 and parts[2] in ("conf", "neigh") and parts[3] not in ("all", "default"))


def fabric_steps(plan: Plan, mark: str = "", containers: tuple[str, ...] = ()) -> list[Step]:
    """The steps that build the plan's namespaces and wiring (not its netfilter rules), in order.

    `mark` becomes each namespace's loopback alias in its first batch (kpemu.kernel.owner: whose it is).
    The namespaces of `containers` (members) are their containers', bound by a "containers" step.
    """
    steps = [batch_step("create the namespaces", None, (f"netns add {ns.name}" for ns in plan.namespaces
                                                         if ns.member not in containers))]
    if containers:
        steps.append(Step("containers", "start the container members", devices=containers))
    steps += sysctl_steps("namespace sysctls", (s for s in plan.sysctls if is_namespace_wide(s)))
    veths = []
    for v in plan.veths:
        a = f" address {v.mac}" if v.mac else ""
        b = f" address {v.peer_mac}" if v.peer_mac else ""
        veths.append(f"link add {v.name} netns {v.ns} mtu {v.mtu}{a} type veth peer name {v.peer_name} "
                     f"netns {v.peer_ns} mtu {v.mtu}{b}")
    if veths:
        steps.append(batch_step("create the veth pairs", None, veths))
    links = _PerNs()
    for ns in plan.namespaces if mark else ():
        links.add(ns.name, f"link set lo alias {mark}")
    for br in plan.bridges:
        links.add(br.ns, f"link add {br.name} mtu {br.mtu} type bridge")
    for x in plan.vxlans:
        links.add(x.ns, f"link add {x.name} address {x.mac} mtu {x.mtu} type vxlan id {x.vni} local {x.local} "
                        f"dev {x.dev} dstport {x.port} nolearning")
    for t in plan.tunnels:
        links.add(t.ns, f"link set {t.name} mtu {t.mtu}")
    for p in plan.ports:
        links.add(p.ns, f"link set {p.dev} master {p.master}")
        if p.hairpin:
            links.add(p.ns, f"link set {p.dev} type bridge_slave hairpin on")
    for addr in plan.addresses:
        links.add(addr.ns, f"addr add {addr.cidr} dev {addr.dev}")
    for ns in plan.namespaces:
        for dev in ["lo", *plan.devices_in(ns.name)]:
            links.add(ns.name, f"link set {dev} up")
    steps += [batch_step(f"links and addresses in {ns}", ns, lines) for ns, lines in links.lines.items()]
    steps += sysctl_steps("device sysctls", (s for s in plan.sysctls if not is_namespace_wide(s)))
    ends: dict[str, list[str]] = {}
    for v in plan.veths:
        ends.setdefault(v.ns, []).append(v.name)
        ends.setdefault(v.peer_ns, []).append(v.peer_name)
    steps += [Step("txcsum-off", f"TX checksum offload off in {ns}", ns, devices=tuple(d)) for ns, d in ends.items()]
    entries = _PerNs()
    for n in plan.neighbours:
        entries.add(n.ns, f"neigh replace {n.ip} lladdr {n.mac} dev {n.dev} nud permanent")
    for r in plan.routes:
        entries.add(r.ns, route_line(r))
    fdb = _PerNs()
    for e in plan.fdb:
        fdb.add(e.ns, f"fdb append {e.mac} dev {e.dev} dst {e.dst} self permanent")
    steps += [batch_step(f"neighbours and routes in {ns}", ns, lines) for ns, lines in entries.lines.items()]
    steps += [batch_step(f"VXLAN forwarding entries in {ns}", ns, lines, "bridge") for ns, lines in fdb.lines.items()]
    return steps


def teardown_lines(namespaces: Iterable[str]) -> str:
    """`ip -batch` input removing namespaces (and with them everything inside)."""
    return "".join(f"netns del {ns}\n" for ns in namespaces)
