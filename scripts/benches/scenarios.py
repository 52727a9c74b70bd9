"""End-to-end time of a scenario on this kernel: `kpemu run scenarios/nodeport-iptables.yaml`
(deploy, servers, captures, 16 connections, collection, destroy, ledger, report), as a user runs it,
with rule tracing (the default: TRACE + xtables-monitor, counters, attribution, model oracle) and
without (`--no-trace`)."""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time

from scripts.bench import ROOT

RUNS = 3


def _times(extra: list[str]) -> list[float]:
    times = []
    for _ in range(RUNS):
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            res = subprocess.run([sys.executable, "-m", "kpemu.cli", "run", "scenarios/nodeport-iptables.yaml",
                                  "--runtime", "host", "--out", out, *extra], cwd=ROOT, capture_output=True,
                                 text=True, timeout=120)
            times.append(time.perf_counter() - t0)
            if res.returncode != 0:
                raise RuntimeError(f"nodeport-iptables {' '.join(extra)} exited {res.returncode}: "
                                   f"{res.stderr[-2000:]}")
    return times


def bench_nodeport_iptables() -> list[dict[str, object]]:
    traced, plain = _times([]), _times(["--no-trace"])
    name = "scenario.nodeport-iptables.end_to_end"
    return [{"name": name, "value": round(statistics.median(traced), 3), "unit": "s"},
            {"name": f"{name}.min", "value": round(min(traced), 3), "unit": "s"},
            {"name": f"{name}.no_trace", "value": round(statistics.median(plain), 3), "unit": "s"},
            {"name": f"{name}.no_trace.min", "value": round(min(plain), 3), "unit": "s"},
            {"name": f"{name}.tracing_cost", "value": round(statistics.median(traced) - statistics.median(plain), 3),
             "unit": "s"}]


BENCHES = [bench_nodeport_iptables]
