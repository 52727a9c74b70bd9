"""Kubernetes objects -> the data of an equivalent kpemu topology.

Members keep the objects' names (a pod is metadata.name, a node its name, a Service
namespace/name). Endpoints come from the EndpointSlices (else the Endpoints) when they are given,
as kube-proxy reads them; when they equal what the selector picks from the pods, the Service keeps
its selector (so the topology stays editable). Without slices the selector's pods are the
endpoints, named targetPorts resolved per pod from its container ports (as the EndpointSlice
controller does). Everything that was not kept is said: `notes` (decisions, objects left out) and
`unmodelled` (fields kpemu does not read).
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kpemu import cni as cni_registry
from kpemu.cni import catalog as cni_catalog
from kpemu.errors import InputError, Problem
from kpemu.k8s.fields import not_modelled
from kpemu.k8s.objects import K8sObject, is_kubernetes, located
from kpemu.k8s.service import Allocator, ServiceIn, ipv4, read_service
from kpemu.model.modes import MODE_FACTS, NEWEST_MINOR, OLDEST_MINOR
from kpemu.model.parse import Lines
from kpemu.model.topology import KUBE_PROXY_SKIPS, FeatureGates
from kpemu.model.unmodelled import refused_fields

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
ZONE_LABEL = "topology.kubernetes.io/zone"
# kube-proxy's informers select Services and EndpointSlices without these labels (cmd/kube-proxy/app/server.go)
SKIP_LABELS = tuple(KUBE_PROXY_SKIPS)
DEFAULT_SERVICE_CIDR = "10.96.0.0/12"  # kube-apiserver's --service-cluster-ip-range default (kubeadm)
CONFIG_V1ALPHA1 = "kubeproxy.config.k8s.io/v1alpha1"
CONFIG_V1ALPHA2 = "kubeproxy.config.k8s.io/v1alpha2"  # the internal config's shape (KEP-784), not served yet


@dataclass
class Imported:
    """The topology data and what the import decided or could not keep."""

    data: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    unmodelled: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class _Ep:
    """One endpoint address with its port numbers per Service port name."""

    ip: str
    node: str | None
    ready: bool
    serving: bool
    terminating: bool
    ports: tuple[tuple[str, int], ...]  # (service port name, number), sorted
    hints: tuple[tuple[str, ...], tuple[str, ...]] | None = None  # (forZones, forNodes); None: no hints
    where: str = field(default="", compare=False)  # the object field it came from, for messages

    def same(self, other: _Ep) -> bool:
        """Whether kube-proxy reads the two alike (where they came from aside)."""
        return (self.node, self.ready, self.serving, self.terminating, self.hints) == (
            other.node, other.ready, other.serving, other.terminating, other.hints)


def _meta(obj: K8sObject) -> dict[str, Any]:
    return obj.data.get("metadata") or {}


class _Import:
    def __init__(self, objects: list[K8sObject], cni: str | None, name: str | None):
        self.by_kind: dict[str, list[K8sObject]] = {}
        for o in objects:
            self.by_kind.setdefault(o.kind, []).append(o)
        self.objects = objects
        self.cni_given, self.name = cni, name
        self.problems: list[Problem] = []
        self.notes: list[str] = []
        self.nodes: dict[str, dict[str, Any]] = {}

    def kind(self, k: str) -> list[K8sObject]:
        return self.by_kind.get(k, [])

    # -- kube-proxy ------------------------------------------------------------------------------
    def kube_proxy(self) -> dict[str, Any]:
        configs = self.kind("KubeProxyConfiguration")
        if len(configs) > 1:
            self.problems.append(configs[1].problem("", "a second KubeProxyConfiguration; give one per import"))
        out: dict[str, Any] = {}
        version = self._version()
        if version:
            out["version"] = version
        if not configs:
            return out
        c, d = configs[0], configs[0].data
        mode = d.get("mode") or "iptables"
        if mode not in MODE_FACTS:
            *names, last = (repr(m) for m in MODE_FACTS)
            self.problems.append(c.problem("mode", f"Unsupported value: {mode!r}: kpemu models kube-proxy modes "
                                                   f"{', '.join(names)} and {last}"))
        out["mode"] = mode
        api = str(d.get("apiVersion") or "")
        alpha2 = api == CONFIG_V1ALPHA2
        if api not in (CONFIG_V1ALPHA1, CONFIG_V1ALPHA2):
            self.problems.append(c.problem("apiVersion", f"Unsupported value: {api!r}: expected {CONFIG_V1ALPHA1!r} "
                                                         f"(or {CONFIG_V1ALPHA2!r})"))
        if alpha2:
            self.notes.append(f"KubeProxyConfiguration {CONFIG_V1ALPHA2} read with the names it gives "
                              "(detectLocal.clusterCIDRs, linux.masqueradeAll, linux.conntrack); kube-proxy 1.37 "
                              f"and older load only {CONFIG_V1ALPHA1}")
        local = d.get("detectLocal") or {}
        raw = local.get("clusterCIDRs") or [] if alpha2 else str(d.get("clusterCIDR") or "").split(",")
        cidrs = [str(x).strip() for x in raw if str(x).strip()]
        v4 = [x for x in cidrs if ":" not in x]
        if v4:
            out["clusterCIDR"] = v4[0]
        section = MODE_FACTS[mode].config_section if mode in MODE_FACTS else "iptables"
        ipt = d.get(section) or {}  # only the iptables section has localhostNodePorts
        for key in ("masqueradeBit", *(() if alpha2 else ("masqueradeAll",)),
                    *(("localhostNodePorts",) if section == "iptables" else ())):
            if ipt.get(key) is not None:
                out[key] = ipt[key]
        linux = (d.get("linux") or {}) if alpha2 else d
        if alpha2 and linux.get("masqueradeAll") is not None:
            out["masqueradeAll"] = linux["masqueradeAll"]
        gates = {k: v for k, v in (d.get("featureGates") or {}).items() if k in FeatureGates.model_fields}
        if gates:
            out["featureGates"] = gates
        if d.get("detectLocalMode"):
            out["detectLocalMode"] = d["detectLocalMode"]
        for key in ("bridgeInterface", "interfaceNamePrefix"):
            if local.get(key):
                out[key] = local[key]
        if (linux.get("conntrack") or {}).get("tcpBeLiberal"):
            if version and int(version.split(".")[1]) < 29:
                self.notes.append(f"conntrack.tcpBeLiberal is a 1.29+ setting; kube-proxy {version} ignores it")
            else:
                out["tcpBeLiberal"] = True
        npa = [x for x in d.get("nodePortAddresses") or [] if ":" not in x]
        if "primary" in npa:  # 1.29+: the node's primary address(es), i.e. its InternalIP
            npa = [x for x in npa if x != "primary"] + [f"{n['ip']}/32" for n in self.nodes.values()]
            self.notes.append("KubeProxyConfiguration nodePortAddresses 'primary': each node's InternalIP")
        out["nodePortAddresses"] = npa
        scheduler = (d.get("ipvs") or {}).get("scheduler")
        if scheduler and mode in MODE_FACTS and MODE_FACTS[mode].scheduler:
            out["scheduler"] = scheduler
        return out

    def _version(self) -> str | None:
        seen = Counter()
        for n in self.kind("Node"):
            info = (n.data.get("status") or {}).get("nodeInfo") or {}
            v = info.get("kubeProxyVersion") or info.get("kubeletVersion")
            if v:
                parts = str(v).lstrip("v").split(".")
                if len(parts) >= 2 and parts[1].isdigit() and len(parts[1]) <= 4:
                    seen[int(parts[1])] += 1
        if not seen:
            return None
        minor = seen.most_common(1)[0][0]
        if len(seen) > 1:
            self.notes.append(f"nodes run kube-proxy 1.{', 1.'.join(str(m) for m in sorted(seen))}; the topology "
                              f"models 1.{minor} (the most common)")
        if not OLDEST_MINOR <= minor <= NEWEST_MINOR:
            clamped = min(max(minor, OLDEST_MINOR), NEWEST_MINOR)
            self.notes.append(f"kube-proxy 1.{minor} is not modelled; the topology uses 1.{clamped}")
            minor = clamped
        return f"1.{minor}"

    # -- nodes and CNI ---------------------------------------------------------------------------
    def read_nodes(self) -> str:
        kinds: set[str] = set()
        for n in self.kind("Node"):
            ann = _meta(n).get("annotations") or {}
            status, spec = n.data.get("status") or {}, n.data.get("spec") or {}
            ips = [a.get("address") for a in status.get("addresses") or [] if a.get("type") == "InternalIP"]
            ip = next((a for a in ips if ipv4(a)), None)
            if ip is None:
                self.problems.append(n.problem("status.addresses", "no IPv4 InternalIP; kpemu puts the node on the "
                                                                   "underlay at that address"))
                continue
            cidrs = [spec.get("podCIDR"), *(spec.get("podCIDRs") or [])]
            pod_cidr = next((c for c in cidrs if c and ":" not in c), None)
            node: dict[str, Any] = {"name": n.name, "ip": ip, "podCIDR": pod_cidr}
            zone = (_meta(n).get("labels") or {}).get(ZONE_LABEL)
            if zone:
                node["zone"] = str(zone)
            for spec in cni_registry.specs():
                said = spec.recognise(ann)
                if said:
                    kinds.add(said[0])
                    node.update(said[1])
            self.nodes[n.name] = node
        if not self.kind("Node"):
            self.problems.append(Problem(self.objects[0].file, "", "no Node objects; a topology needs the nodes "
                                         "(kubectl get nodes -o yaml)"))
        return self._cni(kinds)

    def _cni(self, kinds: set[str]) -> str:
        if self.cni_given:
            if kinds and kinds != {self.cni_given}:
                self.notes.append(f"--cni {self.cni_given} given; the node annotations say {', '.join(sorted(kinds))}")
            return self.cni_given
        modelled = cni_catalog.names()
        if len(kinds) == 1 and next(iter(kinds)) in modelled:
            cni = next(iter(kinds))
            self.notes.append(f"cni {cni} inferred from the node annotations")
            return cni
        if kinds:
            said = ", ".join(sorted(kinds))
            raise InputError([Problem(self.objects[0].file, "", f"the node annotations say CNI {said}; "
                                      f"kpemu models {' and '.join(modelled)}: give --cni")])
        projects = " or ".join(dict.fromkeys(c.project for c in cni_registry.specs()))
        self.notes.append(f"no {projects} annotation on the nodes: cni {cni_catalog.DEFAULT} assumed (give --cni)")
        return cni_catalog.DEFAULT

    # -- pods ------------------------------------------------------------------------------------
    def read_pods(self) -> list[dict[str, Any]]:
        out = []
        for p in self.kind("Pod"):
            spec, status, meta = p.data.get("spec") or {}, p.data.get("status") or {}, _meta(p)
            ip = status.get("podIP")
            node = spec.get("nodeName")
            why = None
            if spec.get("hostNetwork"):
                why = "hostNetwork: it is its node"
            elif status.get("phase") in ("Succeeded", "Failed"):
                why = f"phase {status['phase']}"
            elif not ip or not node:
                why = "not scheduled or no IP yet"
            elif not ipv4(ip):
                why = "IPv6 only"
            elif node not in self.nodes:
                why = f"its node {node} is not among the Nodes given"
            if why:
                self.notes.append(f"Pod {p.key} left out: {why}")
                continue
            ports: list[dict[str, Any]] = []
            for c in spec.get("containers") or []:
                for cp in c.get("ports") or []:
                    entry = {"port": cp.get("containerPort"), "protocol": cp.get("protocol") or "TCP"}
                    if cp.get("name"):
                        entry["name"] = cp["name"]
                    if all((e["port"], e["protocol"]) != (entry["port"], entry["protocol"]) for e in ports):
                        ports.append(entry)
            conds = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
            out.append({"name": p.name, "namespace": p.namespace, "node": node, "ip": ip,
                        "labels": {str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
                        "ports": ports, "ready": conds.get("Ready") == "True",
                        "terminating": bool(meta.get("deletionTimestamp"))})
        return out

    # -- services --------------------------------------------------------------------------------
    def read_services(self, pods: list[dict[str, Any]], node_ports: str, service_cidr: str | None = None,
                      taken: list[dict[str, Any]] | None = None) -> tuple[list[ServiceIn], str]:
        """The Services that program something, in object order, allocated and with endpoints;
        `taken`: Services already in topology form whose addresses and ports are in use."""
        svcs: list[ServiceIn] = []
        for o in self.kind("Service"):
            skip = next((k for k in SKIP_LABELS if k in (_meta(o).get("labels") or {})), None)
            if skip:
                self.notes.append(f"Service {o.key}: labelled {skip}: kube-proxy does not watch it; left out")
                continue
            s = read_service(o, self.problems)
            if s is None:
                continue
            self.notes += [f"Service {o.key}: {n}" for n in s.notes]
            if "ports" in s.spec:
                svcs.append(s)
        cidr = service_cidr or self._service_cidr([s.spec["clusterIP"] for s in svcs if "clusterIP" in s.spec])
        lo, _, hi = node_ports.partition("-")
        alloc = Allocator(cidr, (int(lo), int(hi)))
        for t in taken or []:
            alloc.ips.add(str(t.get("clusterIP")))
            alloc.ports |= {(p.get("nodePort"), p.get("protocol", "TCP")) for p in t.get("ports") or []
                            if isinstance(p, dict)}
        for s in svcs:
            if "clusterIP" in s.spec:
                alloc.ips.add(s.spec["clusterIP"])
            for i, p in enumerate(s.spec["ports"]):
                self._claim_node_port(alloc, s, i, p.get("nodePort"), p["protocol"])
            self._claim_node_port(alloc, s, None, s.spec.get("healthCheckNodePort"), "TCP")
        for s in sorted(svcs, key=lambda s: s.obj.key):
            key = s.obj.key
            if s.allocate_cluster_ip:
                s.spec["clusterIP"] = alloc.cluster_ip(key)
                self.notes.append(f"Service {key}: clusterIP {s.spec['clusterIP']} allocated from {cidr}")
            for p in s.spec["ports"]:
                if p["nodePort"] is None and s.spec["type"] != "ClusterIP" \
                        and s.spec.get("allocateLoadBalancerNodePorts", True):
                    p["nodePort"] = alloc.node_port(f"{key}:{p['name']}", p["protocol"])
                    self.notes.append(f"Service {key}: port {p['name'] or p['port']} nodePort {p['nodePort']} "
                                      f"allocated from {node_ports}")
            if s.allocate_health_check:
                s.spec["healthCheckNodePort"] = alloc.node_port(f"{key}/healthz", "TCP")
                self.notes.append(f"Service {key}: healthCheckNodePort {s.spec['healthCheckNodePort']} allocated")
            self._endpoints(s, pods)
        return svcs, cidr

    def _claim_node_port(self, alloc: Allocator, s: ServiceIn, i: int | None, port: int | None, proto: str) -> None:
        if not port:
            return
        path = "spec.healthCheckNodePort" if i is None else f"spec.ports[{i}].nodePort"
        if not alloc.lo <= port <= alloc.hi:
            self.problems.append(s.obj.problem(path, f"Invalid value: {port}: provided port is not in the valid "
                                                     f"range. The range of valid ports is {alloc.lo}-{alloc.hi}"))
        elif (port, proto) in alloc.ports:
            self.problems.append(s.obj.problem(path, f"Invalid value: {port}: provided port is already allocated"))
        alloc.ports.add((port, proto))

    def _service_cidr(self, ips: list[str]) -> str:
        net = ipaddress.IPv4Network(DEFAULT_SERVICE_CIDR)
        addrs = [ipaddress.IPv4Address(ip) for ip in ips]
        if all(a in net for a in addrs):
            return DEFAULT_SERVICE_CIDR
        net = ipaddress.IPv4Network(f"{addrs[0]}/16", strict=False)
        while not all(a in net for a in addrs):
            net = net.supernet()
        self.notes.append(f"serviceCIDR {net} inferred from the clusterIPs (the smallest /16 or wider holding them)")
        return str(net)

    # -- endpoints -------------------------------------------------------------------------------
    def _slices(self, key: str) -> list[K8sObject]:
        ns, _, name = key.partition("/")
        out = []
        for e in self.kind("EndpointSlice"):
            labels = _meta(e).get("labels") or {}
            if e.namespace != ns or labels.get(SERVICE_NAME_LABEL) != name:
                continue
            skip = next((k for k in SKIP_LABELS if k in labels), None)
            if skip:
                self.notes.append(f"EndpointSlice {e.key}: labelled {skip}: kube-proxy does not watch it; left out")
                continue
            out.append(e)
        return out

    def _from_slices(self, s: ServiceIn) -> list[_Ep] | None:
        slices = self._slices(s.obj.key)
        if slices:
            return self._dedupe(s, slices, [ep for sl in slices for ep in self._slice_eps(sl)])
        legacy = [e for e in self.kind("Endpoints") if e.key == s.obj.key]
        if legacy:
            return [ep for e in legacy for ep in self._endpoints_eps(e)]
        return None

    def _node(self, name: object) -> str | None:
        return str(name) if name in self.nodes else None

    def _slice_eps(self, sl: K8sObject) -> list[_Ep]:
        if sl.data.get("addressType", "IPv4") != "IPv4":
            self.notes.append(f"EndpointSlice {sl.key}: addressType {sl.data['addressType']} not modelled; left out")
            return []
        ports = tuple(sorted((str(p.get("name") or ""), int(p["port"])) for p in sl.data.get("ports") or []
                             if p.get("port")))
        out = []
        for i, e in enumerate(sl.data.get("endpoints") or []):
            addrs = e.get("addresses") or []
            for j, a in enumerate(addrs):
                if not ipv4(a):
                    self.problems.append(sl.problem(f"endpoints[{i}].addresses[{j}]", f"Invalid value: {a!r}: must be "
                                                    "a valid IPv4 address (addressType IPv4)"))
            if len(addrs) > 1:
                self.notes.append(f"EndpointSlice {sl.key}: endpoints[{i}] has {len(addrs)} addresses; kube-proxy "
                                  f"uses the first, {addrs[0]}")
            if not addrs or not ipv4(addrs[0]):
                continue
            c = e.get("conditions") or {}
            ready = c.get("ready") is not False  # nil means ready (endpointslicecache)
            serving = c.get("serving") is not False  # nil means serving
            node = e.get("nodeName") or (e.get("topology") or {}).get("kubernetes.io/hostname")
            hints = e.get("hints")
            kept = None if hints is None else (
                tuple(sorted(str(z.get("name")) for z in hints.get("forZones") or [] if isinstance(z, dict))),
                tuple(sorted(str(n.get("name")) for n in hints.get("forNodes") or [] if isinstance(n, dict))))
            out.append(_Ep(addrs[0], self._node(node), ready, serving, c.get("terminating") is True, ports, kept,
                           f"EndpointSlice {sl.key} endpoints[{i}]"))
        return out

    def _dedupe(self, s: ServiceIn, slices: list[K8sObject], eps: list[_Ep]) -> list[_Ep]:
        """One endpoint per address and port set, as endpointslicecache keys them (ip:port): the same
        endpoint in two slices is one; two that differ in what kube-proxy reads are refused, since
        which one kube-proxy keeps depends on its map order (and on the node)."""
        seen: dict[tuple[str, tuple[tuple[str, int], ...]], _Ep] = {}
        for e in eps:
            key = (e.ip, e.ports)
            first = seen.get(key)
            if first is None:
                seen[key] = e
            elif first.same(e):
                self.notes.append(f"Service {s.obj.key}: {e.where} repeats {first.where} ({e.ip}); kube-proxy "
                                  "keeps one")
            else:
                at = next(sl for sl in slices if e.where.startswith(f"EndpointSlice {sl.key} "))
                self.problems.append(at.problem(e.where.rsplit(" ", 1)[1], f"{e.ip} is also in {first.where} with "
                                                "other conditions, node or hints; which one kube-proxy keeps depends "
                                                "on the order it reads them and on the node: make them agree or "
                                                "remove one"))
        return list(seen.values())

    def _endpoints_eps(self, e: K8sObject) -> list[_Ep]:
        out = []
        for i, sub in enumerate(e.data.get("subsets") or []):
            for j, p in enumerate(sub.get("ports") or []):
                if p.get("port") is None:
                    self.problems.append(e.problem(f"subsets[{i}].ports[{j}].port", "Required value"))
            ports = tuple(sorted((str(p.get("name") or ""), int(p["port"])) for p in sub.get("ports") or []
                                 if p.get("port") is not None))
            for ready, field_ in ((True, "addresses"), (False, "notReadyAddresses")):
                out += [_Ep(a["ip"], self._node(a.get("nodeName")), ready, ready, False, ports)
                        for a in sub.get(field_) or [] if ipv4(a.get("ip"))]
        return out

    def _from_pods(self, s: ServiceIn, pods: list[dict[str, Any]]) -> tuple[list[_Ep], bool]:
        """The selector's endpoints and whether every selected pod has every port."""
        sel = s.spec.get("selector")
        if not sel:
            return [], True
        complete = True
        out = []
        for p in pods:
            if p["namespace"] != s.spec["namespace"] or any(p["labels"].get(k) != v for k, v in sel.items()):
                continue
            numbers = []
            for sp in s.spec["ports"]:
                t = sp["targetPort"]
                if isinstance(t, str):
                    t = next((pp["port"] for pp in p["ports"] if pp.get("name") == t
                              and pp["protocol"] == sp["protocol"]), None)
                if t is None:
                    complete = False  # the EndpointSlice controller leaves the pod out of this port
                    continue
                numbers.append((sp["name"], t))
            if numbers:
                ready = p["ready"] and not p["terminating"]
                out.append(_Ep(p["ip"], p["node"], ready, p["ready"], p["terminating"], tuple(sorted(numbers))))
        return out, complete

    def _endpoints(self, s: ServiceIn, pods: list[dict[str, Any]]) -> None:
        key, spec = s.obj.key, s.spec
        selected, complete = self._from_pods(s, pods)
        sliced = self._from_slices(s)
        eps = selected if sliced is None else sliced
        names = [p["name"] for p in spec["ports"]]
        numbers: dict[str, set[int]] = {n: {dict(e.ports)[n] for e in eps if n in dict(e.ports)} for n in names}
        for p in spec["ports"]:
            found = numbers[p["name"]]
            if len(found) == 1:
                p["targetPort"] = next(iter(found))
            elif isinstance(p["targetPort"], str):
                if not found:
                    self.notes.append(f"Service {key}: targetPort {p['targetPort']!r} names no port of an endpoint; "
                                      f"port {p['port']} used")
                    p["targetPort"] = p["port"]
                else:
                    p["targetPort"] = Counter(dict(e.ports).get(p["name"]) for e in eps).most_common(1)[0][0]
        per_endpoint = {n: f for n, f in numbers.items() if len(f) > 1}
        if per_endpoint and len(names) > 1:
            self.problems.append(s.obj.problem("spec.ports", "endpoints serve the same port name on different "
                                               "numbers; kpemu models that for single-port Services only"))
            return
        same = sorted(selected, key=lambda e: e.ip) == sorted(sliced or [], key=lambda e: e.ip)
        hinted = sliced is not None and (spec.get("trafficDistribution") is not None
                                         or any(e.hints is not None for e in eps))
        if spec.get("selector") and (sliced is None or same) and complete and selected and not per_endpoint \
                and not hinted:
            return  # the selector says it all
        if spec.get("selector"):
            why = ("the EndpointSlices' hints are kube-proxy's input" if hinted
                   else "the selector matches no pod" if not selected
                   else "the EndpointSlices differ from the selector's pods" if not same and sliced is not None
                   else "the selector's pods serve the named targetPort on different numbers" if per_endpoint
                   else "some selected pods lack the named targetPort")
            self.notes.append(f"Service {key}: explicit endpoints ({why})")
            del spec["selector"]
        elif sliced is None:
            self.notes.append(f"Service {key}: no selector and no EndpointSlices or Endpoints: no endpoints")
        only = spec["ports"][0] if len(names) == 1 else None
        spec["endpoints"] = [self._endpoint(e, only, hinted)
                             for e in sorted(eps, key=lambda e: ipaddress.IPv4Address(e.ip))]

    @staticmethod
    def _endpoint(e: _Ep, only: dict[str, Any] | None, hinted: bool = False) -> dict[str, Any]:
        """An explicit endpoint; its own port only for a single-port Service (the topology's
        endpoint port applies to every port of the Service); `hinted`: its hints written, {} for none."""
        out: dict[str, Any] = {"ip": e.ip}
        port = dict(e.ports).get(only["name"]) if only else None
        if port is not None and port != only["targetPort"]:
            out["port"] = port
        if e.node:
            out["node"] = e.node
        if not e.ready:
            out["ready"] = False
        if not e.serving:  # unset reads as serving, as endpointslicecache reads a nil condition
            out["serving"] = False
        if e.terminating:
            out["terminating"] = True
        if e.hints is not None or hinted:
            zones, nodes = e.hints or ((), ())
            out["hints"] = {k: v for k, v in (("forZones", list(zones)), ("forNodes", list(nodes))) if v}
        return out

    # -- the whole ------------------------------------------------------------------------------
    def refuse_unmodelled(self) -> None:
        """A problem for every field set that asks for what kpemu does not model (kpemu.model.unmodelled)."""
        for u in refused_fields():
            for o in self.kind(str(u.kind)):
                value: Any = o.data
                for k in str(u.field).split("."):
                    value = value.get(k) if isinstance(value, dict) else None
                if isinstance(value, dict) and u.modelled_keys:
                    value = {k: v for k, v in value.items() if k not in u.modelled_keys}
                if value is None or value == u.default or value == {}:
                    continue
                if u.without_slices and self._from_slices_exist(o.key):
                    continue
                self.problems.append(o.problem(str(u.field), f"kpemu does not model {u.what} ({u.effect}): "
                                                             f"remove {u.field} to import the rest"))

    def _from_slices_exist(self, key: str) -> bool:
        ns, _, name = key.partition("/")
        return any(e.namespace == ns and (_meta(e).get("labels") or {}).get(SERVICE_NAME_LABEL) == name
                   for e in self.kind("EndpointSlice")) or any(e.key == key for e in self.kind("Endpoints"))

    def run(self) -> Imported:
        self.refuse_unmodelled()
        cni = self.read_nodes()
        kube_proxy = self.kube_proxy()
        pods = self.read_pods()
        services, cidr = self.read_services(pods, kube_proxy.get("nodePortRange", "30000-32767"))
        if self.problems:
            raise InputError(self.problems)
        nodes = list(self.nodes.values())
        for n in nodes:
            if n["podCIDR"] is None:
                n["podCIDR"] = self._pod_cidr(n, pods, cni)
            if n.get("tunnelIP") is None:
                n.pop("tunnelIP", None)
        data: dict[str, Any] = {
            "name": self.name or "imported",
            "cni": cni,
            "kubeProxy": kube_proxy,
            "underlay": self._underlay(nodes),
            "serviceCIDR": cidr,
        }
        if kube_proxy.get("clusterCIDR"):
            data["clusterCIDR"] = kube_proxy["clusterCIDR"]
        data["nodes"] = nodes
        data["pods"] = [_compact_pod(p) for p in pods]
        data["services"] = [_compact_service(s.spec) for s in services]
        return Imported(data, self.notes, not_modelled(self.objects))

    def _pod_cidr(self, node: dict[str, Any], pods: list[dict[str, Any]], cni: str) -> str:
        """A node without spec.podCIDR (calico IPAM does not use it): the /24 around its tunnel
        address, widened until its pods fit."""
        seed = node.get("tunnelIP") or next((p["ip"] for p in pods if p["node"] == node["name"]), None)
        if seed is None:
            obj = next(o for o in self.kind("Node") if o.name == node["name"])
            raise InputError([obj.problem("spec.podCIDR", "Required value (no podCIDR, tunnel address or pod to "
                                                          "infer it from)")])
        net = ipaddress.IPv4Network(f"{seed}/24", strict=False)
        while not all(ipaddress.IPv4Address(p["ip"]) in net for p in pods if p["node"] == node["name"]):
            net = net.supernet()
        self.notes.append(f"Node {node['name']}: podCIDR {net} inferred ({cni}: no spec.podCIDR)")
        return str(net)

    @staticmethod
    def _underlay(nodes: list[dict[str, Any]]) -> str:
        addrs = [ipaddress.IPv4Address(n["ip"]) for n in nodes]
        net = ipaddress.IPv4Network(f"{addrs[0]}/24", strict=False)
        while not all(a in net for a in addrs):
            net = net.supernet()
        return str(net)


def _compact_pod(p: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in p.items() if v not in ({}, [], None)}
    if out.get("namespace") == "default":
        del out["namespace"]
    if out.get("ready") is True:
        del out["ready"]
    if out.get("terminating") is False:
        del out["terminating"]
    out["ports"] = [{k: v for k, v in pp.items() if not (k == "protocol" and v == "TCP")}
                    for pp in p["ports"]]
    if not out["ports"]:
        del out["ports"]
    return out


_SERVICE_DEFAULTS = {"namespace": "default", "type": "ClusterIP", "sessionAffinity": "None",
                     "externalTrafficPolicy": "Cluster", "internalTrafficPolicy": "Cluster"}


_SERVICE_ORDER = ("name", "namespace", "type", "clusterIP", "selector", "endpoints", "ports")


def _compact_service(s: dict[str, Any]) -> dict[str, Any]:
    """The Service in topology form without the fields that equal their defaults, keys in the
    order of the topology examples."""
    keys = [k for k in _SERVICE_ORDER if k in s] + [k for k in s if k not in _SERVICE_ORDER]
    out = {k: s[k] for k in keys if (k == "endpoints" or s[k] not in ([], None)) and _SERVICE_DEFAULTS.get(k) != s[k]}
    out["ports"] = [{k: v for k, v in p.items() if v not in (None, "") and not (k == "protocol" and v == "TCP")}
                    for p in s["ports"]]
    return out


def topology_data(objects: list[K8sObject], cni: str | None = None, name: str | None = None) -> Imported:
    """The kpemu topology data equivalent to `objects`; InputError lists what Kubernetes would reject."""
    return _Import(objects, cni, name).run()


def _pod_form(p: dict[str, Any]) -> dict[str, Any]:
    """A topology pod as the import reads pods (defaults filled, ports as mappings)."""
    ports = [{"port": x} if isinstance(x, int) else dict(x) for x in p.get("ports") or []]
    return {"name": p.get("name"), "namespace": p.get("namespace", "default"), "node": p.get("node"),
            "ip": p.get("ip"), "labels": p.get("labels") or {},
            "ports": [{**x, "protocol": x.get("protocol", "TCP")} for x in ports],
            "ready": p.get("ready", True), "terminating": p.get("terminating", False)}


def embed_services(data: dict[str, Any], file: str, lines: Lines | None = None, doc: int = 0) -> dict[str, Any]:
    """A kpemu topology whose `services` hold Kubernetes Service objects (pasted manifests, with
    their metadata/spec wrapper): each becomes a topology Service in place, defaulted and validated
    as the API server would, its endpoints the topology's pods its selector picks. Headless and
    ExternalName Services are dropped (they program nothing). `lines` (from read_yaml, document `doc`)
    puts the line into error messages."""
    entries = data.get("services")
    if not isinstance(entries, list) or not any(is_kubernetes(e) for e in entries):
        return data
    objs = {i: K8sObject(str(e["kind"]), e, file, f"services[{i}]", (doc, "services", i), lines or {})
            for i, e in enumerate(entries) if is_kubernetes(e)}
    bad = [located(file, o.lines, (*o.root, "kind"), f"services[{i}].kind", f"Unsupported value: {o.kind!r}: "
                   "expected a Service") for i, o in objs.items() if o.kind != "Service"]
    if bad:
        raise InputError(bad)
    imp = _Import(list(objs.values()), None, None)
    imp.nodes = {n["name"]: n for n in data.get("nodes") or [] if isinstance(n, dict) and "name" in n}
    pods = [_pod_form(p) for p in data.get("pods") or [] if isinstance(p, dict)]
    taken = [e for e in entries if isinstance(e, dict) and not is_kubernetes(e)]
    node_ports = (data.get("kubeProxy") or {}).get("nodePortRange", "30000-32767")
    services, _ = imp.read_services(pods, node_ports, data.get("serviceCIDR"), taken)
    if imp.problems:
        raise InputError(imp.problems)
    converted = {s.obj.where: _compact_service(s.spec) for s in services}
    out = [converted.get(f"services[{i}]") if i in objs else e for i, e in enumerate(entries)]
    return {**data, "services": [e for e in out if e is not None]}
