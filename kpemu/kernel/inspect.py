"""Read a namespace's interfaces, addresses and routes back from the kernel (for `kpemu inspect`)."""

from __future__ import annotations

from typing import Any

from kpemu.kernel import netns as nsmod

ROUTE_TYPES = {1: "unicast", 2: "local", 3: "broadcast", 6: "blackhole", 7: "unreachable"}


def describe_netns(ns: str) -> dict[str, Any]:
    """{"netns", "interfaces": [{name, state, mtu, mac, kind, addresses}], "routes": [...]}."""
    with nsmod.open_ipr(ns) as ipr:
        names: dict[int, str] = {}
        interfaces = []
        for link in ipr.get_links():
            idx = link["index"]
            names[idx] = link.get_attr("IFLA_IFNAME")
            info = link.get_attr("IFLA_LINKINFO")
            interfaces.append({
                "name": names[idx],
                "state": link.get_attr("IFLA_OPERSTATE"),
                "mtu": link.get_attr("IFLA_MTU"),
                "mac": link.get_attr("IFLA_ADDRESS"),
                "kind": info.get_attr("IFLA_INFO_KIND") if info else None,
                "master": link.get_attr("IFLA_MASTER"),
                "addresses": [],
            })
        by_name = {i["name"]: i for i in interfaces}
        for i in interfaces:
            i["master"] = names.get(i["master"]) if i["master"] else None
        for a in ipr.get_addr(family=2):
            dev = names.get(a["index"])
            if dev in by_name:
                by_name[dev]["addresses"].append(f"{a.get_attr('IFA_ADDRESS')}/{a['prefixlen']}")
        routes = []
        for r in ipr.get_routes(family=2, table=254):
            dst = r.get_attr("RTA_DST")
            routes.append({
                "dst": f"{dst}/{r['dst_len']}" if dst else "default",
                "via": r.get_attr("RTA_GATEWAY"),
                "dev": names.get(r.get_attr("RTA_OIF")) if r.get_attr("RTA_OIF") else None,
                "type": ROUTE_TYPES.get(r["type"], str(r["type"])),
                "onlink": bool(r["flags"] & 4),
            })
    return {"netns": ns, "interfaces": interfaces, "routes": routes}
