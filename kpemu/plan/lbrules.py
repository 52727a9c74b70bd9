"""An external L4 load balancer's NAT rules (pure, standard library only: the executor renders them again).

The balancer DNATs its VIP:port to one node's NodePort chosen at random and MASQUERADEs, so replies
return through it, as a cloud load balancer in proxy mode does. For a Service kube-proxy health-checks
(LoadBalancer, externalTrafficPolicy Local) it balances only the nodes whose healthCheckNodePort answers
200, as cloud load balancers do: the executor probes every node after kube-proxy's health servers start
(kpemu.jobs.balancers) and writes the balancer's chain again with the nodes that passed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CHAIN = "KPEMU-LB"


@dataclass(frozen=True)
class LbTarget:
    """One node behind one of the balancer's ports: the Service port, the node and its NodePort, and the
    healthCheckNodePort probed on it (None: the Service has none, the node is always balanced)."""

    service: str  # namespace/name
    port: int
    proto: str  # tcp | udp | sctp
    node: str
    node_ip: str
    node_port: int
    health_port: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"service": self.service, "port": self.port, "proto": self.proto, "node": self.node,
                "node_ip": self.node_ip, "node_port": self.node_port, "health_port": self.health_port}


@dataclass(frozen=True)
class BalancerSpec:
    """A balancer the executor health-checks: its namespace, VIP, targets and how its rules are restored."""

    name: str
    ns: str
    vip: str
    targets: tuple[LbTarget, ...]
    restore: tuple[str, ...]  # iptables-restore --noflush argv of the node's backend

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "ns": self.ns, "vip": self.vip, "targets": [t.to_json() for t in self.targets],
                "restore": list(self.restore)}


Healthy = frozenset[tuple[str, int]]  # (node, healthCheckNodePort) pairs whose check answered 200


def chain_lines(vip: str, targets: tuple[LbTarget, ...], healthy: Healthy | None = None) -> list[str]:
    """The balancer chain's rules: per Service port, one DNAT per balanced node, the random choice spread
    evenly (`healthy`: the checks that passed; None: every node)."""
    lines: list[str] = []
    groups: dict[tuple[str, int, str], list[LbTarget]] = {}
    for t in targets:
        groups.setdefault((t.service, t.port, t.proto), []).append(t)
    for (service, port, proto), group in groups.items():
        nodes = [t for t in group if healthy is None or t.health_port is None or (t.node, t.health_port) in healthy]
        n = len(nodes)
        for i, t in enumerate(nodes):
            stat = f"-m statistic --mode random --probability {1 / (n - i):.10f} " if i < n - 1 else ""
            lines.append(f"-A {CHAIN} -d {vip}/32 -p {proto} -m {proto} --dport {port} "
                         f'-m comment --comment "lb {service}:{port} -> {t.node}" '
                         f"{stat}-j DNAT --to-destination {t.node_ip}:{t.node_port}")
    return lines


def balancer_rules(vip: str, targets: tuple[LbTarget, ...]) -> str:
    """iptables-restore input for the balancer's namespace: its chain, the jump to it, the MASQUERADE."""
    lines = ["*nat", f":{CHAIN} - [0:0]", f"-A PREROUTING -j {CHAIN}", *chain_lines(vip, targets),
             "-A POSTROUTING -m conntrack --ctstate DNAT -j MASQUERADE", "COMMIT", ""]
    return "\n".join(lines)


def rebalanced_chain(vip: str, targets: tuple[LbTarget, ...], healthy: Healthy) -> str:
    """iptables-restore --noflush input that writes the balancer's chain again (declaring a chain flushes it)
    with only the `healthy` nodes for the health-checked Services."""
    return "\n".join(["*nat", f":{CHAIN} - [0:0]", *chain_lines(vip, targets, healthy), "COMMIT", ""])
