"""Lab deploy/destroy time: kpemu (pyroute2, one process) against the same lab as an iproute2 script."""

from __future__ import annotations

import statistics
import subprocess
import time

import yaml

from kpemu import lab
from kpemu.jobs.execute import run_step
from kpemu.kernel.netns import delete_netns
from kpemu.model import topology_from_data
from kpemu.model.topology import Topology
from kpemu.plan.batch import fabric_steps
from kpemu.plan.fabric import plan_fabric
from kpemu.plan.shell import plan_teardown_shell, plan_to_shell
from scripts.bench import ROOT

RUNS = 5


def _small() -> Topology:
    data = yaml.safe_load((ROOT / "topologies" / "flannel-vxlan.yaml").read_text())
    data["name"] = "bench"
    return topology_from_data(data, "flannel-vxlan.yaml")


def large_topology(nodes: int = 20, pods_per_node: int = 10) -> Topology:
    """A flannel lab of `nodes` nodes with `pods_per_node` pods each and one NodePort service."""
    data = {
        "name": "benchbig",
        "cni": "flannel-vxlan",
        "underlay": "10.246.0.0/16",
        "clusterCIDR": "10.244.0.0/16",
        "nodes": [{"name": f"n{i}", "ip": f"10.246.1.{i + 10}", "podCIDR": f"10.244.{i}.0/24"} for i in range(nodes)],
        "pods": [
            {"name": f"p{i}-{j}", "node": f"n{i}", "ip": f"10.244.{i}.{j + 2}", "labels": {"app": "web"}, "ports": [80]}
            for i in range(nodes)
            for j in range(pods_per_node)
        ],
        "services": [{"name": "web", "type": "NodePort", "clusterIP": "10.96.0.10", "selector": {"app": "web"},
                      "ports": [{"port": 80, "nodePort": 30080}]}],
        "externals": [{"name": "client", "ip": "10.242.72.50"}],
    }
    return topology_from_data(data, "<bench>")


def deploy_destroy_medians(topo: Topology, runs: int) -> tuple[float, float]:
    """Median seconds of `kpemu deploy` and `kpemu destroy` of `topo` over `runs` rounds."""
    ups, downs = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        lab.deploy(topo)
        t1 = time.perf_counter()
        lab.destroy(topo.name)
        ups.append(t1 - t0)
        downs.append(time.perf_counter() - t1)
    return statistics.median(ups), statistics.median(downs)


def _time_fabric_only(topo: Topology, runs: int) -> tuple[float, float]:
    """The fabric alone (what the shell script does too): namespaces, links, addresses, routes, no rules."""
    plan = plan_fabric(topo)
    steps = [s.to_json() for s in fabric_steps(plan)]
    ups, downs = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        for step in steps:
            run_step(step)
        t1 = time.perf_counter()
        for ns in plan.namespaces:
            delete_netns(ns.name)
        ups.append(t1 - t0)
        downs.append(time.perf_counter() - t1)
    return statistics.median(ups), statistics.median(downs)


def _time_shell(topo: Topology, runs: int) -> tuple[float, float]:
    plan = plan_fabric(topo)
    up, down = plan_to_shell(plan), plan_teardown_shell(plan)
    ups, downs = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(["bash", "-c", up], check=True, capture_output=True)
        t1 = time.perf_counter()
        subprocess.run(["bash", "-c", down], check=True, capture_output=True)
        ups.append(t1 - t0)
        downs.append(time.perf_counter() - t1)
    return statistics.median(ups), statistics.median(downs)


def bench_small_lab() -> list[dict[str, object]]:
    topo = _small()
    up, down = deploy_destroy_medians(topo, RUNS)
    f_up, f_down = _time_fabric_only(topo, RUNS)
    sh_up, sh_down = _time_shell(topo, RUNS)
    return [
        {"name": "fabric.small.deploy_with_rules", "value": up, "unit": "s"},
        {"name": "fabric.small.destroy", "value": down, "unit": "s"},
        {"name": "fabric.small.fabric_only_deploy", "value": f_up, "unit": "s"},
        {"name": "fabric.small.fabric_only_destroy", "value": f_down, "unit": "s"},
        {"name": "fabric.small.shell_deploy", "value": sh_up, "unit": "s"},
        {"name": "fabric.small.shell_destroy", "value": sh_down, "unit": "s"},
        {"name": "fabric.small.speedup_vs_shell", "value": (sh_up + sh_down) / (f_up + f_down), "unit": "x"},
    ]


def bench_large_lab() -> list[dict[str, object]]:
    topo = large_topology()
    up, down = deploy_destroy_medians(topo, 2)
    return [
        {"name": "fabric.20x200.deploy", "value": up, "unit": "s"},
        {"name": "fabric.20x200.destroy", "value": down, "unit": "s"},
    ]


BENCHES = [bench_small_lab, bench_large_lab]
