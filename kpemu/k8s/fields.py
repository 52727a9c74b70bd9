"""Which fields of the objects kpemu reads and which it does not: the ones it does not are listed
(per kind, with how many objects carry them), never dropped silently."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kpemu import cni as cni_registry
from kpemu.k8s.objects import K8sObject

Pattern = tuple[str, ...]  # keys; "*" any key, "[]" any list item


def _p(*paths: str) -> tuple[Pattern, ...]:
    return tuple(tuple(p.split(" ")) for p in paths)


_META = ("apiVersion", "kind", "metadata name", "metadata namespace")
# Read, per kind (space-separated keys so annotation names may hold dots and slashes); a Node's CNI
# annotations are each CNI's own (`read_patterns`).
READ: dict[str, tuple[Pattern, ...]] = {
    "Node": _p(*_META, "spec podCIDR", "spec podCIDRs", "status addresses",
               "metadata labels topology.kubernetes.io/zone",
               "status nodeInfo kubeProxyVersion", "status nodeInfo kubeletVersion"),
    "Pod": _p(*_META, "metadata labels", "metadata deletionTimestamp", "spec nodeName", "spec hostNetwork",
              "spec containers [] ports [] containerPort", "spec containers [] ports [] protocol",
              "spec containers [] ports [] name", "status podIP", "status podIPs", "status phase",
              "status conditions"),
    "Service": _p(*_META, "spec type", "spec clusterIP", "spec clusterIPs", "spec ipFamilies", "spec ipFamilyPolicy",
                  "spec ports [] name", "spec ports [] port", "spec ports [] protocol", "spec ports [] targetPort",
                  "spec ports [] nodePort", "spec selector", "spec sessionAffinity",
                  "spec sessionAffinityConfig clientIP timeoutSeconds", "spec externalTrafficPolicy",
                  "spec internalTrafficPolicy", "spec healthCheckNodePort", "spec externalIPs",
                  "spec loadBalancerSourceRanges", "spec loadBalancerIP", "spec allocateLoadBalancerNodePorts",
                  "spec externalName", "spec trafficDistribution", "status loadBalancer ingress [] ip",
                  "status loadBalancer ingress [] hostname", "status loadBalancer ingress [] ipMode",
                  "metadata labels service.kubernetes.io/service-proxy-name",
                  "metadata labels service.kubernetes.io/headless",
                  "metadata annotations service.kubernetes.io/topology-mode",
                  "metadata annotations service.kubernetes.io/topology-aware-hints"),
    "EndpointSlice": _p(*_META, "metadata labels kubernetes.io/service-name", "addressType",
                        "endpoints [] addresses", "endpoints [] conditions", "endpoints [] nodeName",
                        "endpoints [] topology kubernetes.io/hostname", "endpoints [] hints", "ports [] name",
                        "ports [] port", "ports [] protocol",
                        "metadata labels service.kubernetes.io/service-proxy-name",
                        "metadata labels service.kubernetes.io/headless"),
    "Endpoints": _p(*_META, "subsets [] addresses [] ip", "subsets [] addresses [] nodeName",
                    "subsets [] notReadyAddresses [] ip", "subsets [] notReadyAddresses [] nodeName",
                    "subsets [] ports [] name", "subsets [] ports [] port", "subsets [] ports [] protocol"),
    "KubeProxyConfiguration": _p("apiVersion", "kind", "mode", "clusterCIDR", "iptables masqueradeBit",
                                 "iptables masqueradeAll", "iptables localhostNodePorts", "nodePortAddresses",
                                 "ipvs scheduler", "nftables masqueradeBit", "nftables masqueradeAll",
                                 "detectLocalMode", "detectLocal bridgeInterface", "detectLocal interfaceNamePrefix",
                                 "detectLocal clusterCIDRs", "conntrack tcpBeLiberal", "linux masqueradeAll",
                                 "linux conntrack tcpBeLiberal", "featureGates"),
    "ConfigMap": _p(*_META, "data config.conf"),
}


def _display(path: tuple[str, ...]) -> str:
    out = ""
    for k in path:
        if k == "[]":
            out += "[]"
        elif "." in k or "/" in k:
            out += f'["{k}"]'
        else:
            out += ("." if out else "") + k
    return out


def _walk(data: Any, path: tuple[str, ...], patterns: tuple[Pattern, ...], found: set[str]) -> None:
    def match(pat: Pattern) -> bool:
        return all(a in ("*", b) for a, b in zip(pat, path, strict=False))

    live = [p for p in patterns if len(p) >= len(path) and match(p)]
    if any(len(p) == len(path) for p in live):
        return  # read, with everything under it
    if not live:
        found.add(_display(path))
        return
    if isinstance(data, dict):
        for k, v in data.items():
            _walk(v, (*path, str(k)), patterns, found)
    elif isinstance(data, list):
        for v in data:
            _walk(v, (*path, "[]"), patterns, found)


def read_patterns(kind: str) -> tuple[Pattern, ...]:
    """The fields kpemu reads in an object of `kind`."""
    if kind != "Node":
        return READ.get(kind, ())
    return READ[kind] + _p(*(f"metadata annotations {a}" for c in cni_registry.specs() for a in c.annotations))


def not_modelled(objects: Iterable[K8sObject]) -> dict[str, dict[str, int]]:
    """kind -> {field path: number of objects that carry it} for every field kpemu does not read."""
    out: dict[str, dict[str, int]] = {}
    for obj in objects:
        found: set[str] = set()
        for k, v in obj.data.items():
            _walk(v, (str(k),), read_patterns(obj.kind), found)
        per = out.setdefault(obj.kind, {})
        for f in found:
            per[f] = per.get(f, 0) + 1
    return {k: dict(sorted(v.items())) for k, v in out.items() if v}
