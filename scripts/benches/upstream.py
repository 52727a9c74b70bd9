"""Upstream binaries and the control plane of real parts: each built binary's build time as its
manifest records it (cold or not; a bench never starts a half-hour build), and the control plane's
start to /readyz and the flannel topology's objects written through the API. Records nothing (and
says why) where kube-apiserver and etcd are not built (`kpemu upstream build`)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from kpemu.controlplane.plane import start
from kpemu.controlplane.write import write_topology
from kpemu.kernel.runowner import adopt
from kpemu.model import topology_from_data
from kpemu.upstream import store
from kpemu.upstream.build import built_control_plane
from scripts.bench import ROOT

RUNS = 3


def bench_build_times() -> list[dict[str, object]]:
    """Seconds each binary in the cache took to build, and its size."""
    out: list[dict[str, object]] = []
    for b in store.all_built():
        name = f"upstream.{b.program}.{b.release}"
        out.append({"name": f"{name}.build_s", "value": b.seconds,
                    "unit": f"s ({'cold' if b.cold else 'warm'} GOCACHE, {b.go}, -p 1, nice 10)"})
        out.append({"name": f"{name}.size_mb", "value": round(b.size / 1e6, 1), "unit": "MB"})
    if not out:
        print("upstream build bench: nothing built (kpemu upstream build RELEASE)")
    return out


def bench_control_plane_ready() -> list[dict[str, object]]:
    """Median seconds from starting etcd + kube-apiserver to /readyz ok, and to the flannel topology's
    objects written through the API."""
    have = built_control_plane()
    if have is None or os.geteuid() != 0:
        print("control plane bench skipped: " + ("kube-apiserver and etcd are not built" if have is None
                                                 else "needs root (the lab state directory)"))
        return []
    adopt()
    data = yaml.safe_load((ROOT / "topologies" / "flannel-vxlan.yaml").read_text())
    data["name"] = "bench-cp"
    topo = topology_from_data(data, "flannel-vxlan.yaml")
    binaries = {p: Path(b.path) for p, b in have.items()}
    ready, written = [], []
    for _ in range(RUNS):
        cp = start("bench-cp", topo, binaries, lambda _m: None)
        try:
            t0 = time.perf_counter()
            write_topology(cp.client, topo)
            written.append(time.perf_counter() - t0)
            ready.append(cp.seconds_to_ready)
        finally:
            cp.stop()
    release = have["kube-apiserver"].release
    return [{"name": "upstream.control_plane.start_to_ready_s", "value": round(statistics.median(ready), 2),
             "unit": f"s (median of {RUNS}, kube-apiserver {release}, etcd {have['etcd'].version.split()[-1]})"},
            {"name": "upstream.control_plane.write_flannel_objects_s", "value": round(statistics.median(written), 3),
             "unit": f"s (median of {RUNS})"}]


REAL_SCENARIO = "scenarios/nft-nodeport.yaml"
REAL_RELEASE = "1.37.2"


def _run(extra: list[str]) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        res = subprocess.run([sys.executable, "-m", "kpemu.cli", "run", REAL_SCENARIO, "--runtime", "host", "--out",
                              out, *extra], cwd=ROOT, capture_output=True, text=True, timeout=600)
        seconds = time.perf_counter() - t0
        if res.returncode != 0:
            raise RuntimeError(f"{REAL_SCENARIO} {' '.join(extra)} exited {res.returncode}: {res.stderr[-2000:]}")
        return seconds, json.loads((Path(out) / "hops.json").read_text())


def bench_real_kube_proxy_scenario() -> list[dict[str, object]]:
    """nft-nodeport end to end under the real kube-proxy (control plane, one kube-proxy per node, sync,
    traffic, model-versus-real) against the same run under kpemu's model; each node's start to first sync."""
    if store.read_built(store.bin_path(f"v{REAL_RELEASE}", "kube-proxy")) is None or built_control_plane() is None \
            or os.geteuid() != 0:
        print(f"real kube-proxy bench skipped: needs root and kube-proxy v{REAL_RELEASE}, kube-apiserver and etcd "
              f"built (kpemu upstream build {REAL_RELEASE})")
        return []
    real, model, syncs, ready = [], [], [], []
    for _ in range(RUNS):
        seconds, hops = _run(["--kube-proxy", f"upstream:{REAL_RELEASE}"])
        real.append(seconds)
        syncs += list(hops["kubeProxy"]["syncSeconds"].values())
        ready.append(hops["kubeProxy"]["readySeconds"])
        model.append(_run([])[0])
    name = "upstream.real_kube_proxy.nft_nodeport"
    return [{"name": f"{name}.end_to_end_s", "value": round(statistics.median(real), 2),
             "unit": f"s (median of {RUNS}, kube-proxy v{REAL_RELEASE})"},
            {"name": f"{name}.model_end_to_end_s", "value": round(statistics.median(model), 2),
             "unit": f"s (median of {RUNS}, kpemu's model)"},
            {"name": f"{name}.ratio", "value": round(statistics.median(real) / statistics.median(model), 2),
             "unit": "real / model"},
            {"name": f"{name}.start_to_synced_s", "value": round(statistics.median(ready), 2),
             "unit": "s (median: control plane start to every node synced)"},
            {"name": "upstream.real_kube_proxy.start_to_first_sync_s", "value": round(statistics.median(syncs), 2),
             "unit": f"s (median over {len(syncs)} node starts)"}]


BENCHES = [bench_build_times, bench_control_plane_ready, bench_real_kube_proxy_scenario]
