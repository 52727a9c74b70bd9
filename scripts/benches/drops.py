"""What tracing the kernel's drops (bpftrace on skb:kfree_skb) adds to a run, per flow:
`kpemu run scenarios/nodeport-local.yaml` (two flows, one of them dropped) with drop tracing, with
the tracefs reader that joins by time window instead (KPEMU_DROP_TRACE=tracefs) and with it turned
off (KPEMU_DROP_TRACE=0), rule tracing on in all. The tracer attaches while the servers and captures
start, so only what is left of its start-up, its stop and the analysis count."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

from kpemu.inputs.scenario import load_scenario
from scripts.bench import ROOT

RUNS = 3
SCENARIO = "scenarios/nodeport-local.yaml"


def _times(env: dict[str, str]) -> list[float]:
    times = []
    for _ in range(RUNS):
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            res = subprocess.run([sys.executable, "-m", "kpemu.cli", "run", SCENARIO, "--runtime", "host",
                                  "--out", out], cwd=ROOT, capture_output=True, text=True, timeout=120,
                                 env={**os.environ, **env})
            times.append(time.perf_counter() - t0)
            if res.returncode != 0:
                raise RuntimeError(f"{SCENARIO} exited {res.returncode}: {res.stderr[-2000:]}")
    return times


def bench_drop_tracing() -> list[dict[str, object]]:
    flows = len(load_scenario(ROOT / SCENARIO).flows)
    with_drops, by_time = _times({}), _times({"KPEMU_DROP_TRACE": "tracefs"})
    without = _times({"KPEMU_DROP_TRACE": "0"})
    name = "scenario.nodeport-local"
    cost = statistics.median(with_drops) - statistics.median(without)
    cost_by_time = statistics.median(by_time) - statistics.median(without)
    return [{"name": f"{name}.end_to_end", "value": round(statistics.median(with_drops), 3), "unit": "s"},
            {"name": f"{name}.no_drop_trace", "value": round(statistics.median(without), 3), "unit": "s"},
            {"name": f"{name}.drop_tracing_cost_per_flow", "value": round(cost / flows, 3), "unit": "s"},
            {"name": f"{name}.tracefs_reader_cost_per_flow", "value": round(cost_by_time / flows, 3), "unit": "s"}]


BENCHES = [bench_drop_tracing]
