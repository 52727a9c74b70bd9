"""Apply a fabric `Plan` to the kernel through pyroute2, in one process.

Order: namespaces, namespace-wide sysctls, links (bridges, veths, vxlan, tunl0), bridge ports,
addresses, links up, per-device sysctls, neighbours, FDB, routes. Every object lives inside a lab
namespace, so undoing a deploy is deleting its namespaces (see kpemu.lab).
"""

from __future__ import annotations

import errno
import ipaddress
from collections.abc import Callable
from pathlib import Path

from pyroute2 import IPRoute
from pyroute2.ethtool import Ethtool
from pyroute2.netlink.exceptions import NetlinkError

from kpemu.errors import ApplyError, EnvironmentProblem
from kpemu.kernel import netns as nsmod
from kpemu.plan.types import Namespace, Plan, Route, Sysctl

RT_PROTO = {"boot": 3, "static": 4, "bird": 12}
RT_SCOPE = {"universe": 0, "link": 253, "host": 254}
RTN_TYPE = {"unicast": 1, "blackhole": 6}
NUD_PERMANENT = 0x80
NTF_SELF = 0x02
RTNH_F_ONLINK = 4
CHECKSUM_FEATURE = "tx-checksum-ip-generic"


class Fabric:
    """Open netlink handles, one per namespace, for applying a plan."""

    def __init__(self) -> None:
        self.ipr: dict[str, IPRoute] = {}
        self._index: dict[tuple[str, str], int] = {}

    def __getitem__(self, ns: str) -> IPRoute:
        if ns not in self.ipr:
            self.ipr[ns] = nsmod.open_ipr(ns)
        return self.ipr[ns]

    def index(self, ns: str, ifname: str) -> int:
        """Interface index by name, cached: names are stable while a plan is applied."""
        key = (ns, ifname)
        if key not in self._index:
            found = self[ns].link_lookup(ifname=ifname)
            if not found:
                raise ApplyError(f"{ns}: interface {ifname} does not exist")
            self._index[key] = int(found[0])
        return self._index[key]

    def close(self) -> None:
        for ipr in self.ipr.values():
            ipr.close()
        self.ipr.clear()


def _is_namespace_wide(s: Sysctl) -> bool:
    parts = s.key.split("/")
    return not (len(parts) > 4 and parts[2] in ("conf", "neigh") and parts[3] not in ("all", "default"))


def write_sysctls(sysctls: list[Sysctl]) -> None:
    """Write sysctls, each inside its namespace (/proc/sys/net follows the thread's namespace)."""
    by_ns: dict[str, list[Sysctl]] = {}
    for s in sysctls:
        by_ns.setdefault(s.ns, []).append(s)
    for ns, items in by_ns.items():
        with nsmod.inside(ns):
            for s in items:
                path = Path("/proc/sys") / s.key
                try:
                    path.write_text(s.value)
                except FileNotFoundError:
                    if not s.optional:
                        raise ApplyError(f"{ns}: sysctl {s.key.replace('/', '.')} does not exist") from None
                except OSError as e:
                    if not s.optional:
                        raise ApplyError(f"{ns}: cannot set {s.key.replace('/', '.')}={s.value}: {e}") from None


def _netlink(what: str, fn: Callable[[], object]) -> None:
    try:
        fn()
    except NetlinkError as e:
        raise ApplyError(f"{what}: {e.args[1] if len(e.args) > 1 else e}") from None


def apply_fabric(plan: Plan, created: list[str],
                 make_netns: Callable[[Namespace], None] | None = None) -> None:
    """Create the plan's namespaces (appending each to `created` as it appears) and wire them.

    `make_netns` creates one namespace (default: an empty named namespace); for a container member
    it starts the container and binds its namespace under the same name.
    """
    make = make_netns or (lambda ns: nsmod.create_netns(ns.name))
    for ns in plan.namespaces:
        make(ns)
        created.append(ns.name)
    sysctls = list(plan.sysctls)
    write_sysctls([s for s in sysctls if _is_namespace_wide(s)])
    f = Fabric()
    try:
        _apply_links(plan, f)
        write_sysctls([s for s in sysctls if not _is_namespace_wide(s)])
        _apply_entries(plan, f)
    finally:
        f.close()


def _apply_links(plan: Plan, f: Fabric) -> None:
    for b in plan.bridges:
        _netlink(f"{b.ns}: bridge {b.name}", lambda b=b: f[b.ns].link("add", ifname=b.name, kind="bridge", mtu=b.mtu))
    for v in plan.veths:
        _netlink(
            f"{v.ns}: veth {v.name} <-> {v.peer_ns}/{v.peer_name}",
            lambda v=v: f[v.ns].link(
                "add", ifname=v.name, kind="veth", mtu=v.mtu,
                peer={"ifname": v.peer_name, "net_ns_fd": v.peer_ns, "mtu": v.mtu},
            ),
        )
        for ns, name, mac in ((v.ns, v.name, v.mac), (v.peer_ns, v.peer_name, v.peer_mac)):
            if mac:
                _netlink(f"{ns}: {name} address", lambda ns=ns, name=name, mac=mac: f[ns].link(
                    "set", index=f.index(ns, name), address=mac))
    for x in plan.vxlans:
        _netlink(
            f"{x.ns}: vxlan {x.name}",
            lambda x=x: f[x.ns].link(
                "add", ifname=x.name, kind="vxlan", vxlan_id=x.vni, vxlan_local=x.local,
                vxlan_link=f.index(x.ns, x.dev), vxlan_port=x.port, vxlan_learning=0,
                address=x.mac, mtu=x.mtu,
            ),
        )
    for t in plan.tunnels:
        if not f[t.ns].link_lookup(ifname=t.name):
            try:
                f[t.ns].link("add", ifname=t.name, kind="ipip")
            except NetlinkError as e:
                if e.code in (errno.EOPNOTSUPP, errno.ENODEV, errno.EINVAL):
                    raise EnvironmentProblem(
                        "this kernel has no IPIP tunnel support (module ipip), which cni: calico-ipip needs",
                        "run with --runtime vm (a guest kernel with ipip), or `modprobe ipip` on the host",
                    ) from None
                raise
        _netlink(f"{t.ns}: {t.name} mtu", lambda t=t: f[t.ns].link("set", index=f.index(t.ns, t.name), mtu=t.mtu))
    for p in plan.ports:
        _netlink(f"{p.ns}: {p.dev} master {p.master}", lambda p=p: f[p.ns].link(
            "set", index=f.index(p.ns, p.dev), master=f.index(p.ns, p.master)))
        if p.hairpin:
            _netlink(f"{p.ns}: {p.dev} hairpin", lambda p=p: f[p.ns].brport(
                "set", index=f.index(p.ns, p.dev), mode=1))
    for a in plan.addresses:
        ip, _, plen = a.cidr.partition("/")
        _netlink(f"{a.ns}: address {a.cidr} on {a.dev}", lambda a=a, ip=ip, plen=plen: f[a.ns].addr(
            "add", index=f.index(a.ns, a.dev), address=ip, prefixlen=int(plen)))
    for ns in plan.namespaces:
        for name in ["lo", *plan.devices_in(ns.name)]:
            _netlink(f"{ns.name}: {name} up", lambda ns=ns, name=name: f[ns.name].link(
                "set", index=f.index(ns.name, name), state="up"))
    veth_ends: dict[str, list[str]] = {}
    for v in plan.veths:
        veth_ends.setdefault(v.ns, []).append(v.name)
        veth_ends.setdefault(v.peer_ns, []).append(v.peer_name)
    for ns, names in veth_ends.items():
        disable_tx_checksum(ns, names)


def disable_tx_checksum(ns: str, ifnames: list[str]) -> None:
    """Turn off TX checksum offload so captured checksums are the real ones (containerlab does too)."""
    with nsmod.inside(ns), Ethtool() as eth:
        for ifname in ifnames:
            feats = eth.get_features(ifname)
            feat = feats.features.get(CHECKSUM_FEATURE)
            if feat is not None and feat.enable:
                feat.enable = False
                eth.set_features(ifname, feats)


def _route_args(f: Fabric, r: Route) -> dict[str, object]:
    args: dict[str, object] = {
        "proto": RT_PROTO[r.proto],
        "scope": RT_SCOPE[r.scope],
        "type": RTN_TYPE[r.type],
    }
    if r.dst == "default":
        args.update(dst="0.0.0.0", dst_len=0)
    else:
        net = ipaddress.IPv4Network(r.dst)
        args.update(dst=str(net.network_address), dst_len=net.prefixlen)
    if r.via:
        args["gateway"] = r.via
    if r.dev:
        args["oif"] = f.index(r.ns, r.dev)
    if r.onlink:
        args["flags"] = RTNH_F_ONLINK
    return args


def _apply_entries(plan: Plan, f: Fabric) -> None:
    for n in plan.neighbours:
        _netlink(f"{n.ns}: neighbour {n.ip} on {n.dev}", lambda n=n: f[n.ns].neigh(
            "replace", ifindex=f.index(n.ns, n.dev), dst=n.ip, lladdr=n.mac, state=NUD_PERMANENT))
    for e in plan.fdb:
        _netlink(f"{e.ns}: fdb {e.mac} dst {e.dst}", lambda e=e: f[e.ns].fdb(
            "append", ifindex=f.index(e.ns, e.dev), lladdr=e.mac, dst=e.dst, state=NUD_PERMANENT,
            flags=NTF_SELF))
    for r in plan.routes:
        _netlink(f"{r.ns}: route {r.dst}", lambda r=r: f[r.ns].route("replace", **_route_args(f, r)))
