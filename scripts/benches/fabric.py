"""Lab deploy/destroy time: kpemu against the same lab as an iproute2 script, and at scale (2, 20 and 48
nodes of 30 pods, 40 Services) against an iproute2-only floor of the same namespaces and veth pairs
(one `ip -batch`), so the cost per namespace can be compared across sizes: linear means it stays flat."""

from __future__ import annotations

import os
import statistics
import subprocess
import time

import yaml

from kpemu import lab
from kpemu.cni import cni_of
from kpemu.jobs.execute import run_step
from kpemu.kernel.netns import delete_netns
from kpemu.model import topology_from_data
from kpemu.model.topology import Topology
from kpemu.plan.batch import fabric_steps, teardown_lines
from kpemu.plan.fabric import plan_fabric
from kpemu.plan.shell import plan_teardown_shell, plan_to_shell
from scripts.bench import ROOT

RUNS = 5


def _small() -> Topology:
    data = yaml.safe_load((ROOT / "topologies" / "flannel-vxlan.yaml").read_text())
    data["name"] = "bench"
    return topology_from_data(data, "flannel-vxlan.yaml")


def large_topology(nodes: int = 20, pods_per_node: int = 10, services: int = 1, name: str = "benchbig") -> Topology:
    """A flannel lab of `nodes` nodes with `pods_per_node` pods each (one TCP port), `services` NodePort
    services spreading the pods between them, and one external client."""
    data = {
        "name": name,
        "cni": "flannel-vxlan",
        "underlay": "10.246.0.0/16",
        "clusterCIDR": "10.244.0.0/16",
        "nodes": [{"name": f"n{i}", "ip": f"10.246.1.{i + 10}", "podCIDR": f"10.244.{i}.0/24"} for i in range(nodes)],
        "pods": [
            {"name": f"p{i}-{j}", "node": f"n{i}", "ip": f"10.244.{i}.{j + 2}",
             "labels": {"app": f"web{(i * pods_per_node + j) % services}"}, "ports": [80]}
            for i in range(nodes)
            for j in range(pods_per_node)
        ],
        "services": [{"name": f"web{k}", "type": "NodePort", "clusterIP": f"10.96.{k // 250}.{k % 250 + 2}",
                      "selector": {"app": f"web{k}"}, "ports": [{"port": 80, "nodePort": 30080 + k}]}
                     for k in range(services)],
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
    plan = plan_fabric(topo, cni_of(topo).plan)
    steps = fabric_steps(plan)
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
    plan = plan_fabric(topo, cni_of(topo).plan)
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


def _time_floor(topo: Topology, runs: int) -> tuple[float, float]:
    """The iproute2-only floor: the lab's namespaces and veth pairs, one `ip -batch` each way."""
    plan = plan_fabric(topo, cni_of(topo).plan)
    steps = [s for s in fabric_steps(plan) if s.what in ("create the namespaces", "create the veth pairs")]
    names = [ns.name for ns in plan.namespaces]
    ups, downs = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        for step in steps:
            subprocess.run(list(step.argv), input=step.input, text=True, check=True, capture_output=True)
        t1 = time.perf_counter()
        subprocess.run(["ip", "-batch", "-"], input=teardown_lines(names), text=True, check=True, capture_output=True)
        ups.append(t1 - t0)
        downs.append(time.perf_counter() - t1)
    return statistics.median(ups), statistics.median(downs)


# (nodes, rounds): 30 pods a node and 40 Services at every size; the largest is the 48 x 1,440 lab
SCALES = ((2, 3), (20, 2), (48, 1))
PODS_PER_NODE, SERVICES = 30, 40


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def bench_scale() -> list[dict[str, object]]:
    """Deploy and destroy at 2, 20 and 48 nodes (medians), the floor of each, the fabric alone (kube-proxy's
    rules grow as nodes x endpoints: every node holds every endpoint), and what is left after."""
    out: list[dict[str, object]] = []
    for nodes, runs in SCALES:
        topo = large_topology(nodes, PODS_PER_NODE, SERVICES, name=f"scalebench{nodes}")
        size = f"fabric.scale.{nodes}x{nodes * PODS_PER_NODE}"
        namespaces = len(plan_fabric(topo, cni_of(topo).plan).namespaces)
        fds = _open_fds()
        up, down = deploy_destroy_medians(topo, runs)
        f_up, f_down = _time_floor(topo, runs)
        fabric_up, _ = _time_fabric_only(topo, runs)  # the same lab without kube-proxy's rules
        left = [n for n in os.listdir("/run/netns") if n.startswith(f"kp-{topo.name}-")]
        out += [
            {"name": f"{size}.namespaces", "value": namespaces, "unit": "namespaces"},
            {"name": f"{size}.deploy", "value": up, "unit": "s"},
            {"name": f"{size}.destroy", "value": down, "unit": "s"},
            {"name": f"{size}.floor_deploy", "value": f_up, "unit": "s"},
            {"name": f"{size}.floor_destroy", "value": f_down, "unit": "s"},
            {"name": f"{size}.deploy_per_namespace", "value": 1000 * up / namespaces, "unit": "ms"},
            {"name": f"{size}.floor_deploy_per_namespace", "value": 1000 * f_up / namespaces, "unit": "ms"},
            {"name": f"{size}.fabric_only_deploy", "value": fabric_up, "unit": "s"},
            {"name": f"{size}.fabric_only_deploy_per_namespace", "value": 1000 * fabric_up / namespaces, "unit": "ms"},
            {"name": f"{size}.deploy_vs_floor", "value": up / f_up, "unit": "x"},
            {"name": f"{size}.descriptors_left_open", "value": _open_fds() - fds, "unit": "fds"},
            {"name": f"{size}.namespaces_left", "value": len(left), "unit": "namespaces"},
        ]
    return out


BENCHES = [bench_small_lab, bench_scale]
