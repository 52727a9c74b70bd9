"""Deploy time of the 2-node flannel lab with container pods (image:) against the same lab with
bare pods, on a warm engine (its start is measured apart). Needs root and a docker engine or
dockerd; records nothing (and says why) where container members cannot run."""

from __future__ import annotations

import time

import yaml

from kpemu.docker.daemon import PrivateDockerd
from kpemu.docker.engine import connect, engine_url, why_unavailable
from kpemu.docker.image import LOCAL_IMAGE, build_local_image
from kpemu.model import topology_from_data
from kpemu.model.topology import Topology
from scripts.bench import ROOT
from scripts.benches.fabric import deploy_destroy_medians

RUNS = 3
KEEP_LABEL = "kpemu.bench"  # a container that keeps kpemu's own dockerd up between the deploys


def _topology(containers: bool) -> Topology:
    data = yaml.safe_load((ROOT / "topologies" / "flannel-vxlan.yaml").read_text())
    data["name"] = "bench-docker" if containers else "bench-bare"
    if containers:
        for p in data["pods"]:
            p["image"] = LOCAL_IMAGE
    return topology_from_data(data, "flannel-vxlan.yaml")


def bench_container_vs_bare_deploy() -> list[dict[str, object]]:
    """Median deploy and destroy seconds of the lab with container pods vs bare pods, and the ratio."""
    why = why_unavailable()
    if why:
        print(f"docker bench skipped: {why}")
        return []
    own_was_running = PrivateDockerd().running()
    engine = "docker.connect_engine_s" if engine_url() is not None else "docker.private_dockerd_start_s"
    t0 = time.perf_counter()
    client = connect(start=True)
    engine_start = time.perf_counter() - t0
    assert client is not None
    build_local_image(client)
    keep = client.containers.run(LOCAL_IMAGE, ["sleep", "3600"], network_mode="none", detach=True,
                                 labels={KEEP_LABEL: "1"})
    try:
        bare_up, bare_down = deploy_destroy_medians(_topology(False), RUNS)
        ctr_up, ctr_down = deploy_destroy_medians(_topology(True), RUNS)
    finally:
        keep.remove(force=True)
        if not own_was_running:
            PrivateDockerd().stop()
    pods = len(_topology(True).pods)
    return [
        {"name": engine, "value": engine_start, "unit": "s"},
        {"name": "docker.deploy_bare_pods_s", "value": bare_up, "unit": "s"},
        {"name": f"docker.deploy_container_pods_s ({pods} pods)", "value": ctr_up, "unit": "s"},
        {"name": "docker.deploy_ratio_container_vs_bare", "value": ctr_up / bare_up, "unit": "x"},
        {"name": "docker.destroy_bare_pods_s", "value": bare_down, "unit": "s"},
        {"name": "docker.destroy_container_pods_s", "value": ctr_down, "unit": "s"},
    ]


BENCHES = [bench_container_vs_bare_deploy]
