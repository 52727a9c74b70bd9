"""What the real kube-proxy of each node is given (pure): its KubeProxyConfiguration, made from the
topology as kubeadm and kind write one, its kubeconfig, and the API server's own Service.

The configuration keeps kube-proxy inside its node's namespace (`conntrack.maxPerCore: 0` and `min: 0`:
nf_conntrack_max and the hash size are kernel-wide, and a namespace may not write them) and makes its
rules a function of the API's objects alone: no periodic resync while traffic runs (`syncPeriod: 1h`),
and changes applied as soon as kube-proxy allows (`minSyncPeriod: 0s`, which 1.37's defaulting raises to
1s): the run waits for the metrics, never for a fixed time.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from kpemu.model.modes import MODE_FACTS
from kpemu.model.topology import Service, Topology

API_VERSION = "kubeproxy.config.k8s.io/v1alpha1"  # read by every release kpemu builds (1.29-1.37)
METRICS_PORT = 10249  # kube-proxy's metrics, on the loopback of its node's namespace
HEALTHZ_PORT = 10256
RELAY_PORT = 6443  # the relay's port on the loopback of each node's namespace
SYNC_PERIOD = "1h0m0s"
APISERVER_SERVICE = ("default", "kubernetes")  # the Service kube-apiserver makes for itself
CONFIG_PLACEHOLDER = "KUBECONFIG"  # clientConnection.kubeconfig in a job: the executor writes the file and its path


def kube_proxy_configuration(topo: Topology, node: str, kubeconfig: str) -> dict[str, Any]:
    """The KubeProxyConfiguration of `node`'s kube-proxy: the topology's mode, local-traffic detection,
    NodePort addresses, masquerade bit and feature gates; nothing kernel-wide."""
    kp, n = topo.kubeProxy, topo.require_node(node)
    sync = {"syncPeriod": SYNC_PERIOD, "minSyncPeriod": "0s"}
    config: dict[str, Any] = {
        "apiVersion": API_VERSION, "kind": "KubeProxyConfiguration",
        "mode": kp.mode, "hostnameOverride": n.name, "bindAddress": n.ip,
        "clientConnection": {"kubeconfig": kubeconfig},
        "healthzBindAddress": f"0.0.0.0:{HEALTHZ_PORT}", "metricsBindAddress": f"127.0.0.1:{METRICS_PORT}",
        "clusterCIDR": kp.clusterCIDR or "", "detectLocalMode": kp.detectLocalMode or "ClusterCIDR",
        "detectLocal": {"bridgeInterface": kp.bridgeInterface or "",
                        "interfaceNamePrefix": kp.interfaceNamePrefix or ""},
        "nodePortAddresses": list(kp.nodePortAddresses),
        "iptables": {"masqueradeBit": kp.masqueradeBit, "masqueradeAll": kp.masqueradeAll,
                     "localhostNodePorts": kp.localhostNodePorts, **sync},
        "ipvs": {"scheduler": kp.scheduler, **sync},
        "nftables": {"masqueradeBit": kp.masqueradeBit, "masqueradeAll": kp.masqueradeAll, **sync},
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpBeLiberal": kp.tcpBeLiberal},
    }
    gates = {name: True for name, on in kp.featureGates.model_dump().items() if on}  # a gate off is the default
    gated = MODE_FACTS[kp.mode].gated_until
    if gated is not None and kp.minor < gated[1]:
        gates[gated[0]] = True
    if gates:
        config["featureGates"] = gates
    return config


def kubeconfig(ca_file: str, token: str, port: int = RELAY_PORT) -> dict[str, Any]:
    """A kubeconfig for the API server behind the relay on the node namespace's loopback."""
    return {"apiVersion": "v1", "kind": "Config", "current-context": "kpemu",
            "clusters": [{"name": "kpemu", "cluster": {"server": f"https://127.0.0.1:{port}",
                                                      "certificate-authority": ca_file}}],
            "users": [{"name": "kube-proxy", "user": {"token": token}}],
            "contexts": [{"name": "kpemu", "context": {"cluster": "kpemu", "user": "kube-proxy"}}]}


def apiserver_service(service_cidr: str) -> Service:
    """default/kubernetes as kube-apiserver makes it: the first address of the service range, port 443
    named https; no endpoints, as no endpoint reconciler runs (kube-proxy rejects its traffic)."""
    first = str(next(ipaddress.IPv4Network(service_cidr).hosts()))
    return Service.model_validate({"name": APISERVER_SERVICE[1], "namespace": APISERVER_SERVICE[0],
                                   "clusterIP": first, "endpoints": [],
                                   "ports": [{"name": "https", "port": 443, "targetPort": 6443}]})


def as_probed(topo: Topology) -> Topology:
    """The topology with what kube-proxy finds out on the node itself left to it: --random-fully (what
    the node's iptables supports) and nfacct counters (whether the kernel makes them), as the real one
    decides them; a topology's own choice describes a node of its own, not this one."""
    kp = topo.kubeProxy.model_copy(update={"randomFully": None, "nfacct": None})
    return topo.model_copy(update={"kubeProxy": kp})


def with_apiserver_service(topo: Topology, service_cidr: str) -> Topology:
    """The topology as the real kube-proxy sees it: with the API server's own Service (unless the topology
    has one). ValueError naming the Service when another one holds the address kube-apiserver takes."""
    own = apiserver_service(service_cidr)
    if any((s.namespace, s.name) == APISERVER_SERVICE for s in topo.services):
        return topo
    for s in topo.services:
        if s.clusterIP == own.clusterIP:
            raise ValueError(f"Service {s.namespace}/{s.name} has clusterIP {s.clusterIP}, the first address of the "
                             f"service range {service_cidr}, which kube-apiserver gives default/kubernetes")
    return topo.model_copy(update={"services": [*topo.services, own]})
