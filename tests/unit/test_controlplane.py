"""The control plane's pure parts: the topology as Kubernetes objects, the command lines, the service
range; and its pid files, with real processes (no root, no network)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kpemu.controlplane import flags, procs
from kpemu.errors import InputError
from kpemu.k8s import emit
from kpemu.kernel.runowner import alive, token_of
from kpemu.model.topology import Topology
from tests.helpers import ROOT

TOPO = Topology.model_validate({
    "name": "cp", "serviceCIDR": "10.96.0.0/16",
    "kubeProxy": {"mode": "iptables", "nodePortRange": "30000-30100"},
    "nodes": [{"name": "node1", "ip": "192.168.1.100", "podCIDR": "10.244.0.0/24"},
              {"name": "node2", "ip": "192.168.1.101", "podCIDR": "10.244.1.0/24"}],
    "pods": [{"name": "web-0", "node": "node1", "ip": "10.244.0.2", "labels": {"app": "web"}, "ports": [80]},
             {"name": "web-1", "node": "node2", "ip": "10.244.1.5", "labels": {"app": "web"}, "ports": [80],
              "ready": False},
             {"name": "db-0", "namespace": "data", "node": "node2", "ip": "10.244.1.9", "labels": {"app": "db"}}],
    "services": [
        {"name": "web", "type": "LoadBalancer", "clusterIP": "10.96.0.10", "selector": {"app": "web"},
         "externalTrafficPolicy": "Local", "healthCheckNodePort": 30099, "loadBalancerIPs": ["192.168.1.240"],
         "ports": [{"name": "http", "port": 80, "targetPort": 8080, "nodePort": 30080}]},
        {"name": "db", "namespace": "data", "clusterIP": "10.96.0.20", "sessionAffinity": "ClientIP",
         "sessionAffinityTimeout": 60,
         "endpoints": [{"ip": "10.244.1.9", "node": "node2"}, {"ip": "192.168.50.7", "port": 5433}],
         "ports": [{"port": 5432, "protocol": "TCP"}]},
        {"name": "none", "clusterIP": "10.96.0.30", "endpoints": [], "ports": [{"port": 53, "protocol": "UDP"}]},
    ],
})


def test_namespaces_come_first_and_the_builtin_ones_are_not_written() -> None:
    objs = emit.objects(TOPO)
    assert objs[0] == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "data"}}
    assert [o["kind"] for o in objs] == ["Namespace", "Node", "Node", "Service", "EndpointSlice", "Service",
                                         "EndpointSlice", "EndpointSlice", "Service"]


def test_a_node_carries_its_address_pod_cidr_and_the_labels_kpemu_knows() -> None:
    assert emit.nodes(TOPO)[0] == {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "node1", "labels": {"kubernetes.io/hostname": "node1", "kubernetes.io/os": "linux"}},
        "spec": {"podCIDR": "10.244.0.0/24", "podCIDRs": ["10.244.0.0/24"]},
        "status": {"addresses": [{"type": "InternalIP", "address": "192.168.1.100"},
                                 {"type": "Hostname", "address": "node1"}]},
    }


def test_a_load_balancer_service_keeps_its_ips_ports_and_policies() -> None:
    assert emit.service(TOPO.services[0]) == {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                 "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                 "ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080, "nodePort": 30080}],
                 "sessionAffinity": "None", "internalTrafficPolicy": "Cluster", "selector": {"app": "web"},
                 "externalTrafficPolicy": "Local", "healthCheckNodePort": 30099},
    }
    assert emit.statuses(TOPO) == [{
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
        "status": {"loadBalancer": {"ingress": [{"ip": "192.168.1.240", "ipMode": "VIP"}]}}}]


def test_what_kube_proxy_filters_on_is_written_too() -> None:
    """Labels (service-proxy-name), allocateLoadBalancerNodePorts, trafficDistribution and the hints the
    EndpointSlice controller would write, each endpoint's zone, an ipMode Proxy ingress."""
    from kpemu.inputs.scenario import load_scenario

    hinted = load_scenario(ROOT / "scenarios" / "topology-hints.yaml").topology
    svc = next(s for s in hinted.services if s.trafficDistribution)
    slices = emit.endpoint_slices(hinted, svc)
    assert emit.service(svc)["spec"]["trafficDistribution"] == svc.trafficDistribution
    assert all(e["zone"] and e["hints"]["forZones"] == [{"name": e["zone"]}] for sl in slices for e in sl["endpoints"])
    assert {"topology.kubernetes.io/zone"} <= set(emit.nodes(hinted)[0]["metadata"]["labels"])
    named = load_scenario(ROOT / "scenarios" / "service-proxy-name.yaml").topology
    labelled = next(s for s in named.services if s.labels)
    assert emit.service(labelled)["metadata"]["labels"] == labelled.labels
    lb = load_scenario(ROOT / "scenarios" / "lb-no-nodeports.yaml").topology
    assert any(emit.service(s)["spec"].get("allocateLoadBalancerNodePorts") is False for s in lb.services)
    proxied = load_scenario(ROOT / "scenarios" / "lb-ipmode-proxy.yaml").topology
    ingress = [i for s in proxied.services if (st := emit.load_balancer_status(s)) for i in
               st["status"]["loadBalancer"]["ingress"]]
    assert {"ipMode": "Proxy"}.items() <= next(i for i in ingress if i["ipMode"] == "Proxy").items()


def test_a_cluster_ip_service_has_no_external_policy_and_keeps_its_affinity() -> None:
    spec = emit.service(TOPO.services[1])["spec"]
    assert "externalTrafficPolicy" not in spec
    assert "selector" not in spec
    assert spec["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 60}}


def test_the_slice_of_a_selector_holds_the_selected_pods_with_their_conditions() -> None:
    assert emit.endpoint_slices(TOPO, TOPO.services[0]) == [{
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "web-kpemu-0", "namespace": "default",
                     "labels": {"kubernetes.io/service-name": "web",
                                "endpointslice.kubernetes.io/managed-by": "kpemu"}},
        "addressType": "IPv4",
        "endpoints": [
            {"addresses": ["10.244.0.2"], "nodeName": "node1",
             "conditions": {"ready": True, "serving": True, "terminating": False},
             "targetRef": {"kind": "Pod", "namespace": "default", "name": "web-0"}},
            {"addresses": ["10.244.1.5"], "nodeName": "node2",
             "conditions": {"ready": False, "serving": False, "terminating": False},
             "targetRef": {"kind": "Pod", "namespace": "default", "name": "web-1"}}],
        "ports": [{"name": "http", "protocol": "TCP", "port": 8080}],
    }]


def test_an_endpoint_with_its_own_port_gets_a_slice_of_its_own() -> None:
    slices = emit.endpoint_slices(TOPO, TOPO.services[1])
    assert [(s["metadata"]["name"], s["ports"], s["endpoints"]) for s in slices] == [
        ("db-kpemu-0", [{"name": "", "protocol": "TCP", "port": 5432}],
         [{"addresses": ["10.244.1.9"], "conditions": {"ready": True, "serving": True, "terminating": False},
           "nodeName": "node2"}]),
        ("db-kpemu-1", [{"name": "", "protocol": "TCP", "port": 5433}],
         [{"addresses": ["192.168.50.7"], "conditions": {"ready": True, "serving": True, "terminating": False}}]),
    ]
    assert emit.endpoint_slices(TOPO, TOPO.services[2]) == []


def test_each_object_has_its_api_path() -> None:
    paths = [emit.path_of(o) for o in emit.objects(TOPO)]
    assert paths == ["/api/v1/namespaces/data", "/api/v1/nodes/node1", "/api/v1/nodes/node2",
                     "/api/v1/namespaces/default/services/web",
                     "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/web-kpemu-0",
                     "/api/v1/namespaces/data/services/db",
                     "/apis/discovery.k8s.io/v1/namespaces/data/endpointslices/db-kpemu-0",
                     "/apis/discovery.k8s.io/v1/namespaces/data/endpointslices/db-kpemu-1",
                     "/api/v1/namespaces/default/services/none"]


# ---------------------------------------------------------------- command lines
LAYOUT = flags.Layout(Path("/run/kpemu/labs/cp.d/controlplane"))
PORTS = flags.Ports(40001, 40002, 40003)


def test_etcd_listens_on_loopback_only_with_its_data_in_the_state_directory() -> None:
    assert flags.etcd_argv(Path("/c/etcd"), LAYOUT, PORTS) == [
        "/c/etcd", "--name=kpemu", "--data-dir=/run/kpemu/labs/cp.d/controlplane/etcd",
        "--listen-client-urls=http://127.0.0.1:40001", "--advertise-client-urls=http://127.0.0.1:40001",
        "--listen-peer-urls=http://127.0.0.1:40002", "--initial-advertise-peer-urls=http://127.0.0.1:40002",
        "--initial-cluster=kpemu=http://127.0.0.1:40002", "--unsafe-no-fsync", "--log-level=warn"]


def test_the_api_server_is_the_lightest_real_one_with_the_topologys_ranges() -> None:
    pki = "/run/kpemu/labs/cp.d/controlplane/pki"
    assert flags.apiserver_argv(Path("/c/kube-apiserver"), LAYOUT, PORTS, "10.96.0.0/16", "30000-30100") == [
        "/c/kube-apiserver", "--etcd-servers=http://127.0.0.1:40001", "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1", "--secure-port=40003",
        f"--tls-cert-file={pki}/apiserver.crt", f"--tls-private-key-file={pki}/apiserver.key", f"--cert-dir={pki}",
        "--service-account-issuer=https://kubernetes.default.svc",
        f"--service-account-key-file={pki}/sa.pub", f"--service-account-signing-key-file={pki}/sa.key",
        "--service-cluster-ip-range=10.96.0.0/16", "--service-node-port-range=30000-30100",
        "--authorization-mode=AlwaysAllow", f"--token-auth-file={pki}/tokens.csv",
        "--endpoint-reconciler-type=none", "--enable-priority-and-fairness=false", "--profiling=false"]
    assert flags.token_line("abc") == 'abc,kpemu,kpemu,"system:masters"\n'


def test_the_service_range_is_the_topologys_else_the_smallest_holding_every_cluster_ip() -> None:
    assert flags.service_range(TOPO) == "10.96.0.0/16"
    bare = TOPO.model_copy(update={"serviceCIDR": None})
    assert flags.service_range(bare) == "10.96.0.0/27"  # .10, .20 and .30
    wide = TOPO.model_copy(update={"serviceCIDR": "10.0.0.0/8"})
    with pytest.raises(InputError) as e:
        flags.service_range(wide)
    assert str(e.value) == ("cp: serviceCIDR 10.0.0.0/8 is wider than /12, which kube-apiserver refuses; give "
                            "serviceCIDR: a /12 or narrower network holding every clusterIP")


# ---------------------------------------------------------------- pid files (real processes)
def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_stop_recorded_kills_what_a_pid_file_names_and_removes_it(tmp_path: Path) -> None:
    p = _sleeper()
    try:
        token = token_of(p.pid)
        assert token is not None
        (tmp_path / "cp").mkdir()
        (tmp_path / "cp" / "etcd.pid").write_text(token + "\n")
        assert procs.stop_recorded(tmp_path) == [f"etcd (pid {p.pid})"]
        assert p.wait(10) == -9
        assert not (tmp_path / "cp" / "etcd.pid").exists()
    finally:
        p.kill()


def test_a_pid_file_naming_a_reused_pid_kills_nothing(tmp_path: Path) -> None:
    p = _sleeper()
    try:
        pid, start = str(token_of(p.pid)).split(":")
        (tmp_path / "etcd.pid").write_text(f"{pid}:{int(start) + 1}\n")  # same pid, another process's start
        assert procs.stop_recorded(tmp_path) == []
        assert p.poll() is None
    finally:
        p.kill()
        p.wait()


def test_a_control_plane_is_in_use_while_its_owner_lives(tmp_path: Path) -> None:
    p = _sleeper()
    try:
        token = str(token_of(p.pid))
        procs.record_owner(tmp_path, token)
        assert procs.in_use(tmp_path) == token
        p.kill()
        p.wait()
        assert not alive(token)
        assert procs.in_use(tmp_path) is None
    finally:
        p.kill()
