"""A plan as the iproute2 shell script people write by hand (`ip netns add`, `ip link add` ...).

Used as the baseline in `make bench`, and handy for reading what a lab consists of.
"""

from __future__ import annotations

import shlex

from kpemu.plan.types import Plan, Route

PROTO = {"boot": "", "static": " proto static", "bird": " proto bird"}


def _route(r: Route) -> str:
    parts = ["ip", "-n", r.ns, "route", "replace"]
    if r.type == "blackhole":
        parts += ["blackhole", r.dst]
    else:
        parts.append(r.dst)
        if r.via:
            parts += ["via", r.via]
        if r.dev:
            parts += ["dev", r.dev]
        if r.scope != "universe":
            parts += ["scope", r.scope]
        if r.onlink:
            parts.append("onlink")
    return " ".join(parts) + PROTO[r.proto]


def plan_to_shell(plan: Plan) -> str:
    """Commands that build the plan's fabric (not its iptables rules)."""
    out = ["set -e"]
    out += [f"ip netns add {ns.name}" for ns in plan.namespaces]
    out += [f"ip netns exec {s.ns} sysctl -qw {s.key.replace('/', '.')}={s.value}"
            + (" || true" if s.optional else "") for s in plan.sysctls if "/conf/all/" in s.key
            or "/conf/default/" in s.key or s.key.endswith("ip_forward")]
    out += [f"ip -n {b.ns} link add {b.name} mtu {b.mtu} type bridge" for b in plan.bridges]
    for v in plan.veths:
        out.append(f"ip -n {v.ns} link add {v.name} mtu {v.mtu} type veth peer name {v.peer_name} "
                   f"netns {v.peer_ns} mtu {v.mtu}")
        if v.mac:
            out.append(f"ip -n {v.ns} link set {v.name} address {v.mac}")
        if v.peer_mac:
            out.append(f"ip -n {v.peer_ns} link set {v.peer_name} address {v.peer_mac}")
    out += [f"ip -n {x.ns} link add {x.name} type vxlan id {x.vni} local {x.local} dev {x.dev} dstport {x.port} "
            f"nolearning; ip -n {x.ns} link set {x.name} mtu {x.mtu} address {x.mac}" for x in plan.vxlans]
    out += [f"ip -n {t.ns} link set {t.name} mtu {t.mtu}" for t in plan.tunnels]
    for p in plan.ports:
        out.append(f"ip -n {p.ns} link set {p.dev} master {p.master}")
        if p.hairpin:
            out.append(f"ip -n {p.ns} link set {p.dev} type bridge_slave hairpin on")
    out += [f"ip -n {a.ns} addr add {a.cidr} dev {a.dev}" for a in plan.addresses]
    for ns in plan.namespaces:
        out += [f"ip -n {ns.name} link set {d} up" for d in ["lo", *plan.devices_in(ns.name)]]
    out += [f"ip netns exec {s.ns} sysctl -qw {shlex.quote(s.key.replace('/', '.'))}={s.value}"
            for s in plan.sysctls if "/conf/all/" not in s.key and "/conf/default/" not in s.key
            and not s.key.endswith("ip_forward") and not s.optional]
    out += [f"ip -n {n.ns} neigh replace {n.ip} lladdr {n.mac} dev {n.dev} nud permanent" for n in plan.neighbours]
    out += [f"bridge -n {e.ns} fdb append {e.mac} dev {e.dev} dst {e.dst} self permanent" for e in plan.fdb]
    out += [_route(r) for r in plan.routes]
    return "\n".join(out) + "\n"


def plan_teardown_shell(plan: Plan) -> str:
    """Commands that remove the plan's namespaces (and with them everything inside)."""
    return "\n".join(f"ip netns del {ns.name}" for ns in plan.namespaces) + "\n"
