"""nftables-mode transaction generation vs `nft -f` load time (10,000 services x 3 endpoints),
next to the iptables figures of scripts/benches/iptables.py (same services)."""

from __future__ import annotations

import os
import time

from kpemu.proxy.nftables import nftables_transaction
from scripts.benches.iptables import _topology, load_seconds


def _generate(services: int) -> tuple[float, str]:
    topo = _topology(services)
    topo = topo.model_copy(update={"kubeProxy": topo.kubeProxy.model_copy(update={"mode": "nftables"})})
    t0 = time.perf_counter()
    text = nftables_transaction(topo, "node1").text()
    return time.perf_counter() - t0, text


def bench_generation_and_load() -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    gen1k, _ = _generate(1000)
    gen10k, text = _generate(10000)
    out += [{"name": "nftables.generate.1k_services_x3", "value": gen1k, "unit": "s"},
            {"name": "nftables.generate.10k_services_x3", "value": gen10k, "unit": "s"},
            {"name": "nftables.transaction_lines.10k_services_x3", "value": text.count("\n"), "unit": "lines"}]
    if os.geteuid() != 0:
        return out
    took = load_seconds(["nft", "-f", "-"], text)
    out += [{"name": "nftables.load.10k_services_x3", "value": took, "unit": "s"},
            {"name": "nftables.generate_over_load.10k", "value": gen10k / took, "unit": "ratio"}]
    return out


BENCHES = [bench_generation_and_load]
