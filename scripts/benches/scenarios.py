"""End-to-end time of a scenario on this kernel: `kpemu run scenarios/nodeport-iptables.yaml`
(deploy, servers, captures, 16 connections, collection, destroy, ledger, report), as a user runs it."""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time

from scripts.bench import ROOT

RUNS = 3


def bench_nodeport_iptables() -> list[dict[str, object]]:
    times = []
    for _ in range(RUNS):
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            res = subprocess.run([sys.executable, "-m", "kpemu.cli", "run", "scenarios/nodeport-iptables.yaml",
                                  "--runtime", "host", "--out", out], cwd=ROOT, capture_output=True, text=True,
                                 timeout=120)
            times.append(time.perf_counter() - t0)
            if res.returncode != 0:
                raise RuntimeError(f"nodeport-iptables exited {res.returncode}: {res.stderr[-2000:]}")
    return [{"name": "scenario.nodeport-iptables.end_to_end", "value": statistics.median(times), "unit": "s"},
            {"name": "scenario.nodeport-iptables.end_to_end.min", "value": min(times), "unit": "s"}]


BENCHES = [bench_nodeport_iptables]
