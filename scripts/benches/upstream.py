"""Upstream binaries and the control plane of real parts: each built binary's build time as its
manifest records it (cold or not; a bench never starts a half-hour build), and the control plane's
start to /readyz and the flannel topology's objects written through the API. Records nothing (and
says why) where kube-apiserver and etcd are not built (`kpemu upstream build`)."""

from __future__ import annotations

import os
import statistics
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


BENCHES = [bench_build_times, bench_control_plane_ready]
