"""A mutable accumulator the planners fill in, frozen into a `Plan` at the end."""

from __future__ import annotations

from dataclasses import dataclass, field

from kpemu.plan.types import (
    Address,
    Bridge,
    Fdb,
    Interface,
    Namespace,
    Neighbour,
    Plan,
    Port,
    Route,
    Rules,
    Sysctl,
    Tunnel,
    Veth,
    Vxlan,
)


@dataclass
class Parts:
    """Lists of plan objects; helper methods keep the planners short."""

    namespaces: list[Namespace] = field(default_factory=list)
    bridges: list[Bridge] = field(default_factory=list)
    veths: list[Veth] = field(default_factory=list)
    vxlans: list[Vxlan] = field(default_factory=list)
    tunnels: list[Tunnel] = field(default_factory=list)
    ports: list[Port] = field(default_factory=list)
    addresses: list[Address] = field(default_factory=list)
    sysctls: list[Sysctl] = field(default_factory=list)
    routes: list[Route] = field(default_factory=list)
    neighbours: list[Neighbour] = field(default_factory=list)
    fdb: list[Fdb] = field(default_factory=list)
    rules: list[Rules] = field(default_factory=list)
    interfaces: list[Interface] = field(default_factory=list)

    def bridge(self, ns: str, name: str, mtu: int) -> None:
        self.bridges.append(Bridge(ns, name, mtu))

    def veth(self, ns: str, name: str, peer_ns: str, peer_name: str, mtu: int, **macs: str | None) -> None:
        self.veths.append(Veth(ns, name, peer_ns, peer_name, mtu, **macs))

    def port(self, ns: str, dev: str, master: str, hairpin: bool = False) -> None:
        self.ports.append(Port(ns, dev, master, hairpin))

    def address(self, ns: str, dev: str, cidr: str) -> None:
        self.addresses.append(Address(ns, dev, cidr))

    def freeze(self, lab: str) -> Plan:
        return Plan(
            lab=lab,
            namespaces=tuple(self.namespaces),
            bridges=tuple(self.bridges),
            veths=tuple(self.veths),
            vxlans=tuple(self.vxlans),
            tunnels=tuple(self.tunnels),
            ports=tuple(self.ports),
            addresses=tuple(self.addresses),
            sysctls=tuple(self.sysctls),
            routes=tuple(self.routes),
            neighbours=tuple(self.neighbours),
            fdb=tuple(self.fdb),
            rules=tuple(self.rules),
            interfaces=tuple(self.interfaces),
        )
