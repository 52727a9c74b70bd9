"""The topology as a kube-proxy release reads it, where a field's meaning changed by release.

- `loadBalancerProxyIPs` (ingress with ipMode: Proxy): the LoadBalancerIPMode gate (beta, on, 1.30;
  GA 1.32) makes kube-proxy skip them (`IsVIPMode`, pkg/proxy/serviceport.go); 1.29 and older
  program them like any ingress IP.
"""

from __future__ import annotations

from kpemu.model.topology import Topology

IP_MODE_SINCE = 30  # LoadBalancerIPMode on by default


def as_seen(topo: Topology) -> Topology:
    """`topo` with each Service's ingress IPs as the kube-proxy release of `topo.kubeProxy` programs them."""
    if topo.kubeProxy.minor >= IP_MODE_SINCE or not any(s.loadBalancerProxyIPs for s in topo.services):
        return topo
    services = [s.model_copy(update={"loadBalancerIPs": [*s.loadBalancerIPs, *s.loadBalancerProxyIPs],
                                     "loadBalancerProxyIPs": []}) if s.loadBalancerProxyIPs else s
                for s in topo.services]
    return topo.model_copy(update={"services": services})
