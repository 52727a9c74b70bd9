"""The real kube-proxy's part of a job (pure): the binaries, the API server's ranges, the topology's
objects and every node's KubeProxyConfiguration."""

from __future__ import annotations

from pathlib import Path

from kpemu.jobs.schema import RealKubeProxy
from kpemu.k8s import emit
from kpemu.model.topology import Topology
from kpemu.realproxy.binary import Binary
from kpemu.realproxy.config import CONFIG_PLACEHOLDER, kube_proxy_configuration


def real_kube_proxy(topo: Topology, binary: Binary, control_plane: dict[str, Path], service_cidr: str) -> RealKubeProxy:
    """What the executor needs to run `binary` on every node of `topo` against a control plane of
    `control_plane`'s binaries (etcd, kube-apiserver) serving `service_cidr`."""
    return RealKubeProxy(
        binary=binary.path, version=binary.version, build=binary.build,
        etcd=str(control_plane["etcd"]), apiserver=str(control_plane["kube-apiserver"]),
        service_cidr=service_cidr, node_port_range=topo.kubeProxy.nodePortRange,
        objects=tuple(emit.objects(topo)), statuses=tuple(emit.statuses(topo)),
        configs={n.name: kube_proxy_configuration(topo, n.name, CONFIG_PLACEHOLDER) for n in topo.nodes})
