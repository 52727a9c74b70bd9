"""The command lines of etcd and kube-apiserver, and the service range they serve (pure).

Both listen on the host's loopback only, on ports chosen free at start. The API server is the
lightest real one: AlwaysAllow, a static token, its own serving certificate, one service-account key
pair, the topology's service and NodePort ranges, no endpoint reconciler (it writes no endpoints of
its own), no priority and fairness, no profiling. etcd keeps its data in the state directory (a
tmpfs under /run) without fsync.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from kpemu.errors import InputError
from kpemu.model.topology import Topology

HOST = "127.0.0.1"
WIDEST_SERVICE_PREFIX = 12  # kube-apiserver refuses a wider IPv4 --service-cluster-ip-range


@dataclass(frozen=True)
class Layout:
    """The control plane's files in its state directory."""

    root: Path

    @property
    def etcd_data(self) -> Path:
        return self.root / "etcd"

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def serving_cert(self) -> Path:
        return self.pki / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.pki / "apiserver.key"

    @property
    def sa_key(self) -> Path:
        return self.pki / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.pki / "sa.pub"

    @property
    def tokens(self) -> Path:
        return self.pki / "tokens.csv"

    def log(self, program: str) -> Path:
        return self.root / f"{program}.log"

    def pidfile(self, program: str) -> Path:
        return self.root / f"{program}.pid"


@dataclass(frozen=True)
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int


def service_range(topo: Topology) -> str:
    """The topology's serviceCIDR; without one, the smallest network holding every Service's cluster IP
    (InputError naming serviceCIDR when that is wider than kube-apiserver accepts)."""
    if topo.serviceCIDR:
        net = ipaddress.IPv4Network(topo.serviceCIDR)
        field = "serviceCIDR"
    else:
        ips = [ipaddress.IPv4Address(s.clusterIP) for s in topo.services] or [ipaddress.IPv4Address("10.96.0.1")]
        net = ipaddress.IPv4Network(f"{ips[0]}/32")
        while not all(ip in net for ip in ips) or net.num_addresses < 4:
            net = net.supernet()
        field = "serviceCIDR (not given: the smallest network holding every clusterIP)"
    if net.prefixlen < WIDEST_SERVICE_PREFIX:
        raise InputError(f"{topo.name}: {field} {net} is wider than /{WIDEST_SERVICE_PREFIX}, which kube-apiserver "
                         f"refuses; give serviceCIDR: a /{WIDEST_SERVICE_PREFIX} or narrower network holding every "
                         "clusterIP")
    return str(net)


def etcd_argv(etcd: Path, layout: Layout, ports: Ports) -> list[str]:
    client = f"http://{HOST}:{ports.etcd_client}"
    peer = f"http://{HOST}:{ports.etcd_peer}"
    return [str(etcd), "--name=kpemu", f"--data-dir={layout.etcd_data}",
            f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=kpemu={peer}", "--unsafe-no-fsync", "--log-level=warn"]


def apiserver_argv(apiserver: Path, layout: Layout, ports: Ports, service_cidr: str, node_ports: str) -> list[str]:
    return [str(apiserver), f"--etcd-servers=http://{HOST}:{ports.etcd_client}",
            f"--bind-address={HOST}", f"--advertise-address={HOST}", f"--secure-port={ports.apiserver}",
            f"--tls-cert-file={layout.serving_cert}", f"--tls-private-key-file={layout.serving_key}",
            f"--cert-dir={layout.pki}",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={layout.sa_pub}", f"--service-account-signing-key-file={layout.sa_key}",
            f"--service-cluster-ip-range={service_cidr}", f"--service-node-port-range={node_ports}",
            "--authorization-mode=AlwaysAllow", f"--token-auth-file={layout.tokens}",
            "--endpoint-reconciler-type=none", "--enable-priority-and-fairness=false", "--profiling=false"]


def token_line(token: str) -> str:
    """The static token file's one line: token, user, uid, groups (system:masters)."""
    return f'{token},kpemu,kpemu,"system:masters"\n'
