"""The shape of every field kpemu reads from a Kubernetes object, checked when the object is read, as
the API server checks it (`json: cannot unmarshal ...`, `must be a valid IP address`): a mapping where
a mapping is expected, a list, a string, an integer (of at most 19 digits), a boolean, an IP address
or a CIDR. A field that is null or absent is not checked (the API server defaults it), a null list
item is; the problem
names the file, the line and the field path.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], str | None]  # None when the value fits, else what was expected


def _type(t: type | tuple[type, ...], what: str) -> Check:
    def check(v: Any) -> str | None:
        return None if isinstance(v, t) and not (isinstance(v, bool) and t is int) else what
    return check


def _ip(v: Any) -> str | None:
    try:
        ipaddress.ip_address(v if isinstance(v, str) else "")
        return None
    except ValueError:
        return "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"


def _cidr(v: Any) -> str | None:
    try:
        ipaddress.ip_network(v if isinstance(v, str) else "", strict=False)
        return None
    except ValueError:
        return "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"


def _int(v: Any) -> str | None:
    if isinstance(v, bool) or not isinstance(v, int):
        return "must be an integer"
    return "must be an integer of at most 19 digits" if abs(v) >= 10 ** 19 else None


def _port(v: Any) -> str | None:
    return _int(v) or (None if 0 <= v <= 65535 else "must be between 0 and 65535, inclusive")


MAP, LIST, STR, BOOL = _type(dict, "must be a mapping"), _type(list, "must be a list"), \
    _type(str, "must be a string"), _type(bool, "must be a boolean")
INT_OR_STR = _type((int, str), "must be an integer or a string")


def _s(spec: str) -> dict[tuple[str, ...], Check]:
    kinds = {"map": MAP, "list": LIST, "str": STR, "bool": BOOL, "int": _int, "port": _port, "ip": _ip,
             "cidr": _cidr, "int|str": INT_OR_STR}
    out = {}
    for line in filter(None, spec.strip().splitlines()):
        path, kind = line.rsplit(" ", 1)
        out[tuple(path.split())] = kinds[kind]
    return out


_META = """
metadata map
metadata name str
metadata namespace str
metadata labels map
metadata annotations map
metadata deletionTimestamp str
"""
SHAPES: dict[str, dict[tuple[str, ...], Check]] = {
    "Node": _s(_META + """
spec map
spec podCIDR cidr
spec podCIDRs list
spec podCIDRs [] cidr
status map
status addresses list
status addresses [] map
status addresses [] address str
status addresses [] type str
status nodeInfo map
status nodeInfo kubeProxyVersion str
status nodeInfo kubeletVersion str
"""),
    "Pod": _s(_META + """
spec map
spec nodeName str
spec hostNetwork bool
spec containers list
spec containers [] map
spec containers [] ports list
spec containers [] ports [] map
spec containers [] ports [] containerPort port
spec containers [] ports [] protocol str
spec containers [] ports [] name str
status map
status podIP ip
status podIPs list
status podIPs [] map
status podIPs [] ip ip
status phase str
status conditions list
status conditions [] map
status conditions [] type str
status conditions [] status str
"""),
    "Service": _s(_META + """
spec map
spec type str
spec clusterIP str
spec clusterIPs list
spec ipFamilies list
spec ports list
spec ports [] map
spec ports [] name str
spec ports [] protocol str
spec ports [] port int
spec ports [] nodePort port
spec ports [] targetPort int|str
spec selector map
spec sessionAffinity str
spec sessionAffinityConfig map
spec sessionAffinityConfig clientIP map
spec externalIPs list
spec loadBalancerSourceRanges list
spec healthCheckNodePort port
spec allocateLoadBalancerNodePorts bool
spec trafficDistribution str
status map
status loadBalancer map
status loadBalancer ingress list
status loadBalancer ingress [] map
status loadBalancer ingress [] ipMode str
"""),
    "EndpointSlice": _s(_META + """
addressType str
endpoints list
endpoints [] map
endpoints [] addresses list
endpoints [] addresses [] ip
endpoints [] conditions map
endpoints [] conditions ready bool
endpoints [] conditions serving bool
endpoints [] conditions terminating bool
endpoints [] nodeName str
endpoints [] topology map
endpoints [] hints map
endpoints [] hints forZones list
endpoints [] hints forZones [] map
endpoints [] hints forZones [] name str
endpoints [] hints forNodes list
endpoints [] hints forNodes [] map
endpoints [] hints forNodes [] name str
ports list
ports [] map
ports [] name str
ports [] port port
ports [] protocol str
"""),
    "Endpoints": _s(_META + """
subsets list
subsets [] map
subsets [] addresses list
subsets [] addresses [] map
subsets [] addresses [] ip ip
subsets [] addresses [] nodeName str
subsets [] notReadyAddresses list
subsets [] notReadyAddresses [] map
subsets [] notReadyAddresses [] ip ip
subsets [] notReadyAddresses [] nodeName str
subsets [] ports list
subsets [] ports [] map
subsets [] ports [] name str
subsets [] ports [] port port
subsets [] ports [] protocol str
"""),
    "KubeProxyConfiguration": _s("""
mode str
clusterCIDR str
iptables map
iptables masqueradeBit int
iptables masqueradeAll bool
iptables localhostNodePorts bool
nftables map
nftables masqueradeBit int
nftables masqueradeAll bool
ipvs map
ipvs scheduler str
nodePortAddresses list
nodePortAddresses [] str
detectLocalMode str
detectLocal map
detectLocal bridgeInterface str
detectLocal interfaceNamePrefix str
detectLocal clusterCIDRs list
detectLocal clusterCIDRs [] str
conntrack map
conntrack tcpBeLiberal bool
linux map
linux masqueradeAll bool
linux conntrack map
linux conntrack tcpBeLiberal bool
"""),
    "ConfigMap": _s(_META + """
data map
"""),
}


_PREFIXES = {kind: {p[:i] for p in shapes for i in range(1, len(p) + 1)} for kind, shapes in SHAPES.items()}


def shape_problems(kind: str, data: dict[str, Any]) -> list[tuple[tuple[str | int, ...], str]]:
    """(field path, what was expected) for every field of `data` whose shape is not the one the API
    server takes; iterative, each value visited once."""
    shapes = SHAPES.get(kind, {})
    prefixes = _PREFIXES.get(kind, set())
    out: list[tuple[tuple[str | int, ...], str]] = []
    stack: list[tuple[Any, tuple[str, ...], tuple[str | int, ...]]] = [(data, (), ())]
    while stack:
        value, pattern, path = stack.pop()
        if pattern:
            check = shapes.get(pattern)
            if check is not None and (value is not None or pattern[-1] == "[]"):  # a null list item is not absent
                wrong = check(value)
                if wrong:
                    out.append((path, f"Invalid value: {_short(value)}: {wrong}"))
                    continue
        if isinstance(value, dict):
            stack += [(v, (*pattern, str(k)), (*path, str(k))) for k, v in value.items()
                      if (*pattern, str(k)) in prefixes]
        elif isinstance(value, list) and (*pattern, "[]") in prefixes:
            stack += [(v, (*pattern, "[]"), (*path, i)) for i, v in enumerate(value)]
    return sorted(out, key=lambda p: [str(x) for x in p[0]])


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def display(path: tuple[str | int, ...]) -> str:
    """("spec", "ports", 0, "port") -> spec.ports[0].port."""
    out = ""
    for k in path:
        out += f"[{k}]" if isinstance(k, int) else ("." if out else "") + k
    return out
