"""Read a namespace's interfaces, addresses and routes back from the kernel (for `kpemu inspect`).

Through `ip -json` (three processes per namespace): this runs in the guest too, where importing a
netlink library costs far more than the processes.
"""

from __future__ import annotations

import json
from typing import Any

from kpemu.kernel import netns as nsmod


def _ip_json(ns: str, *args: str) -> list[dict[str, Any]]:
    res = nsmod.run_in(ns, ["ip", "-json", *args])
    return json.loads(res.stdout or "[]") if res.returncode == 0 else []


def describe_netns(ns: str) -> dict[str, Any]:
    """{"netns", "interfaces": [{name, state, mtu, mac, kind, master, addresses}], "routes": [...]}."""
    interfaces = []
    addrs = {a["ifname"]: a.get("addr_info", []) for a in _ip_json(ns, "-4", "addr", "show")}
    for link in _ip_json(ns, "-details", "link", "show"):
        interfaces.append({
            "name": link["ifname"],
            "state": link.get("operstate"),
            "mtu": link.get("mtu"),
            "mac": link.get("address"),
            "kind": (link.get("linkinfo") or {}).get("info_kind"),
            "master": link.get("master"),
            "addresses": [f"{a['local']}/{a['prefixlen']}" for a in addrs.get(link["ifname"], [])],
        })
    routes = [{
        "dst": r["dst"] if "/" in r["dst"] or r["dst"] == "default" else f"{r['dst']}/32",
        "via": r.get("gateway"),
        "dev": r.get("dev"),
        "type": r.get("type", "unicast"),
        "onlink": "onlink" in r.get("flags", []),
    } for r in _ip_json(ns, "-4", "route", "show", "table", "main")]
    return {"netns": ns, "interfaces": interfaces, "routes": routes}
