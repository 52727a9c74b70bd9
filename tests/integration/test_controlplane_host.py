"""The control plane of real parts: etcd and kube-apiserver (built from source, kpemu upstream) started
for a lab on the host's loopback, the topology's objects written through the API and read back with
GET, then the process that started them killed with SIGKILL and the lab cleaned up by the sweep
`destroy --all` runs: no process and no state directory left.

Long: on a machine whose cache lacks kube-apiserver and etcd, the first start builds them (minutes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import ROOT, kpemu, kpemu_env, needs_root

pytestmark = [pytest.mark.long, needs_root]

TOPOLOGY = {
    "name": "cpt", "serviceCIDR": "10.96.0.0/16",
    "kubeProxy": {"mode": "iptables", "nodePortRange": "30000-30100"},
    "nodes": [{"name": "node1", "ip": "192.168.1.100", "podCIDR": "10.244.0.0/24"},
              {"name": "node2", "ip": "192.168.1.101", "podCIDR": "10.244.1.0/24"}],
    "pods": [{"name": "web-0", "node": "node1", "ip": "10.244.0.2", "labels": {"app": "web"}, "ports": [80]},
             {"name": "web-1", "node": "node2", "ip": "10.244.1.5", "labels": {"app": "web"}, "ports": [80]}],
    "services": [
        {"name": "web", "type": "LoadBalancer", "clusterIP": "10.96.0.10", "selector": {"app": "web"},
         "loadBalancerIPs": ["192.168.1.240"], "ports": [{"name": "http", "port": 80, "nodePort": 30080}]},
        {"name": "db", "namespace": "data", "clusterIP": "10.96.0.20",
         "endpoints": [{"ip": "10.244.1.9", "node": "node2"}], "ports": [{"port": 5432}]},
    ],
}

# The control plane's parent: starts it for the lab, writes the topology, says where it is, and waits.
PARENT = """
import json, sys, time
from kpemu.controlplane.plane import start
from kpemu.controlplane.write import write_topology
from kpemu.kernel.runowner import adopt
from kpemu.model.topology import Topology
from kpemu.upstream.build import control_plane_binaries

adopt()
topo = Topology.model_validate(json.loads(sys.argv[2]))
cp = start(sys.argv[1], topo, control_plane_binaries(lambda m: print(m, file=sys.stderr, flush=True)),
           lambda m: print(m, file=sys.stderr, flush=True))
write_topology(cp.client, topo)
print(json.dumps({"server": cp.server, "token": cp.client.token, "ca": str(cp.client.ca),
                  "dir": str(cp.layout.root), "pids": [p.popen.pid for p in cp.procs],
                  "ready": cp.seconds_to_ready}), flush=True)
time.sleep(3600)
"""


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"


def test_a_control_plane_serves_the_topology_and_leaves_nothing_after_a_kill(tmp_path: Path) -> None:
    from kpemu.controlplane.client import Client

    lab = f"cpt{os.getpid()}"
    state = {"KPEMU_STATE_DIR": str(tmp_path / "labs")}
    env = kpemu_env(state)
    parent = subprocess.Popen([sys.executable, "-c", PARENT, lab, json.dumps(TOPOLOGY)], env=env, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = parent.stdout.readline()  # type: ignore[union-attr]
        assert line, f"the control plane did not start:\n{parent.stderr.read()}"  # type: ignore[union-attr]
        cp = json.loads(line)
        assert cp["dir"] == str(tmp_path / "labs" / f"{lab}.d" / "controlplane")
        assert cp["server"].startswith("https://127.0.0.1:")
        client = Client(cp["server"], cp["token"], Path(cp["ca"]))

        node = client.get("/api/v1/nodes/node2")
        assert node["spec"]["podCIDR"] == "10.244.1.0/24"
        assert node["status"]["addresses"] == [{"type": "InternalIP", "address": "192.168.1.101"},
                                               {"type": "Hostname", "address": "node2"}]
        assert node["metadata"]["labels"] == {"kubernetes.io/hostname": "node2", "kubernetes.io/os": "linux"}
        web = client.get("/api/v1/namespaces/default/services/web")
        assert web["spec"]["clusterIP"] == "10.96.0.10"
        assert [(p["port"], p["targetPort"], p["nodePort"]) for p in web["spec"]["ports"]] == [(80, 80, 30080)]
        assert web["status"]["loadBalancer"]["ingress"] == [{"ip": "192.168.1.240", "ipMode": "VIP"}]  # defaulted
        db_slice = client.get("/apis/discovery.k8s.io/v1/namespaces/data/endpointslices/db-kpemu-0")
        assert db_slice["metadata"]["labels"] == {"kubernetes.io/service-name": "db",
                                                  "endpointslice.kubernetes.io/managed-by": "kpemu"}
        assert [(e["addresses"], e["nodeName"]) for e in db_slice["endpoints"]] == [(["10.244.1.9"], "node2")]
        assert db_slice["ports"] == [{"name": "", "protocol": "TCP", "port": 5432}]
        slices = client.get("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
                            "?labelSelector=kubernetes.io%2Fservice-name%3Dweb")
        assert sorted(e["addresses"][0] for s in slices["items"] for e in s["endpoints"]) == ["10.244.0.2",
                                                                                            "10.244.1.5"]
        # without a controller-manager nothing else writes: the API server's own Service is the only other one
        services = client.get("/api/v1/services")
        assert sorted(f"{s['metadata']['namespace']}/{s['metadata']['name']}" for s in services["items"]) == [
            "data/db", "default/kubernetes", "default/web"]

        # while its parent lives, `kpemu destroy LAB` leaves the control plane alone and says who uses it
        refused = kpemu("destroy", lab, env=state, timeout=60)
        assert (refused.returncode, refused.stderr) == (3, (
            f"kpemu: lab {lab!r}'s control plane is in use by kpemu pid {parent.pid}: not removed\n"
            f"  fix: wait for it to finish, or stop it (kill {parent.pid})\n"))
        assert not any(_gone(pid) for pid in cp["pids"])

        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 15
        while not all(_gone(pid) for pid in cp["pids"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        # the sweep of `kpemu destroy --all` (kpemu.kernel.lab.sweep_scratch) in this test's own state
        # directory: destroy --all itself would also sweep every other lab on this machine
        sweep = ("from kpemu.kernel.lab import Removal, sweep_scratch\n"
                 "out = Removal('', True)\nsweep_scratch(out, set())\nprint(out.files, out.killed, out.busy)")
        res = subprocess.run([sys.executable, "-c", sweep], env=env, cwd=ROOT, capture_output=True, text=True,
                             timeout=60)
        assert res.returncode == 0, res.stderr
        assert all(_gone(pid) for pid in cp["pids"])
        assert not Path(cp["dir"]).exists()
        assert not (tmp_path / "labs" / f"{lab}.d").exists()
    finally:
        parent.kill()
        parent.wait()
