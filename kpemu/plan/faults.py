"""Classic misconfigurations as data (pure): what each fault of a scenario changes in the lab's
own namespaces, and the symptom it produces, for kernel/faults.py to apply and the report to show.

Every change stays inside the lab's namespaces (a node's or a pod's): a sysctl, an MTU, a route,
an address released, kube-proxy rules deleted or re-synced. Nothing touches the root namespace; the
one kernel-wide setting (conntrack-full's nf_conntrack_max) is applied only in kpemu's guest.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from kpemu import cni as cni_registry
from kpemu.model.names import netns_name
from kpemu.model.scenario import Fault
from kpemu.model.topology import Topology
from kpemu.proxy.modes import node_state
from kpemu.proxy.proxymode import restore_step

CONNTRACK_MAX = "net/netfilter/nf_conntrack_max"


@dataclass(frozen=True)
class FaultStep:
    """One fault, ready to apply: commands run in `netns`, rules deleted there, and its story."""

    kind: str
    member: str
    netns: str
    commands: tuple[tuple[str, ...], ...] = ()  # argv run inside the namespace, in order
    delete_rules: tuple[str, tuple[str, ...], str] | None = None  # (table, chains, -j target): rules removed
    change: str = ""  # what was changed, in words
    symptom: str = ""  # what it breaks, and how the report shows it
    after: str | None = None  # the flow after which it is applied (None: before the first flow)
    elsewhere: tuple[tuple[str, tuple[str, ...], str | None], ...] = ()  # (netns, argv, stdin) run afterwards
    rules_changed: tuple[str, ...] = ()  # nodes whose kube-proxy rules it re-synced
    # (sysctl path, value) of a kernel-wide setting: set only in a disposable guest, restored after the run
    kernel_wide: tuple[str, str] | None = None

    def to_json(self) -> dict:
        return asdict(self)


def _sysctl(key: str, value: str) -> tuple[str, ...]:
    return ("sysctl", "-q", "-w", f"{key}={value}")


def plan_fault(topo: Topology, f: Fault) -> FaultStep:
    """The step for one fault of a validated scenario."""
    return replace(_plan_fault(topo, f), after=f.after)


def _plan_fault(topo: Topology, f: Fault) -> FaultStep:
    if f.kind == "stale-conntrack":
        return _stale_conntrack(topo, f)
    if f.kind == "stale-rules":
        pod = next(p for p in topo.pods if p.name == f.pod)
        return FaultStep(
            f.kind, pod.name, netns_name(topo.name, pod.name), commands=(("ip", "address", "flush", "dev", "eth0"),),
            change=f"pod {pod.name} is gone (its address {pod.ip} released) and kube-proxy did not sync: its "
                   "KUBE-SEP rules still DNAT to it",
            symptom=f"connections the Service sends to {pod.ip} are DNATed to an address nobody answers: the node's "
                    "ARP for it fails (NEIGH_FAILED) and the client times out")
    node = f.node or ""
    ns = netns_name(topo.name, node)
    if f.kind == "conntrack-full":
        return FaultStep(
            f.kind, node, ns, commands=(("conntrack", "-F"),),
            kernel_wide=(CONNTRACK_MAX, str(f.limit)),
            change=f"nf_conntrack_max set to {f.limit} (kernel-wide, so in the guest kernel only) and {node}'s "
                   f"conntrack table emptied: {node} keeps at most {f.limit} connections",
            symptom=f"once {node} tracks {f.limit} connections that conntrack may not evict (assured ones: answered "
                    "TCP, closed ones in TIME_WAIT too), the first packet of every new connection through it is "
                    "dropped in the netfilter hook (NETFILTER_DROP in nf_hook_slow, no rule involved; the kernel "
                    "logs `nf_conntrack: table full, dropping packet`) and the client times out")
    if f.kind == "mtu-mismatch":
        return FaultStep(
            f.kind, node, ns, commands=(("ip", "link", "set", "dev", f.device, "mtu", str(f.mtu)),),
            change=f"{node}/{f.device} MTU set to {f.mtu}; every other interface keeps its MTU",
            symptom=f"the handshake and small packets pass; a packet larger than {f.mtu} bytes that must leave "
                    f"{node} by {f.device} with Don't Fragment set is dropped (PKT_TOO_BIG) and its sender gets "
                    "ICMP fragmentation needed")
    if f.kind == "rp-filter":
        dev = cni_registry.cni_of(topo).pod_device  # where a route "sent astray" points
        return FaultStep(
            f.kind, node, ns,
            commands=(_sysctl("net.ipv4.conf.all.rp_filter", "1"), _sysctl("net.ipv4.conf.eth0.rp_filter", "1"),
                      ("ip", "route", "replace", str(f.source), "dev", dev)),
            change=f"strict reverse-path filtering (rp_filter=1) on {node}, and a route to {f.source} via {dev}: "
                   "the way back to those clients is not the way their packets come in",
            symptom=f"packets from {f.source} arriving on {node}'s eth0 fail the reverse-path check (the route back "
                    f"leaves by {dev}): the kernel drops them on input (IP_RPFILTER) after nat PREROUTING, before "
                    "any filter rule")
    if f.kind == "no-masquerade":
        return FaultStep(
            f.kind, node, ns, delete_rules=("nat", ("KUBE-POSTROUTING", *cni_registry.masquerade_chains()),
                                            "MASQUERADE"),
            change=f"every MASQUERADE rule of {node} removed (kube-proxy's in KUBE-POSTROUTING, and the CNI's, which "
                   "would otherwise masquerade traffic into the pod network too): forwarded packets keep the client's "
                   "source address",
            symptom="the backend answers the client's own address directly: the reply leaves by the backend's node, "
                    "not by the node the client connected to, so nothing reverses the DNAT and it is dropped on the "
                    "wrong way home (conntrack there never saw the request: INVALID; or the client has no socket "
                    "for the pod's address)")
    # no-br-netfilter
    return FaultStep(
        f.kind, node, ns, commands=(_sysctl("net.bridge.bridge-nf-call-iptables", "0"),),
        change=f"bridge netfilter off on {node} (net.bridge.bridge-nf-call-iptables=0)",
        symptom="packets between two pods on the same bridge skip iptables: a pod that reaches a Service whose "
                "backend is on the same node gets the reply straight from the backend's address, without the "
                "reverse DNAT; its socket never asked for that tuple (NO_SOCKET) and the connection fails")


def replaced_endpoint(topo: Topology, gone: str, new: str | None) -> Topology:
    """The topology after pod `gone` was deleted and the not-ready pod `new` became ready."""
    old = next(p for p in topo.pods if p.name == gone)
    pods = [p.model_copy(update={"ready": True}) if p.name == new else p for p in topo.pods if p.name != gone]
    new_ip = next((p.ip for p in pods if p.name == new), None)
    services = []
    for svc in topo.services:  # a Service with explicit endpoints: the old address replaced (or dropped)
        if svc.endpoints:
            eps = [e.model_copy(update={"ip": new_ip}) if e.ip == old.ip else e for e in svc.endpoints
                   if e.ip != old.ip or new_ip is not None]
            svc = svc.model_copy(update={"endpoints": eps})
        services.append(svc)
    return topo.model_copy(update={"pods": pods, "services": services})


def resync_text(old: str, new: str) -> str:
    """kube-proxy's next iptables-restore input after a change: `new` (a first-sync text) without the jumps it
    inserts into the built-in chains, and, per table, every chain of `old` it no longer has flushed and
    deleted (`:CHAIN` then `-X CHAIN`, as kube-proxy's sync writes them)."""
    def chains(text: str) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        table = ""
        for line in text.splitlines():
            if line.startswith("*"):
                table = line[1:]
                out[table] = []
            elif line.startswith(":"):
                out[table].append(line[1:].split()[0])
        return out

    before, after = chains(old), chains(new)
    lines: list[str] = []
    table, stale, pending = "", [], False
    for line in new.splitlines():
        if line.startswith("*"):
            table = line[1:]
            stale = [c for c in before.get(table, []) if c not in after[table]]
            pending = True
        elif pending and not line.startswith(":"):  # declared with the others: flushed here, deleted at COMMIT
            lines += [f":{c} - [0:0]" for c in stale]
            pending = False
        if line == "COMMIT":
            lines += [f"-X {c}" for c in stale]
        elif line.startswith(("-A ", "-I ")) and line.split()[1] not in after[table]:
            continue  # a jump from a built-in chain: kube-proxy inserts those once, not on every sync
        lines.append(line)
    return "\n".join(lines) + "\n"


def _stale_conntrack(topo: Topology, f: Fault) -> FaultStep:
    pod = next(p for p in topo.pods if p.name == f.pod)
    after = replaced_endpoint(topo, pod.name, f.replacement)
    def restore(topology: Topology, node: str) -> str:
        return node_state(topology, node).texts["iptables-restore"]

    steps = [restore_step(f"{n.name}: kube-proxy's re-sync", netns_name(topo.name, n.name),
                          resync_text(restore(topo, n.name), restore(after, n.name)), topo.kubeProxy.backend)
             for n in topo.nodes]
    node_ns = netns_name(topo.name, pod.node)
    new = f" and {f.replacement} became ready in its place" if f.replacement else ""
    return FaultStep(
        f.kind, pod.name, netns_name(topo.name, pod.name), commands=(("ip", "address", "flush", "dev", "eth0"),),
        elsewhere=((node_ns, ("ip", "neigh", "flush", "to", pod.ip), None),
                   *((s.ns, s.argv, s.input) for s in steps)),
        rules_changed=tuple(n.name for n in topo.nodes),
        change=f"pod {pod.name} ({pod.ip}) was deleted{new}; kube-proxy re-synced every node's rules to the new "
               f"endpoints, but did not clear the conntrack entries of UDP connections to {pod.ip} (kube-proxy "
               f"runs `conntrack -D` for them; here it did not). {pod.node}'s neighbour entry for {pod.ip} is "
               "flushed, as it would have expired by itself",
        symptom=f"a UDP client that keeps its source port still matches its conntrack entry, which DNATs every "
                f"packet to {pod.ip}, not through the new rules: the packets go to the deleted pod, {pod.node} "
                "asks ARP for it, nobody answers and the kernel drops them (NEIGH_FAILED), sending ICMP host "
                "unreachable back; a new source port gets a new entry and the new endpoint")


def plan_faults(topo: Topology, faults: list[Fault]) -> list[FaultStep]:
    """The steps for a scenario's faults, in the order written."""
    return [plan_fault(topo, f) for f in faults]
