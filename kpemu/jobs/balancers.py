"""External load balancers that health-check the nodes, as cloud load balancers do (kernel side, standard
library only).

Once kube-proxy's health servers listen (kpemu.traffic.health), every node behind a balancer whose
Service kube-proxy health-checks is probed from the balancer's namespace: an HTTP GET / of the node's
healthCheckNodePort, healthy when it answers 200. The balancer's chain is then written again with the
nodes that passed (kpemu.plan.lbrules), so new connections skip nodes without local ready endpoints.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any

from kpemu.kernel import netns as nsmod
from kpemu.plan.batch import Step
from kpemu.plan.lbrules import BalancerSpec, rebalanced_chain
from kpemu.traffic import http

PROBE_TIMEOUT = 1.0


@dataclass
class Probed:
    """What one balancer's health checks found: per "node:healthCheckNodePort", the status (None: no answer)."""

    balancer: str
    status: dict[str, int | None] = field(default_factory=dict)

    @property
    def healthy(self) -> frozenset[tuple[str, int]]:
        """The (node, port) checks that answered 200."""
        return frozenset((k.rsplit(":", 1)[0], int(k.rsplit(":", 1)[1])) for k, v in self.status.items() if v == 200)

    def to_json(self) -> dict[str, Any]:
        return {"balancer": self.balancer, "status": self.status}


def probe(address: str, port: int, timeout: float = PROBE_TIMEOUT) -> int | None:
    """The HTTP status a GET / of address:port answers with, from this thread's namespace (None: none)."""
    try:
        with socket.create_connection((address, port), timeout=timeout) as s:
            buf = http.exchange(s, http.request(address, port, "/", "kpemu:lb-health-check"))
    except OSError:
        return None
    return http.parse_response(buf)[0]


def check_balancers(balancers: tuple[BalancerSpec, ...], run: Any) -> list[Probed]:
    """Probe every health-checked node of each balancer and write its chain again with those that answered
    200; `run(step)` executes the restore step (kpemu.jobs.execute.run_step)."""
    out = []
    for b in balancers:
        probed = Probed(b.name)
        checks = {(t.node, t.node_ip, t.health_port) for t in b.targets if t.health_port is not None}
        with nsmod.inside(b.ns):
            for node, ip, port in sorted(checks, key=lambda c: (c[0], c[2] or 0)):
                probed.status[f"{node}:{port}"] = probe(ip, port or 0)
        text = rebalanced_chain(b.vip, b.targets, probed.healthy)
        run(Step("run", f"{b.name}: balance the nodes that passed their health checks", b.ns, b.restore, text))
        out.append(probed)
    return out
