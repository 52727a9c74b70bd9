"""plan_fabric: the desired state for flannel VXLAN and calico IPIP, per cni-datapath.md (no root)."""

from __future__ import annotations

from kpemu.cni import cni_of
from kpemu.inputs.topology import load_topology
from kpemu.plan.fabric import plan_fabric
from kpemu.plan.types import Fdb, Neighbour, Route, Sysctl, Vxlan
from tests.helpers import TOPOLOGIES

FLANNEL_TOPOLOGY = load_topology(TOPOLOGIES / "flannel-vxlan.yaml")
CALICO_TOPOLOGY = load_topology(TOPOLOGIES / "calico-ipip.yaml")
FLANNEL = plan_fabric(FLANNEL_TOPOLOGY, cni_of(FLANNEL_TOPOLOGY).plan)
CALICO = plan_fabric(CALICO_TOPOLOGY, cni_of(CALICO_TOPOLOGY).plan)


def test_every_object_lives_in_a_lab_namespace() -> None:
    for plan in (FLANNEL, CALICO):
        prefix = f"kp-{plan.lab}-"
        names = {ns.name for ns in plan.namespaces}
        assert all(n.startswith(prefix) for n in names)
        for group in (plan.bridges, plan.veths, plan.vxlans, plan.tunnels, plan.addresses, plan.routes,
                      plan.neighbours, plan.fdb, plan.sysctls, plan.rules, plan.ports):
            for obj in group:
                assert obj.ns in names
        assert {v.peer_ns for v in plan.veths} <= names


def test_flannel_vxlan_device() -> None:
    (vx,) = [v for v in FLANNEL.vxlans if v.ns == "kp-flannel-node1"]
    assert vx == Vxlan("kp-flannel-node1", "flannel.1", 1, 8472, "192.168.1.100", "eth0", 1450, vx.mac)
    assert int(vx.mac.split(":")[0], 16) & 0x02  # locally administered
    addrs = {(a.dev, a.cidr) for a in FLANNEL.addresses if a.ns == "kp-flannel-node1"}
    assert ("flannel.1", "10.244.0.0/32") in addrs
    assert ("cni0", "10.244.0.1/24") in addrs


def test_flannel_per_peer_neighbour_fdb_and_onlink_route() -> None:
    node1 = "kp-flannel-node1"
    peer_mac = next(v.mac for v in FLANNEL.vxlans if v.ns == "kp-flannel-node2")
    assert Neighbour(node1, "flannel.1", "10.244.1.0", peer_mac) in FLANNEL.neighbours
    assert Fdb(node1, "flannel.1", peer_mac, "192.168.1.101") in FLANNEL.fdb
    assert Route(node1, "10.244.1.0/24", via="10.244.1.0", dev="flannel.1", onlink=True) in FLANNEL.routes


def test_flannel_pods_hang_off_cni0_with_hairpin() -> None:
    ports = [p for p in FLANNEL.ports if p.master == "cni0"]
    assert len(ports) == 4 and all(p.hairpin for p in ports)
    assert all(p.dev.startswith("veth") and len(p.dev) == 12 for p in ports)
    pod = "kp-flannel-web-1"
    assert Route(pod, "default", via="10.244.1.1", dev="eth0") in FLANNEL.routes
    assert Route(pod, "10.244.0.0/16", via="10.244.1.1", dev="eth0") in FLANNEL.routes
    assert {v.mtu for v in FLANNEL.veths if v.ns.endswith(("web-0", "web-1"))} == {1450}


def test_flannel_rules_are_flanneld_text() -> None:
    nat = next(r.text for r in FLANNEL.rules if r.ns == "kp-flannel-node2" and r.owner == "flannel")
    assert '-A FLANNEL-POSTRTG -m mark --mark 0x4000/0x4000 -m comment --comment "flanneld masq" -j RETURN' in nat
    assert ('-A FLANNEL-POSTRTG -s 10.244.1.0/24 -d 10.244.0.0/16 -m comment --comment "flanneld masq" -j RETURN'
            in nat)
    assert ('-A FLANNEL-POSTRTG -s 10.244.0.0/16 ! -d 224.0.0.0/4 -m comment --comment "flanneld masq" '
            "-j MASQUERADE --random-fully") in nat


def test_calico_tunnel_routes_and_blackhole() -> None:
    node1 = "kp-calico-node1"
    (tun,) = [t for t in CALICO.tunnels if t.ns == node1]
    assert (tun.name, tun.mtu) == ("tunl0", 1480)
    assert any(a.ns == node1 and a.dev == "tunl0" and a.cidr == "192.168.97.1/32" for a in CALICO.addresses)
    assert Route(node1, "192.168.97.0/24", type="blackhole", proto="bird") in CALICO.routes
    assert Route(node1, "192.168.98.0/24", via="10.246.198.18", dev="tunl0", onlink=True,
                 proto="bird") in CALICO.routes
    assert Route(node1, "default", via="10.246.0.1", dev="eth0") in CALICO.routes  # proxy ARP needs it


def test_calico_workload_interface() -> None:
    node1, pod = "kp-calico-node1", "kp-calico-nginx-0"
    (veth,) = [v for v in CALICO.veths if v.ns == pod]
    assert veth.peer_ns == node1 and veth.peer_name == "cali" + veth.peer_name[4:] and len(veth.peer_name) == 15
    assert veth.peer_mac == "ee:ee:ee:ee:ee:ee" and veth.mtu == 1480
    host = veth.peer_name
    assert Route(node1, "192.168.97.10/32", dev=host, scope="link") in CALICO.routes
    assert Neighbour(node1, host, "192.168.97.10", veth.mac) in CALICO.neighbours
    assert Route(pod, "169.254.1.1/32", dev="eth0", scope="link") in CALICO.routes
    assert Route(pod, "default", via="169.254.1.1", dev="eth0") in CALICO.routes
    assert any(a.ns == pod and a.cidr == "192.168.97.10/32" for a in CALICO.addresses)
    for key, value in (("conf/{}/proxy_arp", "1"), ("neigh/{}/proxy_delay", "0"), ("conf/{}/forwarding", "1")):
        assert Sysctl(node1, "net/ipv4/" + key.format(host), value) in CALICO.sysctls


def test_underlay_routes_externals_to_nodes() -> None:
    under = "kp-calico-underlay"
    addrs = {(a.dev, a.cidr) for a in CALICO.addresses if a.ns == under}
    assert ("br0", "10.246.0.1/16") in addrs
    assert ("ext0", "10.242.72.1/24") in addrs
    assert Route("kp-calico-client", "default", via="10.242.72.1", dev="eth0") in CALICO.routes
    assert Sysctl(under, "net/ipv4/ip_forward", "1") in CALICO.sysctls
