"""A flow's trace (pure): which packets it covers, and what it brought back.

`FlowMatch` holds the tuples a flow's packets can carry (built on the host by `flow_match`), and
`trace_restore_text` the iptables TRACE rules that select them; both are carried in the job and
installed by kpemu.kernel.tracers wherever the job runs. `TraceData` is what the executor brings back
for the flow (trace texts, the `CounterSnapshot`s around it, kernel drops), carried in collected.json
to the analysis (kpemu.analyse.explain).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kpemu.model.scenario import ResolvedFlow
    from kpemu.model.topology import External, Topology

LOST_EVENTS = "No buffer space available"  # xtables-monitor's last words when its socket overflowed


@dataclass(frozen=True)
class FlowMatch:
    """The tuples a flow's packets can carry: client -> service, and after DNAT -> backends."""

    proto: str  # tcp | udp | sctp
    client: str | None  # source address (None: any source)
    dst: str
    dport: int
    backends: tuple[tuple[str, int], ...] = ()
    tag: str = "flow"
    # TCP: trace only packets with SYN set (each connection's SYN and SYN-ACK). xtables-monitor
    # looks every traced rule up while printing; a whole connection's packets traced at full
    # speed overflow its netlink socket (ENOBUFS) and it exits, losing every later event.
    syn_only: bool = False


def trace_rule_args(m: FlowMatch) -> list[tuple[str, ...]]:
    """The match arguments of the TRACE rules for one flow (pure; same rules for both chains)."""
    p = m.proto.lower()
    com = ("-m", "comment", "--comment", f"kpemu-trace:{m.tag}")
    src = ("-s", m.client) if m.client else ()
    back = ("-d", m.client) if m.client else ()
    syn = ("--tcp-flags", "SYN", "SYN") if m.syn_only and p == "tcp" else \
        ("--chunk-types", "any", "INIT,INIT_ACK") if m.syn_only and p == "sctp" else ()
    out = [
        (*src, "-d", m.dst, "-p", p, "-m", p, "--dport", str(m.dport), *syn, *com, "-j", "TRACE"),
        ("-s", m.dst, *back, "-p", p, "-m", p, "--sport", str(m.dport), *syn, *com, "-j", "TRACE"),
    ]
    for ip, port in m.backends:
        # after DNAT (and SNAT on the way to another node) the source is no longer the client's
        out.append(("-d", ip, "-p", p, "-m", p, "--dport", str(port), *syn, *com, "-j", "TRACE"))
        out.append(("-s", ip, "-p", p, "-m", p, "--sport", str(port), *syn, *com, "-j", "TRACE"))
    return out


def trace_restore_text(m: FlowMatch, op: str = "-A") -> str:
    """iptables-restore input adding (`-A`) or deleting (`-D`) the flow's TRACE rules."""
    lines = ["*raw"]
    for chain in ("PREROUTING", "OUTPUT"):
        for args in trace_rule_args(m):
            lines.append(" ".join([op, chain, *(f'"{a}"' if " " in a else a for a in args)]))
    return "\n".join([*lines, "COMMIT"]) + "\n"


@dataclass(frozen=True)
class CounterSnapshot:
    """Per node: `iptables-save -c` text; `ipvsadm -Ln --stats` text when the mode balances with IPVS
    (read by kpemu.kernel.snapshot)."""

    iptables: dict[str, str] = field(default_factory=dict)
    ipvs_stats: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TraceData:
    """What the kernel side collected for one flow (texts only; empty when tracing was off)."""

    texts: dict[str, str] = field(default_factory=dict)  # node -> xtables-monitor --trace output
    unavailable: str | None = None
    before: CounterSnapshot | None = None  # the counters just before the flow, and just after
    after: CounterSnapshot | None = None
    drops_unavailable: str | None = None
    drop_members: dict[str, str] = field(default_factory=dict)  # netns inode -> lab member
    drops: str = ""  # the kernel drop tracer's text inside this flow's window (kernel/drops.py)


def member_ip(topo: Topology, member: str) -> str | None:
    """The address a lab member sends from (pod IP, external IP, node underlay IP)."""
    for group in (topo.pods, topo.externals, topo.nodes):
        for m in group:
            if m.name == member:
                return m.ip
    return None


def load_balancer_of(topo: Topology, flow: ResolvedFlow) -> External | None:
    """The external load balancer whose VIP the flow is sent to (None: the flow goes elsewhere)."""
    return next((e for e in topo.externals if e.role == "loadbalancer" and e.vip == flow.dst_ip), None)


def flow_match(topo: Topology, flow: ResolvedFlow, tag: str | None = None) -> FlowMatch:
    """The tuples to trace for one flow: client -> destination, and every address it can be NATed to.

    The candidates are the flow's backend pods (every port they serve with the flow's protocol);
    a flow to an external load balancer's VIP reaches the nodes as NodePort traffic from the
    balancer, so each node's NodePorts of the balanced Services are added too.
    """
    proto = flow.protocol.upper()
    cands: list[tuple[str, int]] = []
    pods = set(flow.candidates)
    lb = load_balancer_of(topo, flow)
    svcs = [s for s in topo.services if lb is not None and s.key in lb.backends]
    # imported here, not at the top: the executor imports this module for FlowMatch, and in the guest it
    # must not load the schema's modules (pydantic costs seconds under emulation)
    from kpemu.model.validate import selected_pods

    for s in svcs:
        pods |= {p.name for p in selected_pods(topo, s)} if s.selector is not None else set()
        for sp in s.ports:
            if sp.nodePort and sp.protocol == proto:
                cands += [(n.ip, sp.nodePort) for n in topo.nodes]
    for p in topo.pods:
        if p.name in pods:
            cands += [(p.ip, pp.port) for pp in p.ports if pp.protocol == proto]
    uniq = tuple(dict.fromkeys(c for c in cands if c != (flow.dst_ip, flow.dst_port)))
    return FlowMatch(proto.lower(), member_ip(topo, flow.src_member), flow.dst_ip, flow.dst_port, uniq,
                     tag or flow.flow.name, syn_only=True)
