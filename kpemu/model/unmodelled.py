"""What kpemu does not model of kube-proxy's data path: one list, read by `kpemu import` (which refuses
an object that sets a field listed here, since kube-proxy's rules would differ) and by
scripts/unmodelled_readme.py (the README section "What kpemu does not model"). Pure data.
"""

from __future__ import annotations

from dataclasses import dataclass

from kpemu.model.topology import FeatureGates


@dataclass(frozen=True)
class Unmodelled:
    """One behaviour kpemu does not reproduce.

    `kind` and `field` (dotted path, as `kubectl get -o yaml` prints it) name the input that asks for
    it: `kpemu import` refuses an object of that kind where the field is set to anything but its
    default (`default`, absent counting as the default)."""

    what: str
    effect: str  # what kube-proxy does that kpemu's rules and labs do not
    kind: str | None = None
    field: str | None = None
    default: object = None
    without_slices: bool = False  # refused only for a Service whose endpoints come from its pods
    modelled_keys: tuple[str, ...] = ()  # a mapping field's keys kpemu does model (not refused)


UNMODELLED: tuple[Unmodelled, ...] = (
    Unmodelled("IPv6 and dual-stack", "kube-proxy runs one proxier per family (ip6tables, table ip6 "
               "kube-proxy, KUBE-6-* ipsets); kpemu programs IPv4 only and leaves a Service's IPv6 half out"),
    Unmodelled("feature gates but those kubeProxy.featureGates lists", "a gate changes what kube-proxy programs "
               "(e.g. PreferSameTrafficDistribution in 1.33); kpemu models each release's defaults",
               "KubeProxyConfiguration", "featureGates", modelled_keys=tuple(FeatureGates.model_fields)),
    Unmodelled("hostnameOverride", "kube-proxy's node name decides which endpoints are local; kpemu uses "
               "the Node's name", "KubeProxyConfiguration", "hostnameOverride", ""),
    Unmodelled("IPVS strictARP", "arp_ignore=1 and arp_announce=2 on the node", "KubeProxyConfiguration",
               "ipvs.strictARP", False),
    Unmodelled("IPVS timeouts", "ipvsadm --set tcp tcpfin udp", "KubeProxyConfiguration", "ipvs.tcpTimeout", "0s"),
    Unmodelled("IPVS timeouts", "ipvsadm --set tcp tcpfin udp", "KubeProxyConfiguration", "ipvs.tcpFinTimeout",
               "0s"),
    Unmodelled("IPVS timeouts", "ipvsadm --set tcp tcpfin udp", "KubeProxyConfiguration", "ipvs.udpTimeout", "0s"),
    Unmodelled("publishNotReadyAddresses without EndpointSlices", "the EndpointSlice controller marks every "
               "selected pod ready; give the EndpointSlices (kubectl get endpointslices -A -o yaml)", "Service",
               "spec.publishNotReadyAddresses", False, without_slices=True),
    Unmodelled("IPVS graceful termination", "a removed TCP real server keeps weight 0 until its connections "
               "drain; kpemu's endpoint changes remove it at once"),
    Unmodelled("partial syncs and resyncs", "kube-proxy rewrites only changed chains and resyncs hourly; kpemu "
               "writes one full first sync per node (a fault's re-sync is a full restore)"),
    Unmodelled("UDP conntrack cleanup", "kube-proxy 1.32+ deletes stale UDP conntrack entries (and runs a "
               "reconciler); kpemu deletes none"),
    Unmodelled("conntrack sysctls other than tcpBeLiberal", "nf_conntrack_max by CPU count, TCP established "
               "and close-wait timeouts, UDP timeouts; the node namespaces keep the kernel's defaults"),
    Unmodelled("nodePortAddresses on CNI interfaces", "in iptables and nftables mode only the node IP (and "
               "127.0.0.1) are candidate NodePort addresses; addresses on cni0 or flannel.1 are not"),
    Unmodelled("several ServiceCIDRs", "the nftables cluster-ips-check drop uses one serviceCIDR"),
    Unmodelled("topology-aware hints from the annotation", "the EndpointSlice controller's proportional "
               "zone hints (service.kubernetes.io/topology-mode: Auto) are not computed; give the "
               "EndpointSlices, or trafficDistribution for a selector's pods"),
    Unmodelled("metrics", "nothing listens on kube-proxy's metrics port 10249"),
)


def refused_fields() -> tuple[Unmodelled, ...]:
    """The entries `kpemu import` refuses, by the field that asks for them."""
    return tuple(u for u in UNMODELLED if u.kind and u.field)
