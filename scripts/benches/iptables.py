"""iptables-mode rule generation vs iptables-restore load time (10,000 services x 3 endpoints)."""

from __future__ import annotations

import os
import time

from kpemu.kernel import netns as nsmod
from kpemu.model.topology import Topology
from kpemu.proxy.iptables import iptables_rules, restore_text
from kpemu.proxy.xtables import RESTORE

NS = "kp-h1-bench"


def _topology(services: int, backend: str = "nft") -> Topology:
    svcs = []
    for i in range(services):
        ip = f"10.96.{i // 250}.{i % 250 + 1}"
        eps = [{"ip": f"10.244.{(i * 3 + k) // 250 % 250}.{(i * 3 + k) % 250 + 1}", "node": "node1"} for k in range(3)]
        svcs.append({"name": f"svc-{i}", "clusterIP": ip, "endpoints": eps,
                     "ports": [{"name": "http", "port": 80, "targetPort": 8080}]})
    return Topology.model_validate({
        "name": "bench", "kubeProxy": {"version": "1.33", "clusterCIDR": "10.244.0.0/16", "backend": backend,
                                     "nfacct": False},  # no counters to create in the bench namespace
        "nodes": [{"name": "node1", "ip": "192.168.1.100", "podCIDR": "10.244.0.0/24"}],
        "services": svcs,
    })


def load_seconds(argv: list[str], text: str) -> float:
    """Seconds `argv` takes to load `text` (its standard input) in a fresh namespace, deleted after."""
    nsmod.create_netns(NS)
    try:
        t0 = time.perf_counter()
        nsmod.run_in(NS, argv, input=text, check=True)
        return time.perf_counter() - t0
    finally:
        nsmod.delete_netns(NS)


def _generate(services: int) -> tuple[float, str]:
    topo = _topology(services)
    t0 = time.perf_counter()
    text = restore_text(iptables_rules(topo, "node1"))
    return time.perf_counter() - t0, text


def bench_generation_and_restore() -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    gen1k, _ = _generate(1000)
    gen10k, text = _generate(10000)
    out += [{"name": "iptables.generate.1k_services_x3", "value": gen1k, "unit": "s"},
            {"name": "iptables.generate.10k_services_x3", "value": gen10k, "unit": "s"},
            {"name": "iptables.restore_lines.10k_services_x3", "value": text.count("\n"), "unit": "lines"}]
    if os.geteuid() != 0:
        return out
    for backend in ("nft", "legacy"):
        took = load_seconds([RESTORE[backend], "--noflush", "--wait"], text)
        out += [{"name": f"iptables.restore.{backend}.10k_services_x3", "value": took, "unit": "s"},
                {"name": f"iptables.generate_over_restore.{backend}.10k", "value": gen10k / took, "unit": "ratio"}]
    return out


BENCHES = [bench_generation_and_restore]
