"""stale-conntrack: a UDP Service's pod is replaced (or removed) and kube-proxy re-syncs every node; its
UDP conntrack cleanup then does what the release does (kpemu.proxy.ctplan): before 1.32 the conntrack
tool for the endpoints the sync saw go (nothing without the tool, `conntrackTool: false`), from 1.32 the
netlink reconciler. Stale entries it leaves keep DNATing a client that keeps its source port to the
deleted pod."""

from __future__ import annotations

from kpemu.faults.spec import FaultSpec
from kpemu.model.modes import MODE_FACTS
from kpemu.model.names import netns_name
from kpemu.model.scenario import Fault
from kpemu.model.topology import Topology
from kpemu.plan.faultstep import FaultStep
from kpemu.proxy.ctplan import cleanup
from kpemu.proxy.endpoints import service_ports
from kpemu.proxy.modes import node_state
from kpemu.proxy.proxymode import restore_step
from kpemu.proxy.versions import Flavour, flavour_for


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


def plan(topo: Topology, f: Fault) -> FaultStep:
    """The pod's address released, every node's rules re-synced to the new endpoints, conntrack kept."""
    pod = next(p for p in topo.pods if p.name == f.pod)
    after = replaced_endpoint(topo, pod.name, f.replacement)
    def restore(topology: Topology, node: str) -> str:
        return node_state(topology, node).texts["iptables-restore"]

    steps = [restore_step(f"{n.name}: kube-proxy's re-sync", netns_name(topo.name, n.name),
                          resync_text(restore(topo, n.name), restore(after, n.name)), topo.kubeProxy.backend)
             for n in topo.nodes]
    node_ns = netns_name(topo.name, pod.node)
    new = f" and {f.replacement} became ready in its place" if f.replacement else ""
    flavour = flavour_for(topo.kubeProxy)
    plans = tuple((netns_name(topo.name, n.name), cleanup(topo, after, n.name, flavour, f.conntrackTool))
                  for n in topo.nodes)
    kept = _kept(topo, after, pod.ip, plans)
    return FaultStep(
        f.kind, pod.name, netns_name(topo.name, pod.name), commands=(("ip", "address", "flush", "dev", "eth0"),),
        elsewhere=((node_ns, ("ip", "neigh", "flush", "to", pod.ip), None),
                   *((s.ns, s.argv, s.input) for s in steps)),
        conntrack=plans,
        rules_changed=tuple(n.name for n in topo.nodes),
        change=f"pod {pod.name} ({pod.ip}) was deleted{new}; kube-proxy {flavour.version} re-synced every node's "
               f"rules to the new endpoints, then ran its UDP conntrack cleanup: {_cleanup_words(flavour, f)}. "
               f"{pod.node}'s neighbour entry for {pod.ip} is flushed, as it would have expired by itself",
        symptom=(f"a UDP client that keeps its source port still matches its conntrack entry, which DNATs every "
                 f"packet to {pod.ip}, not through the new rules: the packets go to the deleted pod, {pod.node} "
                 "asks ARP for it, nobody answers and the kernel drops them (NEIGH_FAILED), sending ICMP host "
                 "unreachable back; a new source port gets a new entry and the new endpoint") if kept else
                (f"the entries of UDP connections to {pod.ip} are deleted, so a client that keeps its source "
                 "port gets a new entry through the new rules"))


def _kept(before: Topology, after: Topology, ip: str, plans: tuple[tuple[str, dict], ...]) -> bool:
    """Whether some node's cleanup leaves the entries DNATed to `ip`: it deletes nothing, or its
    reconciler skips a UDP frontend that `ip` served (a Service left without serving endpoints)."""
    served = [f"{fe}:{port}" for fe, port, eps in _udp_frontends(before) if ip in eps]
    for _, plan in plans:
        if "commands" in plan:
            continue
        if "reconcile" not in plan or any(f not in plan["reconcile"]["frontends"] for f in served):
            return bool(served)
    return False


def _udp_frontends(topo: Topology) -> list[tuple[str, int, list[str]]]:
    """(frontend address, port, endpoint addresses) of every UDP service port."""
    infos = [i for i in service_ports(topo, topo.nodes[0].name) if i.protocol == "udp"]
    return [(fe, i.port.port, [e.ip for e in i.endpoints])
            for i in infos for fe in (i.service.clusterIP, *i.service.loadBalancerIPs, *i.service.externalIPs)]


def _cleanup_words(flavour: Flavour, f: Fault) -> str:
    """What this release's cleanup does, in words (the run records each command)."""
    if flavour.conntrack_reconciler:
        gap = (" (1.32-1.36 skip a Service left without serving endpoints, #139628)"
               if flavour.reconcile_skips_empty and not f.replacement else "")
        return ("its reconciler lists the conntrack table through netlink and deletes every UDP entry to the "
                f"Service whose reply source is not a serving endpoint{gap}; the lab deletes the same entries "
                "with the conntrack tool")
    if not f.conntrackTool:
        return ("it runs the conntrack tool for the endpoint that went away, and this node's kube-proxy has no "
                "conntrack tool (conntrackTool: false): it logs the error, deletes nothing and does not retry, as "
                "the change is not seen again (kube-proxy 1.32+ uses netlink instead)")
    return "it runs the conntrack tool for the endpoint that went away (`conntrack -D --orig-dst ... --dst-nat ...`)"


def check(f: Fault, topo: Topology) -> list[tuple[str, str]]:
    """stale-conntrack re-programs kube-proxy's iptables rules; its replacement is not yet an endpoint."""
    problems = []
    if not MODE_FACTS[topo.kubeProxy.mode].service_chains:
        problems.append(("kind", f"stale-conntrack re-programs kube-proxy's iptables rules, which "
                                 f"kubeProxy.mode {topo.kubeProxy.mode} has none of; use it with "
                                 "kubeProxy.mode: iptables"))
    new = next((p for p in topo.pods if p.name == f.replacement), None)
    if new is not None and (new.name == f.pod or new.ready):
        problems.append(("replacement", f"{new.name} must be another pod, with ready: false (it becomes ready "
                                        f"when {f.pod} goes away)"))
    return problems


FAULT = FaultSpec("stale-conntrack", {"pod": "pod: web-1", "after": "after: <the flow that opens the connection>"},
                  plan, replacement=True, check=check, conntrack_tool=True)
