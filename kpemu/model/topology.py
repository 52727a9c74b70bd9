"""The topology schema: nodes, pods, services, externals, CNI, kube-proxy settings, underlay.

Keys are camelCase, as in `kubectl get -o yaml`. Shape errors are caught here by pydantic;
cross-field checks (addresses in CIDRs, selectors, duplicates) live in `validate.py`.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kpemu.cni import catalog as cni_catalog
from kpemu.errors import InputError
from kpemu.model.modes import MODE_FACTS, NEWEST_KUBE_PROXY

Protocol = Literal["TCP", "UDP", "SCTP"]
# Kubernetes object names: DNS-1123 labels (subdomains for pods; labels are strict enough here).
K8sName = Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")]
LabName = Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$")]
IPv4 = Annotated[str, Field(description="an IPv4 address such as 10.246.198.17")]
CIDR = Annotated[str, Field(description="an IPv4 network such as 10.244.0.0/16")]


def _check_ip(value: str) -> str:
    try:
        return str(ipaddress.IPv4Address(value))
    except ValueError:
        raise ValueError(f"expected an IPv4 address such as 10.0.0.1, got {value!r}") from None


def _check_cidr(value: str) -> str:
    try:
        return str(ipaddress.IPv4Network(value, strict=True))
    except ValueError as e:
        raise ValueError(f"expected an IPv4 network such as 10.244.0.0/16, got {value!r} ({e})") from None


def _modes() -> tuple[str, ...]:
    return tuple(MODE_FACTS)


class Strict(BaseModel):
    """Base: unknown keys are errors (a typo must not be silently ignored)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class FeatureGates(Strict):
    """The kube-proxy feature gates that change what it programs (a gate not listed is refused)."""

    # 1.37+ nftables mode (alpha, off by default): reject and count NodePort traffic to 127.0.0.0/8
    KubeProxyNFTablesLocalhostNodePorts: bool = False


class KubeProxy(Strict):
    """kube-proxy settings that change what it programs."""

    # one of the modes of kpemu.model.modes, listed in the JSON schema as they are when it is made
    mode: str = Field("iptables", json_schema_extra=lambda s: s.update(enum=list(_modes())))
    version: str = Field(NEWEST_KUBE_PROXY, description="kube-proxy release, such as \"1.33\"; default: the newest "
                         "release kpemu models for the mode")
    clusterCIDR: CIDR | None = None
    masqueradeAll: bool = False
    masqueradeBit: int = Field(14, ge=0, le=31)
    nodePortAddresses: list[CIDR] = Field(default_factory=list)
    localhostNodePorts: bool = True
    randomFully: bool | None = None  # None: what the node's iptables supports
    # iptables mode 1.30+: nfacct counters on the INVALID drop / localhost NodePorts. None is kube-proxy's
    # own behaviour: use them when the node's kernel lets it create them (offline: assume it can).
    nfacct: bool | None = None
    scheduler: Literal["rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "mh"] = "rr"
    nodePortRange: str = "30000-32767"
    backend: Literal["nft", "legacy"] = "nft"  # which iptables binary programs the node
    featureGates: FeatureGates = Field(default_factory=FeatureGates)
    # How kube-proxy tells a pod's traffic from the rest (1.18+; BridgeInterface and
    # InterfaceNamePrefix 1.23+): None is ClusterCIDR (from clusterCIDR; no detector without it).
    detectLocalMode: Literal["ClusterCIDR", "NodeCIDR", "BridgeInterface", "InterfaceNamePrefix"] | None = None
    bridgeInterface: str | None = Field(None, pattern=r"^[A-Za-z0-9_.@:-]{1,15}$")
    interfaceNamePrefix: str | None = Field(None, pattern=r"^[A-Za-z0-9_.@:-]{1,15}$")
    # conntrack.tcpBeLiberal: kube-proxy sets net.netfilter.nf_conntrack_tcp_be_liberal=1, and
    # iptables mode 1.29+ then omits its INVALID drop rule
    tcpBeLiberal: bool = False
    # model: kpemu programs what its model of kube-proxy derives; upstream: the real kube-proxy, built from
    # source (kpemu.upstream), programs each node (kpemu.realproxy)
    implementation: Literal["model", "upstream"] = "model"
    # upstream: the release (1.37.2) or the path of a kube-proxy binary; None: the newest patch of `version`
    upstream: str | None = Field(None, min_length=1, max_length=4096)

    @model_validator(mode="before")
    @classmethod
    def _newest_for_mode(cls, data: Any) -> Any:
        """No version given: the newest release kpemu models for the mode."""
        if isinstance(data, dict) and "version" not in data:
            facts = MODE_FACTS.get(str(data.get("mode", "iptables")))
            if facts is not None and facts.last_minor is not None:
                return {**data, "version": f"1.{facts.last_minor}"}
        return data

    @model_validator(mode="after")
    def _upstream_only_with_it(self) -> KubeProxy:
        if self.upstream is not None and self.implementation != "upstream":
            raise ValueError("upstream names the real kube-proxy's release or binary: set implementation: upstream "
                             "too, or drop upstream")
        return self

    @field_validator("mode")
    @classmethod
    def _mode(cls, v: str) -> str:
        if v not in _modes():
            *names, last = (repr(m) for m in _modes())
            raise ValueError(f"Input should be {', '.join(names)} or {last}")
        return v

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        v = str(v)
        parts = v.lstrip("v").split(".")
        if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]) or parts[0] != "1":
            raise ValueError(f"expected a kube-proxy release such as \"1.18\" or \"1.37\", got {v!r}")
        return f"1.{int(parts[1])}"

    @field_validator("clusterCIDR")
    @classmethod
    def _cidr(cls, v: str | None) -> str | None:
        return None if v is None else _check_cidr(v)

    @field_validator("nodePortAddresses")
    @classmethod
    def _npa(cls, v: list[str]) -> list[str]:
        return [_check_cidr(c) for c in v]

    @field_validator("nodePortRange")
    @classmethod
    def _range(cls, v: str) -> str:
        lo, sep, hi = str(v).partition("-")
        if not sep or not lo.isdigit() or not hi.isdigit() or not 0 < int(lo) <= int(hi) <= 65535:
            raise ValueError(f"expected a port range such as 30000-32767, got {v!r}")
        return v

    @property
    def node_port_bounds(self) -> tuple[int, int]:
        lo, _, hi = self.nodePortRange.partition("-")
        return int(lo), int(hi)

    @property
    def minor(self) -> int:
        return int(self.version.split(".")[1])


class Node(Strict):
    """A Kubernetes node: one network namespace on the underlay."""

    name: K8sName
    ip: IPv4
    podCIDR: CIDR
    tunnelIP: IPv4 | None = None  # calico: tunl0 address (default: first address of podCIDR)
    zone: str | None = None  # the node's topology.kubernetes.io/zone label (topology-aware routing)

    _ip = field_validator("ip", "tunnelIP")(lambda v: None if v is None else _check_ip(v))
    _cidr = field_validator("podCIDR")(_check_cidr)


IMAGE_REF = re.compile(r"^[a-z0-9][a-z0-9._/:@-]{0,254}$")  # [registry[:port]/]name[:tag][@digest]


class Container(Strict):
    """What makes a member a container instead of a bare namespace: its image and how it starts.

    The container gets no docker network (`network_mode: none`); kpemu wires its namespace like a
    bare one. `command` replaces the image's CMD; `env` adds environment variables.
    """

    image: str | None = None
    command: list[str] | None = None
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        if v is not None and not IMAGE_REF.match(v):
            raise ValueError("expected an image reference such as nginx:1.27, curlimages/curl:8.8.0 or "
                             "kpemu/busybox:local")
        return v

    @field_validator("command", mode="before")
    @classmethod
    def _command(cls, v: object) -> object:
        return [v] if isinstance(v, str) else v

    @property
    def has_image(self) -> bool:
        return self.image is not None


class PodPort(Strict):
    port: int = Field(ge=1, le=65535)
    protocol: Protocol = "TCP"
    name: str | None = None


class Pod(Container):
    """A pod: its own namespace on a node, with a small server on each port (or, with `image:`,
    a container whose own processes serve those ports)."""

    name: K8sName
    namespace: K8sName = "default"
    node: str
    ip: IPv4
    labels: dict[str, str] = Field(default_factory=dict)
    ports: list[PodPort] = Field(default_factory=list)
    ready: bool = True
    terminating: bool = False

    _ip = field_validator("ip")(_check_ip)

    @field_validator("ports", mode="before")
    @classmethod
    def _ports(cls, v: object) -> object:
        if isinstance(v, list):
            return [{"port": p} if isinstance(p, int) else p for p in v]
        return v


class ServicePort(Strict):
    name: str = ""
    port: int = Field(ge=1, le=65535)
    targetPort: int | None = Field(None, ge=1, le=65535)
    nodePort: int | None = Field(None, ge=1, le=65535)
    protocol: Protocol = "TCP"

    @property
    def target(self) -> int:
        return self.targetPort or self.port


class EndpointHints(Strict):
    """An EndpointSlice endpoint's hints: the zones (and, 1.33+, nodes) that should use it."""

    forZones: list[str] = Field(default_factory=list)
    forNodes: list[str] = Field(default_factory=list)


class Endpoint(Strict):
    """An explicit endpoint (instead of a selector): address, port and optional node."""

    ip: IPv4
    port: int | None = Field(None, ge=1, le=65535)
    node: str | None = None
    ready: bool = True
    serving: bool | None = None
    terminating: bool = False
    hints: EndpointHints | None = None

    _ip = field_validator("ip")(_check_ip)


# the labels whose presence keeps a Service (and its EndpointSlices) out of kube-proxy's informers, which
# list with the selector !service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless
# (cmd/kube-proxy/app/server.go, every release kpemu models) -> why, in words
KUBE_PROXY_SKIPS = {
    "service.kubernetes.io/service-proxy-name": "another proxy serves it",
    "service.kubernetes.io/headless": "it is headless",
}


class Service(Strict):
    """A Kubernetes Service, as `kubectl get svc -o yaml` would show its spec (flattened)."""

    name: K8sName
    namespace: K8sName = "default"
    # metadata.labels: kube-proxy ignores a Service labelled service.kubernetes.io/service-proxy-name or
    # service.kubernetes.io/headless (kpemu.proxy.view)
    labels: dict[str, str] = Field(default_factory=dict)
    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = "ClusterIP"
    clusterIP: IPv4
    selector: dict[str, str] | None = None
    endpoints: list[Endpoint] | None = None
    ports: list[ServicePort] = Field(min_length=1)
    externalIPs: list[IPv4] = Field(default_factory=list)
    loadBalancerIPs: list[IPv4] = Field(default_factory=list)  # status.loadBalancer.ingress[].ip
    # ingress IPs with ipMode: Proxy: the load balancer proxies, kube-proxy 1.30+ programs nothing for them
    loadBalancerProxyIPs: list[IPv4] = Field(default_factory=list)
    allocateLoadBalancerNodePorts: bool = True  # False: a LoadBalancer without nodePorts
    # Service spec.trafficDistribution: the EndpointSlice controller's hints for selector endpoints
    trafficDistribution: Literal["PreferClose", "PreferSameZone", "PreferSameNode"] | None = None
    # the service.kubernetes.io/topology-mode and (deprecated) topology-aware-hints annotations:
    # before 1.31 kube-proxy uses hints only when one is set and not Disabled (1.24-1.26: Auto)
    topologyMode: str | None = None
    topologyAwareHints: str | None = None
    loadBalancerSourceRanges: list[CIDR] = Field(default_factory=list)
    externalTrafficPolicy: Literal["Cluster", "Local"] = "Cluster"
    internalTrafficPolicy: Literal["Cluster", "Local"] = "Cluster"
    sessionAffinity: Literal["None", "ClientIP"] = "None"
    sessionAffinityTimeout: int = Field(10800, ge=1, le=86400)
    healthCheckNodePort: int | None = Field(None, ge=1, le=65535)

    _ip = field_validator("clusterIP")(_check_ip)

    @field_validator("externalIPs", "loadBalancerIPs", "loadBalancerProxyIPs")
    @classmethod
    def _ips(cls, v: list[str]) -> list[str]:
        return [_check_ip(i) for i in v]

    @field_validator("loadBalancerSourceRanges")
    @classmethod
    def _ranges(cls, v: list[str]) -> list[str]:
        return [_check_cidr(c) for c in v]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def left_out(self) -> str | None:
        """Why kube-proxy never sees this Service ("labelled service.kubernetes.io/service-proxy-name=X:
        another proxy serves it"); None when it does (KUBE_PROXY_SKIPS)."""
        for label, why in KUBE_PROXY_SKIPS.items():
            if label in self.labels:
                value = self.labels[label]
                return f"labelled {label}{'=' + value if value else ''}: {why}"
        return None

    @property
    def external(self) -> bool:
        """Whether the service has external destinations (NodePort, externalIPs or LB IPs)."""
        return self.type in ("NodePort", "LoadBalancer") or bool(self.externalIPs)


class External(Container):
    """A host outside the cluster (a client, a load balancer), attached to the underlay router
    (with `image:`, a container that runs each flow's client command)."""

    name: K8sName
    ip: IPv4
    subnet: CIDR | None = None  # default: the /24 around ip
    role: Literal["client", "loadbalancer"] = "client"
    # role loadbalancer: VIP:port forwarded to the NodePort of every node (seed 002).
    vip: IPv4 | None = None
    backends: list[str] = Field(default_factory=list)  # "service" key whose NodePorts it balances

    _ip = field_validator("ip", "vip")(lambda v: None if v is None else _check_ip(v))

    @field_validator("subnet")
    @classmethod
    def _subnet(cls, v: str | None) -> str | None:
        return None if v is None else _check_cidr(v)

    @property
    def network(self) -> ipaddress.IPv4Network:
        if self.subnet:
            return ipaddress.IPv4Network(self.subnet)
        return ipaddress.IPv4Network(f"{self.ip}/24", strict=False)


class Route(Strict):
    """An extra route in the underlay router, e.g. a MetalLB-style LB IP routed to a node."""

    dst: CIDR
    via: str  # a node name or an address

    _dst = field_validator("dst", mode="before")(
        lambda v: _check_cidr(v if "/" in str(v) else f"{v}/32")
    )


class Topology(Strict):
    """A whole lab."""

    name: LabName
    # one of the CNI registry's names (kpemu.cni), listed in the JSON schema as they are when it is made
    cni: str = Field(cni_catalog.DEFAULT, json_schema_extra=lambda s: s.update(enum=list(cni_catalog.names())))
    kubeProxy: KubeProxy = Field(default_factory=KubeProxy)
    underlay: CIDR = "10.246.0.0/16"
    underlayGateway: IPv4 | None = None
    serviceCIDR: CIDR | None = None
    clusterCIDR: CIDR | None = None  # the pod network (flannel Network); default: the supernet of podCIDRs
    mtu: int = Field(1500, ge=1280, le=9000)
    nodes: list[Node] = Field(min_length=1)
    pods: list[Pod] = Field(default_factory=list)
    services: list[Service] = Field(default_factory=list)
    externals: list[External] = Field(default_factory=list)
    routes: list[Route] = Field(default_factory=list)

    _cidrs = field_validator("underlay", "serviceCIDR", "clusterCIDR")(
        lambda v: None if v is None else _check_cidr(v)
    )
    _gw = field_validator("underlayGateway")(lambda v: None if v is None else _check_ip(v))

    @field_validator("cni")
    @classmethod
    def _cni(cls, v: str) -> str:
        if v not in cni_catalog.names():
            raise ValueError(cni_catalog.expected())
        return v

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def require_node(self, name: str, flag: str = "--node") -> Node:
        """The node `name`; InputError naming the option `flag` and the valid nodes when there is none."""
        for n in self.nodes:
            if n.name == name:
                return n
        raise InputError(f"{flag} {name!r} is not a node of topology {self.name!r}; "
                         f"valid nodes: {', '.join(n.name for n in self.nodes)}")

    def pods_on(self, node: str) -> list[Pod]:
        return [p for p in self.pods if p.node == node]

    @property
    def pod_network(self) -> ipaddress.IPv4Network:
        """The cluster's pod network: clusterCIDR, else the smallest supernet of every podCIDR."""
        if self.clusterCIDR:
            return ipaddress.IPv4Network(self.clusterCIDR)
        nets = [ipaddress.IPv4Network(n.podCIDR) for n in self.nodes]
        net = nets[0]
        while not all(n.subnet_of(net) for n in nets):
            net = net.supernet()
        return net

    @property
    def gateway(self) -> str:
        """The underlay router's address on the node network."""
        if self.underlayGateway:
            return self.underlayGateway
        used = {n.ip for n in self.nodes}
        for host in ipaddress.IPv4Network(self.underlay).hosts():
            if str(host) not in used:
                return str(host)
        raise ValueError("underlay has no free address for the router")

    def containers(self) -> dict[str, Container]:
        """Members that run as containers (`image:` given), by member name."""
        return {m.name: m for m in [*self.pods, *self.externals] if m.has_image}

    def service(self, key: str) -> Service | None:
        """The Service `key` names (namespace/name; the namespace is default when left out), or None."""
        ns, _, name = key.rpartition("/")
        return next((s for s in self.services if s.name == name and s.namespace == (ns or "default")), None)

    def member_kinds(self) -> dict[str, str]:
        """Every lab member (node, pod, external) by name -> which of the three it is."""
        out = {n.name: "node" for n in self.nodes}
        out.update({p.name: "pod" for p in self.pods})
        out.update({e.name: "external" for e in self.externals})
        return out
