"""The desired kernel state of a lab's fabric, as plain frozen data. Produced by `plan_fabric` (and
carried with kube-proxy's state and the faults in kpemu.labplan.LabPlan), applied by the lab's job, and
read by capture and analysis to know where packets can be seen."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

MemberKind = Literal["node", "pod", "external", "underlay"]
# What an interface is in the lab; a CNI with a new kind of device adds its role here.
InterfaceRole = Literal["node-eth0", "pod-eth0", "external-eth0", "underlay-port", "underlay-bridge",
                        "external-bridge", "pod-veth", "cni0", "vxlan", "tunnel"]
# The kernel-wide conntrack limit (a /proc/sys path): writable only from the initial network namespace.
CONNTRACK_MAX = "net/netfilter/nf_conntrack_max"


@dataclass(frozen=True)
class Namespace:
    """One network namespace and the lab member it hosts."""

    name: str  # kp-<lab>-<member>
    member: str
    kind: MemberKind
    node: str | None = None  # for pods: the node they run on


@dataclass(frozen=True)
class Veth:
    """A veth pair created directly across two namespaces (the root namespace is never used)."""

    ns: str
    name: str
    peer_ns: str
    peer_name: str
    mtu: int = 1500
    mac: str | None = None
    peer_mac: str | None = None


@dataclass(frozen=True)
class Bridge:
    ns: str
    name: str
    mtu: int = 1500


@dataclass(frozen=True)
class Vxlan:
    """flannel.1: VNI, UDP port, local address, underlay device, no learning."""

    ns: str
    name: str
    vni: int
    port: int
    local: str
    dev: str
    mtu: int
    mac: str


@dataclass(frozen=True)
class Tunnel:
    """calico's tunl0: the kernel's fallback IPIP device, configured (created only if absent)."""

    ns: str
    name: str
    mtu: int


@dataclass(frozen=True)
class Port:
    """Attach `dev` to bridge `master` (with hairpin, as kubelet/bridge CNI do for pod ports)."""

    ns: str
    dev: str
    master: str
    hairpin: bool = False


@dataclass(frozen=True)
class Address:
    ns: str
    dev: str
    cidr: str  # "10.244.0.1/24"


@dataclass(frozen=True)
class Route:
    ns: str
    dst: str  # "default" or a CIDR
    via: str | None = None
    dev: str | None = None
    onlink: bool = False
    scope: Literal["universe", "link", "host"] = "universe"
    type: Literal["unicast", "blackhole"] = "unicast"
    proto: Literal["boot", "static", "bird"] = "boot"


@dataclass(frozen=True)
class Neighbour:
    """A PERMANENT ARP entry."""

    ns: str
    dev: str
    ip: str
    mac: str


@dataclass(frozen=True)
class Fdb:
    """A VXLAN FDB entry: inner MAC -> outer destination (`bridge fdb ... self permanent`)."""

    ns: str
    dev: str
    mac: str
    dst: str


@dataclass(frozen=True)
class Sysctl:
    ns: str
    key: str  # "net/ipv4/ip_forward" (path below /proc/sys)
    value: str
    optional: bool = False  # skip silently when the kernel lacks the key (e.g. br_netfilter)


@dataclass(frozen=True)
class Rules:
    """iptables-restore input (one or more tables) for one namespace, applied with --noflush."""

    ns: str
    text: str
    owner: str  # "flannel", "calico", "loadbalancer"


@dataclass(frozen=True)
class Interface:
    """An interface a packet can cross, for captures and the hop ledger."""

    ns: str
    name: str
    member: str
    role: InterfaceRole
    kind: Literal["ethernet", "raw"] = "ethernet"


@dataclass(frozen=True)
class Plan:
    """Everything a lab needs, in apply order."""

    lab: str
    namespaces: tuple[Namespace, ...]
    bridges: tuple[Bridge, ...] = ()
    veths: tuple[Veth, ...] = ()
    vxlans: tuple[Vxlan, ...] = ()
    tunnels: tuple[Tunnel, ...] = ()
    ports: tuple[Port, ...] = ()
    addresses: tuple[Address, ...] = ()
    sysctls: tuple[Sysctl, ...] = ()
    routes: tuple[Route, ...] = ()
    neighbours: tuple[Neighbour, ...] = ()
    fdb: tuple[Fdb, ...] = ()
    rules: tuple[Rules, ...] = ()
    interfaces: tuple[Interface, ...] = field(default=())

    def netns(self, member: str) -> str:
        """The namespace of a lab member (node, pod, external or 'underlay')."""
        for ns in self.namespaces:
            if ns.member == member:
                return ns.name
        raise KeyError(member)

    def devices_in(self, ns: str) -> list[str]:
        """Names of the devices the plan creates in one namespace (lo excluded)."""
        names = [b.name for b in self.bridges if b.ns == ns]
        names += [v.name for v in self.veths if v.ns == ns] + [v.peer_name for v in self.veths if v.peer_ns == ns]
        names += [v.name for v in self.vxlans if v.ns == ns] + [t.name for t in self.tunnels if t.ns == ns]
        return names
