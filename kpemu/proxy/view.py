"""The topology as a kube-proxy release reads it, where a field's meaning changed by release, and the
Services kube-proxy does not read at all.

- `loadBalancerProxyIPs` (ingress with ipMode: Proxy): the LoadBalancerIPMode gate (beta, on, 1.30;
  GA 1.32) makes kube-proxy skip them (`IsVIPMode`, pkg/proxy/serviceport.go); 1.29 and older
  program them like any ingress IP.
- a Service labelled `service.kubernetes.io/service-proxy-name` or `service.kubernetes.io/headless`:
  kube-proxy's informers list Services and EndpointSlices with the label selector
  `!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless` (cmd/kube-proxy/app/
  server.go, every release kpemu models), so it never sees the Service and writes no rule for it
  (`Service.left_out`, kpemu.model.topology.KUBE_PROXY_SKIPS).
"""

from __future__ import annotations

from kpemu.model.topology import Topology

IP_MODE_SINCE = 30  # LoadBalancerIPMode on by default


def unproxied(topo: Topology, address: str) -> str | None:
    """Why kube-proxy writes nothing for `address` (an IP), when it is an address of a Service kube-proxy
    leaves out: "Service default/x (10.96.0.30) is labelled ...". None otherwise."""
    for s in topo.services:
        why = s.left_out
        if why and address in (s.clusterIP, *s.externalIPs, *s.loadBalancerIPs, *s.loadBalancerProxyIPs):
            return (f"kube-proxy writes no rule for {address}: Service {s.key} is {why}, so kube-proxy's "
                    "informers (label selector !service.kubernetes.io/service-proxy-name,"
                    "!service.kubernetes.io/headless) never list it")
    return None


def as_seen(topo: Topology) -> Topology:
    """`topo` as the kube-proxy release of `topo.kubeProxy` reads it: without the Services it leaves out,
    each Service's ingress IPs as it programs them."""
    services = [s for s in topo.services if s.left_out is None]
    if topo.kubeProxy.minor < IP_MODE_SINCE:
        services = [s.model_copy(update={"loadBalancerIPs": [*s.loadBalancerIPs, *s.loadBalancerProxyIPs],
                                         "loadBalancerProxyIPs": []}) if s.loadBalancerProxyIPs else s
                    for s in services]
    if services == topo.services:
        return topo
    return topo.model_copy(update={"services": services})
